"""Triton kernels behind odin_ns.kernels (imported lazily: only when a Triton backend call is made).

All kernels are memory bound; they are written so that each byte of the operands is read once and scope bits
decide which loads are issued at all (masked-off loads generate no memory traffic).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

BLOCK_WORDS = 1024  # bitmap words per program (4 KB of int32)
MASK_BLOCK = 2048  # bits per program in bitmap_to_mask
ADAM_BLOCK = 512  # param elements per program: small blocks let partially selected regions skip more work
BLOCK_ROW_ELEMENTS = 4096  # target elements per program in the row gather/scatter kernels
MAX_PACKED_TENSORS = 8  # tensors one gather/scatter launch handles; longer lists take several launches
ISECT_GAUSSIANS = 256  # flat Gaussians per program in the intersection fill (untuned)
ISECT_TILES = 4  # tiles of each Gaussian's rectangle written per loop step: most rectangles have 1-4 (untuned)
ISECT_PADDING = 1024  # slots per program checked for padding in the same launch
FINITE_ROWS = 64  # gradient-table rows per program in the non-finite column watch
GUARD_ROWS = 4096  # rows per program in the predicted-scope guard
_BINARY_OPS = {"or": 0, "and": 1, "andnot": 2}


@triton.jit
def _popcount32(words):
    """Per-element popcount of int32 words (SWAR on the unsigned bit pattern)."""
    x = words.to(tl.uint32, bitcast=True)
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return ((x * 0x01010101) >> 24).to(tl.int32)


@triton.jit
def _pack_kernel(mask_ptr, out_ptr, num_rows, n, num_words, BLOCK_W: tl.constexpr):
    words = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    bits = tl.arange(0, 32)
    positions = words[:, None] * 32 + bits[None, :]
    in_range = positions < n
    any_row = tl.zeros([BLOCK_W, 32], dtype=tl.int32)
    row_ptr = mask_ptr
    for _ in range(num_rows):
        any_row = any_row | tl.load(row_ptr + positions, mask=in_range, other=0).to(tl.int32)
        row_ptr += n
    # Distinct bits never carry, so the sum is the OR of the bits (bit 31 contributes INT32_MIN).
    packed = tl.sum(any_row << bits[None, :], axis=1)
    tl.store(out_ptr + words, packed, mask=words < num_words)


@triton.jit
def _binary_kernel(a_ptr, b_ptr, out_ptr, num_words, OP: tl.constexpr, BLOCK_W: tl.constexpr):
    words = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    valid = words < num_words
    a = tl.load(a_ptr + words, mask=valid)
    b = tl.load(b_ptr + words, mask=valid)
    if OP == 0:
        result = a | b
    elif OP == 1:
        result = a & b
    else:
        result = a & ~b
    tl.store(out_ptr + words, result, mask=valid)


@triton.jit
def _count_kernel(a_ptr, b_ptr, counters_ptr, ratio_ptr, num_words, HAS_B: tl.constexpr, BLOCK_W: tl.constexpr):
    """counters[0] += |a| and, with b, counters[1] += |a & b|; the last program to finish also writes the ratio.

    The ratio is fused (counters[2] counts finished programs) so a hazard check is one launch, not a launch plus
    a handful of torch ops on the counts. Atomics are acq_rel, so the last program sees every program's counts.
    """
    words = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    valid = words < num_words
    a = tl.load(a_ptr + words, mask=valid, other=0)
    tl.atomic_add(counters_ptr, tl.sum(_popcount32(a)).to(tl.int64))
    if HAS_B:
        b = tl.load(b_ptr + words, mask=valid, other=0)
        tl.atomic_add(counters_ptr + 1, tl.sum(_popcount32(a & b)).to(tl.int64))
        if tl.atomic_add(counters_ptr + 2, 1) == tl.num_programs(0) - 1:
            read_count = tl.atomic_add(counters_ptr, 0)
            shared_count = tl.atomic_add(counters_ptr + 1, 0)
            ratio = tl.div_rn(shared_count.to(tl.float32), tl.maximum(read_count, 1).to(tl.float32))
            tl.store(ratio_ptr, tl.where(read_count > 0, ratio, 0.0))


@triton.jit
def _word_popcount_kernel(a_ptr, out_ptr, num_words, BLOCK_W: tl.constexpr):
    words = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    valid = words < num_words
    tl.store(out_ptr + words, _popcount32(tl.load(a_ptr + words, mask=valid, other=0)), mask=valid)


@triton.jit
def _emit_indices_kernel(a_ptr, inclusive_ptr, out_ptr, num_words, BLOCK_W: tl.constexpr):
    """Write 32*w+i for each set bit i of word w at its rank: word's exclusive prefix + rank within the word."""
    words = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    valid = words < num_words
    word = tl.load(a_ptr + words, mask=valid, other=0)
    start = tl.load(inclusive_ptr + words, mask=valid, other=0) - _popcount32(word)
    bits = tl.arange(0, 32)
    is_set = (word[:, None] >> bits[None, :]) & 1
    rank = tl.cumsum(is_set, axis=1) - is_set
    index = words[:, None].to(tl.int64) * 32 + bits[None, :]
    tl.store(out_ptr + start[:, None] + rank, index, mask=(is_set != 0) & valid[:, None])


@triton.jit
def _to_mask_kernel(a_ptr, out_ptr, n, BLOCK: tl.constexpr):
    positions = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = positions < n
    word = tl.load(a_ptr + positions // 32, mask=valid, other=0)
    tl.store(out_ptr + positions, ((word >> (positions % 32)) & 1).to(tl.uint8), mask=valid)


@triton.jit
def _adam_update(
    param_ptr, grad_ptr, exp_avg_ptr, exp_avg_sq_ptr, offsets, mask,
    one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size, HAS_GRAD: tl.constexpr,
):
    """torch's single-tensor Adam, op for op, on the elements at ``offsets`` (``mask`` None = all of them).
    ``HAS_GRAD`` False: the gradient is zero (a drift step), put through the same operations as a loaded one."""
    exp_avg = tl.load(exp_avg_ptr + offsets, mask=mask)
    exp_avg_sq = tl.load(exp_avg_sq_ptr + offsets, mask=mask)
    param = tl.load(param_ptr + offsets, mask=mask)
    if HAS_GRAD:
        grad = tl.load(grad_ptr + offsets, mask=mask)
    else:
        grad = tl.zeros_like(exp_avg)
    # exp_avg.lerp_(grad, 1 - beta1): torch's lerp switches formula at weight 0.5 for accuracy.
    exp_avg = tl.where(
        one_minus_beta1 < 0.5,
        exp_avg + one_minus_beta1 * (grad - exp_avg),
        grad - (grad - exp_avg) * (1.0 - one_minus_beta1),
    )
    exp_avg_sq = exp_avg_sq * beta2 + one_minus_beta2 * grad * grad
    # Hardware sqrt/division (<= 2 ulp from IEEE): the exact ones made partial-scope blocks compute bound.
    param = param + neg_step_size * (exp_avg / (tl.sqrt(exp_avg_sq) / bias_correction2_sqrt + eps))
    tl.store(exp_avg_ptr + offsets, exp_avg, mask=mask)
    tl.store(exp_avg_sq_ptr + offsets, exp_avg_sq, mask=mask)
    tl.store(param_ptr + offsets, param, mask=mask)


@triton.jit
def _selective_adam_kernel(
    param_ptr,
    grad_ptr,
    exp_avg_ptr,
    exp_avg_sq_ptr,
    rows_ptr,
    start,
    end,
    one_minus_beta1,
    beta2,
    one_minus_beta2,
    bias_correction2_sqrt,
    eps,
    neg_step_size,
    hyper_ptr,
    ROW_SIZE: tl.constexpr,
    HAS_ROWS: tl.constexpr,
    COMPLEMENT: tl.constexpr,
    HAS_GRAD: tl.constexpr,
    PER_COLUMN: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Adam on the flat elements [start, end) whose row's bit is set (``COMPLEMENT``: whose row's bit is clear).

    A block whose elements are all selected takes an unmasked (vectorised) path, one with none does no memory
    traffic beyond its bitmap words, and a mixed block issues loads only for selected rows. ``PER_COLUMN``: the step
    size and eps of each element and the bias correction come from the device vector ``hyper_ptr`` (a packed table
    of parameter groups; see ``selective_adam_step``), else from the scalars.
    """
    block_start = start + tl.program_id(0).to(tl.int64) * BLOCK
    local = tl.arange(0, BLOCK)
    active = local < end - block_start
    # Row and column of each element, dividing only small int32 values by the constant ROW_SIZE.
    first_row = block_start // ROW_SIZE
    offset_in_row = (block_start - first_row * ROW_SIZE).to(tl.int32) + local
    if PER_COLUMN:
        column = offset_in_row % ROW_SIZE
        neg_step_size = tl.load(hyper_ptr + column)
        eps = tl.load(hyper_ptr + ROW_SIZE + column)
        bias_correction2_sqrt = tl.load(hyper_ptr + 2 * ROW_SIZE)
    if HAS_ROWS:
        row = first_row + offset_in_row // ROW_SIZE
        word = tl.load(rows_ptr + (row >> 5), mask=active, other=0)
        active = active & ((((word >> (row & 31).to(tl.int32)) & 1) != 0) != COMPLEMENT)
    num_active = tl.sum(active.to(tl.int32), axis=0)
    param_ptr += block_start
    if HAS_GRAD:
        grad_ptr += block_start
    exp_avg_ptr += block_start
    exp_avg_sq_ptr += block_start
    if num_active == BLOCK:
        _adam_update(
            param_ptr, grad_ptr, exp_avg_ptr, exp_avg_sq_ptr, local, None,
            one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size, HAS_GRAD,
        )
    elif num_active > 0:
        _adam_update(
            param_ptr, grad_ptr, exp_avg_ptr, exp_avg_sq_ptr, local, active,
            one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size, HAS_GRAD,
        )


@triton.jit
def _rows_copy_kernel(
    tensor_ptrs,
    indices_ptr,
    buf_ptr,
    num_indices,
    ROW_SIZES: tl.constexpr,
    PADDED_ROW_SIZES: tl.constexpr,
    COLUMN_OFFSETS: tl.constexpr,
    BUF_WIDTH: tl.constexpr,
    GATHER: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Copy rows indices[j] of each tensor to/from columns COLUMN_OFFSETS[t].. of row j of buf."""
    slots = tl.program_id(0).to(tl.int64) * BLOCK_K + tl.arange(0, BLOCK_K)
    valid_slots = slots < num_indices
    rows = tl.load(indices_ptr + slots, mask=valid_slots, other=0).to(tl.int64)
    for t in tl.static_range(len(ROW_SIZES)):
        columns = tl.arange(0, PADDED_ROW_SIZES[t])
        valid = valid_slots[:, None] & (columns[None, :] < ROW_SIZES[t])
        tensor_offsets = rows[:, None] * ROW_SIZES[t] + columns[None, :]
        buf_offsets = slots[:, None] * BUF_WIDTH + COLUMN_OFFSETS[t] + columns[None, :]
        if GATHER:
            tl.store(buf_ptr + buf_offsets, tl.load(tensor_ptrs[t] + tensor_offsets, mask=valid), mask=valid)
        else:
            tl.store(tensor_ptrs[t] + tensor_offsets, tl.load(buf_ptr + buf_offsets, mask=valid), mask=valid)


@triton.jit
def _tile_rectangle(means2d_ptr, radii_ptr, gauss, valid, tile_size, tile_width, tile_height):
    """Flat Gaussian ``gauss``'s tile rectangle: first tile (x0, y0), width in tiles, and its pair count (0 unless
    its radius is > 0), in the same float32 operations as the torch rule (``odin_ns.kernels.isect.tile_rectangles``):
    correctly rounded divisions, then floor and ceil of a difference and a sum, clamped to the grid."""
    radius = tl.load(radii_ptr + gauss, mask=valid, other=0)
    r = tl.div_rn(radius.to(tl.float32), tile_size)
    cx = tl.div_rn(tl.load(means2d_ptr + 2 * gauss, mask=valid, other=0.0), tile_size)
    cy = tl.div_rn(tl.load(means2d_ptr + 2 * gauss + 1, mask=valid, other=0.0), tile_size)
    x0 = tl.minimum(tl.maximum(tl.floor(cx - r).to(tl.int64), 0), tile_width)
    x1 = tl.minimum(tl.maximum(tl.ceil(cx + r).to(tl.int64), 0), tile_width)
    y0 = tl.minimum(tl.maximum(tl.floor(cy - r).to(tl.int64), 0), tile_height)
    y1 = tl.minimum(tl.maximum(tl.ceil(cy + r).to(tl.int64), 0), tile_height)
    count = tl.where(radius > 0, (x1 - x0) * (y1 - y0), 0)
    return x0, y0, x1 - x0, count


@triton.jit
def _isect_count_kernel(means2d_ptr, radii_ptr, counts_ptr, n_flat, tile_size, tile_width, tile_height,
                        BLOCK_G: tl.constexpr):
    gauss = tl.program_id(0).to(tl.int64) * BLOCK_G + tl.arange(0, BLOCK_G)
    valid = gauss < n_flat
    _, _, _, count = _tile_rectangle(means2d_ptr, radii_ptr, gauss, valid, tile_size, tile_width, tile_height)
    tl.store(counts_ptr + gauss, count, mask=valid)


@triton.jit
def _isect_fill_kernel(
    means2d_ptr,
    radii_ptr,
    ends_ptr,
    depth_bits_ptr,
    keys_ptr,
    ids_ptr,
    n_flat,
    n_gaussians,
    tile_size,
    tile_width,
    tile_height,
    tile_bits,
    padding_key,
    capacity,
    BLOCK_G: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_PAD: tl.constexpr,
):
    """Program p writes the runs of flat Gaussians [p * BLOCK_G, (p + 1) * BLOCK_G) and the padding among slots
    [p * BLOCK_PAD, (p + 1) * BLOCK_PAD).

    A Gaussian's run is slots [ends - count, ends) cut at ``capacity``, its rectangle computed here from its centre
    and radius (no per-Gaussian rectangle tensors to write and read back); its j-th slot holds tile
    (x0 + j % width, y0 + j // width). The loop walks the block's longest run BLOCK_T slots at a time, every
    Gaussian of the block in step (masked once its run is written), so adjacent lanes store adjacent slots. Culled
    Gaussians (count 0) load nothing beyond their rectangle and end.
    """
    pid = tl.program_id(0).to(tl.int64)

    total = tl.minimum(tl.load(ends_ptr + n_flat - 1), capacity)
    slots = pid * BLOCK_PAD + tl.arange(0, BLOCK_PAD)
    padding = (slots >= total) & (slots < capacity)
    tl.store(keys_ptr + slots, tl.zeros([BLOCK_PAD], dtype=tl.int64) + padding_key, mask=padding)
    tl.store(ids_ptr + slots, tl.zeros([BLOCK_PAD], dtype=tl.int32), mask=padding)

    gauss = pid * BLOCK_G + tl.arange(0, BLOCK_G)
    in_range = gauss < n_flat
    x0, y0, span_x, count = _tile_rectangle(means2d_ptr, radii_ptr, gauss, in_range, tile_size, tile_width,
                                            tile_height)
    start = tl.load(ends_ptr + gauss, mask=in_range, other=0) - count
    kept = tl.maximum(tl.minimum(count, capacity - start), 0)
    writes = kept > 0
    # Rectangles span at most the grid's width and height, so their arithmetic fits int32 (tile < 2^tile_bits).
    width = tl.maximum(span_x, 1).to(tl.int32)
    x0 = x0.to(tl.int32)
    y0 = y0.to(tl.int32)
    depth = tl.load(depth_bits_ptr + gauss, mask=writes, other=0).to(tl.int64)  # sign-extended, as gsplat's
    head = ((gauss // n_gaussians) << (32 + tile_bits)) | depth
    ids = gauss.to(tl.int32)
    longest = tl.max(kept, axis=0)
    for first in range(0, longest, BLOCK_T):
        j = (first + tl.arange(0, BLOCK_T)).to(tl.int32)
        write = j[None, :] < kept[:, None]
        row = j[None, :] // width[:, None]
        tile = (y0[:, None] + row) * tile_width + x0[:, None] + j[None, :] - row * width[:, None]
        slot = start[:, None] + j[None, :]
        tl.store(keys_ptr + slot, head[:, None] | (tile.to(tl.int64) << 32), mask=write)
        tl.store(ids_ptr + slot, tl.broadcast_to(ids[:, None], [BLOCK_G, BLOCK_T]), mask=write)


@triton.jit
def _nonfinite_columns_kernel(table_ptr, first_ptr, n_rows, n_cols, unit, BLOCK_R: tl.constexpr,
                              BLOCK_C: tl.constexpr, UNIT_IN_MEMORY: tl.constexpr):
    """Program p reads rows [p * BLOCK_R, (p + 1) * BLOCK_R) of every column; a column holding NaN or Inf there
    lowers its record to ``unit`` (x - x is 0 for every finite x and NaN for NaN and both infinities); with
    ``UNIT_IN_MEMORY`` ``unit`` points at it."""
    if UNIT_IN_MEMORY:
        unit = tl.load(unit)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    in_table = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(table_ptr + rows[:, None] * n_cols + cols[None, :], mask=in_table, other=0.0)
    nonfinite = tl.max(((x - x) != 0.0).to(tl.int32), axis=0) > 0
    tl.atomic_min(first_ptr + cols, tl.zeros([BLOCK_C], dtype=tl.int64) + unit, mask=nonfinite & (cols < n_cols))


@triton.jit
def _rows_outside_kernel(rows_ptr, selected_ptr, first_ptr, n_rows, rows_per_bucket, unit, BLOCK: tl.constexpr):
    """Program p tests rows [p * BLOCK, (p + 1) * BLOCK) against their buckets' flags; one escaped row lowers the
    record to ``unit``."""
    row = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = row < n_rows
    read = tl.load(rows_ptr + row, mask=valid, other=0).to(tl.int32)
    predicted = tl.load(selected_ptr + row // rows_per_bucket, mask=valid & (read != 0), other=1).to(tl.int32)
    escaped = tl.max(read & (1 - predicted), axis=0) > 0
    tl.atomic_min(first_ptr, (tl.zeros([1], dtype=tl.int64) + unit).sum(), mask=escaped)


def _word_grid(num_words: int) -> tuple[int]:
    return (triton.cdiv(num_words, BLOCK_WORDS),)


def pack_bitmap(mask_rows: torch.Tensor) -> torch.Tensor:
    """[C, N] bool -> int32 bitmap of the OR over C."""
    num_rows, n = mask_rows.shape
    num_words = triton.cdiv(n, 32)
    out = torch.empty(num_words, dtype=torch.int32, device=mask_rows.device)
    if num_words:
        grid = (triton.cdiv(num_words, 64),)
        _pack_kernel[grid](mask_rows.view(torch.uint8), out, num_rows, n, num_words, BLOCK_W=64)
    return out


def bitmap_binary(a: torch.Tensor, b: torch.Tensor, op: str) -> torch.Tensor:
    out = torch.empty_like(a)
    if a.numel():
        _binary_kernel[_word_grid(a.numel())](a, b, out, a.numel(), OP=_BINARY_OPS[op], BLOCK_W=BLOCK_WORDS)
    return out


def bitmap_count(a: torch.Tensor) -> torch.Tensor:
    counters = torch.zeros(1, dtype=torch.int64, device=a.device)
    if a.numel():
        _count_kernel[_word_grid(a.numel())](a, None, counters, None, a.numel(), HAS_B=False, BLOCK_W=BLOCK_WORDS)
    return counters[0]


def bitmap_counts(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """0-d tensors (|a|, |a & b|, |a & b| / |a| or 0) from one launch."""
    counters = torch.zeros(3, dtype=torch.int64, device=a.device)
    if a.numel() == 0:
        return counters[0], counters[1], counters[2].float()
    ratio = torch.empty((), dtype=torch.float32, device=a.device)
    _count_kernel[_word_grid(a.numel())](a, b, counters, ratio, a.numel(), HAS_B=True, BLOCK_W=BLOCK_WORDS)
    return counters[0], counters[1], ratio


def bitmap_indices(a: torch.Tensor) -> torch.Tensor:
    num_words = a.numel()
    if num_words == 0:
        return torch.empty(0, dtype=torch.int64, device=a.device)
    counts = torch.empty(num_words, dtype=torch.int32, device=a.device)
    _word_popcount_kernel[_word_grid(num_words)](a, counts, num_words, BLOCK_W=BLOCK_WORDS)
    inclusive = torch.cumsum(counts, dim=0)
    out = torch.empty(int(inclusive[-1].item()), dtype=torch.int64, device=a.device)
    _emit_indices_kernel[(triton.cdiv(num_words, 64),)](a, inclusive, out, num_words, BLOCK_W=64)
    return out


def bitmap_to_mask(a: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.empty(n, dtype=torch.bool, device=a.device)
    if n:
        _to_mask_kernel[(triton.cdiv(n, MASK_BLOCK),)](a, out.view(torch.uint8), n, BLOCK=MASK_BLOCK)
    return out


def selective_adam_step(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    rows: torch.Tensor | None,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    step: int,
    row_lo: int,
    row_hi: int,
    column_hyper: torch.Tensor | None = None,
    complement: bool = False,
) -> None:
    """``grad`` None: a zero gradient (not read). ``complement``: step the rows whose bit in ``rows`` is clear.
    With ``column_hyper`` (fp32 [2 * row size + 1] on ``param``'s device: -lr / (1 - beta1^t) of each column, eps
    of each column, sqrt(1 - beta2^t)) those replace ``lr``, ``eps`` and ``step``: a launch whose step-dependent
    values all live in device memory, which a CUDA graph can replay at every step."""
    row_size = math.prod(param.shape[1:])
    start, end = row_lo * row_size, row_hi * row_size
    if end == start:
        return
    # Scalars are formed in double precision exactly as torch Adam forms them, then rounded to fp32 on launch.
    _selective_adam_kernel[(triton.cdiv(end - start, ADAM_BLOCK),)](
        param,
        grad,
        exp_avg,
        exp_avg_sq,
        rows,
        start,
        end,
        1 - beta1,
        beta2,
        1 - beta2,
        (1 - beta2**step) ** 0.5,
        eps,
        -(lr / (1 - beta1**step)),
        column_hyper,
        ROW_SIZE=row_size,
        HAS_ROWS=rows is not None,
        COMPLEMENT=complement,
        HAS_GRAD=grad is not None,
        PER_COLUMN=column_hyper is not None,
        BLOCK=ADAM_BLOCK,
    )


def _launch_rows_copy(tensors: list[torch.Tensor], indices: torch.Tensor, buf: torch.Tensor, gather: bool) -> None:
    """Gather/scatter [N, D_t] tensors to/from one [k, sum D_t] buffer, MAX_PACKED_TENSORS tensors per launch."""
    num_indices = indices.numel()
    if num_indices == 0:
        return
    column = 0
    for first in range(0, len(tensors), MAX_PACKED_TENSORS):
        group = tensors[first : first + MAX_PACKED_TENSORS]
        row_sizes = tuple(t.shape[1] for t in group)
        padded = tuple(triton.next_power_of_2(max(d, 1)) for d in row_sizes)
        offsets = tuple(column + sum(row_sizes[:i]) for i in range(len(group)))
        rows_per_program = max(1, BLOCK_ROW_ELEMENTS // sum(padded))
        block_k = 1 << (rows_per_program.bit_length() - 1)  # a power of two, as tl.arange requires
        _rows_copy_kernel[(triton.cdiv(num_indices, block_k),)](
            tuple(group),
            indices,
            buf,
            num_indices,
            ROW_SIZES=row_sizes,
            PADDED_ROW_SIZES=padded,
            COLUMN_OFFSETS=offsets,
            BUF_WIDTH=buf.shape[1],
            GATHER=gather,
            BLOCK_K=block_k,
        )
        column += sum(row_sizes)


def gather_rows_packed(tensors: list[torch.Tensor], indices: torch.Tensor) -> torch.Tensor:
    width = sum(t.shape[1] for t in tensors)
    buf = torch.empty(indices.numel(), width, dtype=tensors[0].dtype, device=tensors[0].device)
    _launch_rows_copy(tensors, indices, buf, gather=True)
    return buf


def scatter_rows_packed(tensors: list[torch.Tensor], indices: torch.Tensor, buf: torch.Tensor) -> None:
    _launch_rows_copy(tensors, indices, buf, gather=False)


def tile_intersection_counts(
    means2d: torch.Tensor, radii: torch.Tensor, tile_size: int, tile_width: int, tile_height: int
) -> torch.Tensor:
    """One launch: every flat Gaussian's pair count."""
    n_flat = radii.numel()
    counts = torch.empty(n_flat, dtype=torch.int64, device=radii.device)
    _isect_count_kernel[(triton.cdiv(n_flat, ISECT_GAUSSIANS),)](
        means2d, radii, counts, n_flat, float(tile_size), tile_width, tile_height, BLOCK_G=ISECT_GAUSSIANS,
    )
    return counts


def fill_tile_intersections(
    means2d: torch.Tensor,
    radii: torch.Tensor,
    ends: torch.Tensor,
    depth_bits: torch.Tensor,
    n_gaussians: int,
    tile_size: int,
    tile_width: int,
    tile_height: int,
    tile_bits: int,
    padding_key: int,
    capacity: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One launch: every run and the padding (each slot written once, so the buffers start uninitialised)."""
    n_flat = radii.numel()
    keys = torch.empty(capacity, dtype=torch.int64, device=radii.device)
    flat_ids = torch.empty(capacity, dtype=torch.int32, device=radii.device)
    grid = (max(triton.cdiv(n_flat, ISECT_GAUSSIANS), triton.cdiv(capacity, ISECT_PADDING)),)
    _isect_fill_kernel[grid](
        means2d, radii, ends, depth_bits, keys, flat_ids, n_flat, n_gaussians, float(tile_size), tile_width,
        tile_height, tile_bits, padding_key, capacity, BLOCK_G=ISECT_GAUSSIANS, BLOCK_T=ISECT_TILES,
        BLOCK_PAD=ISECT_PADDING,
    )
    return keys, flat_ids


def record_nonfinite_columns(table: torch.Tensor, first_unit: torch.Tensor, unit_id: int | torch.Tensor) -> None:
    """One launch over the table; atomics only where a column holds a non-finite value."""
    n_rows, n_cols = table.shape
    _nonfinite_columns_kernel[(triton.cdiv(n_rows, FINITE_ROWS),)](
        table, first_unit, n_rows, n_cols, unit_id, BLOCK_R=FINITE_ROWS, BLOCK_C=triton.next_power_of_2(n_cols),
        UNIT_IN_MEMORY=isinstance(unit_id, torch.Tensor),
    )


def record_rows_outside_buckets(
    rows: torch.Tensor, selected: torch.Tensor, rows_per_bucket: int, first_unit: torch.Tensor, unit_id: int
) -> None:
    """One launch over the rows; an atomic only where a row escaped."""
    _rows_outside_kernel[(triton.cdiv(rows.numel(), GUARD_ROWS),)](
        rows, selected, first_unit, rows.numel(), rows_per_bucket, unit_id, BLOCK=GUARD_ROWS,
    )
