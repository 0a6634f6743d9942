"""Triton kernels of the fused SSIM (imported lazily, only when a Triton-backed ``fused_ssim`` call is made).

Images are channels-last ``[B, H, W, C]`` and each image row is addressed as one flat run of ``W * C`` values: the
Gaussian's horizontal taps of pixel column ``j`` in channel ``c`` sit at ``(j + k) * C + c``, i.e. ``k * C`` apart,
so channels need no separate programs and every load is coalesced. A valid output ``(i, j, c)`` (the window fully
inside the image, as in pytorch_msssim's unpadded filtering) is column ``q = j * C + c`` of output row ``i``.

Both kernels sweep a block of rows top to bottom. Each input row is filtered horizontally in registers, then added
into the vertically filtered rows it belongs to, which live in a ring of ``RING`` accumulator rows: the output row
``i`` of a block starting at ``first_row`` uses slot ``(i - first_row) % RING``, and a row leaves the ring (and its
slot is cleared) once its last input row has been added. So every input value is loaded and filtered
horizontally once per block, with no scratch maps in memory and no shared-memory shuffles.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

WINDOW = 11  # pytorch_msssim's default win_size; the ring and the kernels assume this width
RING = 16  # accumulator rows in flight: the next power of two >= WINDOW
BLOCK_COLUMNS = 128  # flat row positions (pixel columns x channels) per program
FORWARD_BLOCK_ROWS = 32  # output rows per forward program (plus WINDOW - 1 rows of halo it reads)
BACKWARD_BLOCK_ROWS = 32  # gradient rows per backward program (plus WINDOW - 1 map rows of halo)
NUM_WARPS = 4


@triton.jit
def _ring_weights(window_ptr, row, first_row, FORWARD: tl.constexpr, WIN: tl.constexpr, RING_ROWS: tl.constexpr):
    """Weight of input row ``row`` in each ring slot (0 for slots whose output row it does not reach).

    Forward: output row ``i`` sums input rows ``i .. i + WIN - 1``, input row ``row`` with weight
    ``window[row - i]``. Backward (the transposed filter): gradient row ``u`` sums map rows ``u - WIN + 1 .. u``,
    map row ``row`` with weight ``window[u - row]``. Rows before ``first_row`` belong to another program.
    Offsets are kept non-negative before ``%`` (Triton's remainder follows C, the interpreter's numpy's floor).
    """
    slots = tl.arange(0, RING_ROWS)
    row_slot = (row - first_row + RING_ROWS) % RING_ROWS
    if FORWARD:
        tap = (row_slot + RING_ROWS - slots) % RING_ROWS  # row - i for the output row i held in each slot
        reaches = (tap < WIN) & (row - tap >= first_row)
    else:
        tap = (slots + RING_ROWS - row_slot) % RING_ROWS  # u - row for the gradient row u held in each slot
        reaches = (tap < WIN) & (row + tap >= first_row)
    return tl.load(window_ptr + tap, mask=reaches, other=0.0)[:, None]


@triton.jit
def _take_row(ring, slot_mask):
    """(the ring row selected by ``slot_mask``, the ring with that row cleared for its next output row)."""
    return tl.sum(tl.where(slot_mask, ring, 0.0), axis=0), tl.where(slot_mask, 0.0, ring)


@triton.jit
def _add_image_row(
    x_row_ptr, y_row_ptr, window_ptr, columns, columns_ok, channels, row_weights,
    ring_x, ring_y, ring_xx, ring_yy, ring_xy, WIN: tl.constexpr,
):
    """Filter one row of both images horizontally into the five statistics and add it into their rings."""
    sum_x = tl.zeros_like(columns).to(tl.float32)
    sum_y = tl.zeros_like(sum_x)
    sum_xx = tl.zeros_like(sum_x)
    sum_yy = tl.zeros_like(sum_x)
    sum_xy = tl.zeros_like(sum_x)
    for k in tl.static_range(WIN):
        weight = tl.load(window_ptr + k)
        x = tl.load(x_row_ptr + columns + k * channels, mask=columns_ok, other=0.0)
        y = tl.load(y_row_ptr + columns + k * channels, mask=columns_ok, other=0.0)
        weighted_x = weight * x
        weighted_y = weight * y
        sum_x += weighted_x
        sum_y += weighted_y
        sum_xx += weighted_x * x
        sum_yy += weighted_y * y
        sum_xy += weighted_x * y
    ring_x += row_weights * sum_x[None, :]
    ring_y += row_weights * sum_y[None, :]
    ring_xx += row_weights * sum_xx[None, :]
    ring_yy += row_weights * sum_yy[None, :]
    ring_xy += row_weights * sum_xy[None, :]
    return ring_x, ring_y, ring_xx, ring_yy, ring_xy


@triton.jit
def _ssim_forward_kernel(
    x_ptr, y_ptr, window_ptr, d_mu_ptr, d_sq_ptr, d_cross_ptr, partial_means_ptr,
    height, row_length, channels, out_height, out_row_length, inv_count, c1, c2,
    STORE_GRAD_MAPS: tl.constexpr, WIN: tl.constexpr, RING_ROWS: tl.constexpr,
    BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr,
):
    """SSIM map of one block of valid outputs, reduced to its share of the mean, and (for the backward) the partial
    derivatives of each output's SSIM w.r.t. mu_x, E[x^2] and E[xy], the filtered statistics that depend on x."""
    column_block, row_block, image = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    columns = column_block * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    columns_ok = columns < out_row_length
    first_row = row_block * BLOCK_ROWS
    last_input_row = tl.minimum(first_row + BLOCK_ROWS, out_height) + WIN - 1
    x_image = x_ptr + image.to(tl.int64) * height * row_length
    y_image = y_ptr + image.to(tl.int64) * height * row_length
    map_offset = image.to(tl.int64) * out_height * out_row_length
    slots = tl.arange(0, RING_ROWS)[:, None]
    ring_x = tl.zeros([RING_ROWS, BLOCK_COLS], dtype=tl.float32)
    ring_y = tl.zeros_like(ring_x)
    ring_xx = tl.zeros_like(ring_x)
    ring_yy = tl.zeros_like(ring_x)
    ring_xy = tl.zeros_like(ring_x)
    for row in range(first_row, first_row + WIN - 1):  # rows that complete no output row yet
        ring_x, ring_y, ring_xx, ring_yy, ring_xy = _add_image_row(
            x_image + row * row_length, y_image + row * row_length, window_ptr, columns, columns_ok, channels,
            _ring_weights(window_ptr, row, first_row, True, WIN, RING_ROWS),
            ring_x, ring_y, ring_xx, ring_yy, ring_xy, WIN,
        )
    ssim_sum = tl.zeros([BLOCK_COLS], dtype=tl.float32)
    for row in range(first_row + WIN - 1, last_input_row):  # each completes output row row - WIN + 1
        ring_x, ring_y, ring_xx, ring_yy, ring_xy = _add_image_row(
            x_image + row * row_length, y_image + row * row_length, window_ptr, columns, columns_ok, channels,
            _ring_weights(window_ptr, row, first_row, True, WIN, RING_ROWS),
            ring_x, ring_y, ring_xx, ring_yy, ring_xy, WIN,
        )
        out_row = row - (WIN - 1)
        done = slots == (out_row - first_row) % RING_ROWS
        mu_x, ring_x = _take_row(ring_x, done)
        mu_y, ring_y = _take_row(ring_y, done)
        mean_xx, ring_xx = _take_row(ring_xx, done)
        mean_yy, ring_yy = _take_row(ring_yy, done)
        mean_xy, ring_xy = _take_row(ring_xy, done)
        # pytorch_msssim's _ssim, op for op.
        mu_xx = mu_x * mu_x
        mu_yy = mu_y * mu_y
        mu_xy = mu_x * mu_y
        sigma_xx = mean_xx - mu_xx
        sigma_yy = mean_yy - mu_yy
        sigma_xy = mean_xy - mu_xy
        contrast_denominator = sigma_xx + sigma_yy + c2
        luminance_denominator = mu_xx + mu_yy + c1
        contrast_structure = (2 * sigma_xy + c2) / contrast_denominator
        luminance = (2 * mu_xy + c1) / luminance_denominator
        ssim = luminance * contrast_structure
        ssim_sum += tl.where(columns_ok, ssim, 0.0)
        if STORE_GRAD_MAPS:
            # ssim = luminance(mu_x) * cs(sigma_xx, sigma_xy) with sigma_xx = E[x^2] - mu_x^2 and
            # sigma_xy = E[xy] - mu_x mu_y; mu_x also enters cs through both sigmas.
            d_mean_xx = -ssim / contrast_denominator
            d_mean_xy = 2 * luminance / contrast_denominator
            d_mu_x = (2 / luminance_denominator) * contrast_structure * (mu_y - luminance * mu_x) + (
                2 / contrast_denominator
            ) * luminance * (contrast_structure * mu_x - mu_y)
            out = map_offset + out_row * out_row_length + columns
            tl.store(d_mu_ptr + out, d_mu_x, mask=columns_ok)
            tl.store(d_sq_ptr + out, d_mean_xx, mask=columns_ok)
            tl.store(d_cross_ptr + out, d_mean_xy, mask=columns_ok)
    block = (image * tl.num_programs(1) + row_block) * tl.num_programs(0) + column_block
    tl.store(partial_means_ptr + block, tl.sum(ssim_sum) * inv_count)


@triton.jit
def _add_map_row(
    d_mu_row_ptr, d_sq_row_ptr, d_cross_row_ptr, window_ptr, columns, row_ok, channels, out_row_length,
    row_weights, ring_mu, ring_sq, ring_cross, WIN: tl.constexpr,
):
    """Filter one row of the three derivative maps with the transposed (flipped) horizontal window into the rings."""
    sum_mu = tl.zeros_like(columns).to(tl.float32)
    sum_sq = tl.zeros_like(sum_mu)
    sum_cross = tl.zeros_like(sum_mu)
    for k in tl.static_range(WIN):
        weight = tl.load(window_ptr + k)
        source = columns - k * channels
        ok = row_ok & (source >= 0) & (source < out_row_length)
        sum_mu += weight * tl.load(d_mu_row_ptr + source, mask=ok, other=0.0)
        sum_sq += weight * tl.load(d_sq_row_ptr + source, mask=ok, other=0.0)
        sum_cross += weight * tl.load(d_cross_row_ptr + source, mask=ok, other=0.0)
    ring_mu += row_weights * sum_mu[None, :]
    ring_sq += row_weights * sum_sq[None, :]
    ring_cross += row_weights * sum_cross[None, :]
    return ring_mu, ring_sq, ring_cross


@triton.jit
def _ssim_backward_kernel(
    x_ptr, y_ptr, window_ptr, d_mu_ptr, d_sq_ptr, d_cross_ptr, grad_output_ptr, grad_x_ptr,
    height, row_length, channels, out_height, out_row_length, inv_count,
    WIN: tl.constexpr, RING_ROWS: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr,
):
    """d mean(SSIM) / dx for one block of pixels: the transposed filter of each derivative map, times the
    derivative of its statistic w.r.t. the pixel (1 for mu_x, 2x for E[x^2], y for E[xy]), times the incoming
    gradient over the number of SSIM values."""
    column_block, row_block, image = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    columns = column_block * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    columns_ok = columns < row_length
    first_row = row_block * BLOCK_ROWS
    last_row = tl.minimum(first_row + BLOCK_ROWS, height)
    image_offset = image.to(tl.int64) * height * row_length
    map_image = image.to(tl.int64) * out_height * out_row_length
    slots = tl.arange(0, RING_ROWS)[:, None]
    ring_mu = tl.zeros([RING_ROWS, BLOCK_COLS], dtype=tl.float32)
    ring_sq = tl.zeros_like(ring_mu)
    ring_cross = tl.zeros_like(ring_mu)
    for row in range(first_row - (WIN - 1), first_row):  # map rows that reach this block's first rows
        map_row = map_image + row * out_row_length
        ring_mu, ring_sq, ring_cross = _add_map_row(
            d_mu_ptr + map_row, d_sq_ptr + map_row, d_cross_ptr + map_row, window_ptr, columns,
            (row >= 0) & (row < out_height), channels, out_row_length,
            _ring_weights(window_ptr, row, first_row, False, WIN, RING_ROWS),
            ring_mu, ring_sq, ring_cross, WIN,
        )
    scale = tl.load(grad_output_ptr) * inv_count
    for row in range(first_row, last_row):  # map row ``row`` is the last one reaching gradient row ``row``
        map_row = map_image + row * out_row_length
        ring_mu, ring_sq, ring_cross = _add_map_row(
            d_mu_ptr + map_row, d_sq_ptr + map_row, d_cross_ptr + map_row, window_ptr, columns,
            row < out_height, channels, out_row_length,
            _ring_weights(window_ptr, row, first_row, False, WIN, RING_ROWS),
            ring_mu, ring_sq, ring_cross, WIN,
        )
        done = slots == (row - first_row) % RING_ROWS
        d_mu, ring_mu = _take_row(ring_mu, done)
        d_sq, ring_sq = _take_row(ring_sq, done)
        d_cross, ring_cross = _take_row(ring_cross, done)
        pixels = image_offset + row * row_length + columns
        x = tl.load(x_ptr + pixels, mask=columns_ok, other=0.0)
        y = tl.load(y_ptr + pixels, mask=columns_ok, other=0.0)
        tl.store(grad_x_ptr + pixels, scale * (d_mu + 2 * x * d_sq + y * d_cross), mask=columns_ok)


def _output_shape(x: torch.Tensor) -> tuple[int, int]:
    """(valid output rows, valid flat output row length) of a [B, H, W, C] image batch."""
    _, height, width, channels = x.shape
    return height - (WINDOW - 1), (width - (WINDOW - 1)) * channels


def ssim_forward(
    x: torch.Tensor, y: torch.Tensor, window: torch.Tensor, c1: float, c2: float, store_grad_maps: bool
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None]:
    """(0-d mean SSIM of contiguous float32 [B, H, W, C] ``x`` and ``y``, the three derivative maps w.r.t. x's
    statistics [B, H - 10, (W - 10) * C] when ``store_grad_maps`` else None). Two launches: the kernel, then the sum
    of its per-block shares of the mean (a fixed-order sum, so the result is deterministic)."""
    batch, height, width, channels = x.shape
    out_height, out_row_length = _output_shape(x)
    grid = (triton.cdiv(out_row_length, BLOCK_COLUMNS), triton.cdiv(out_height, FORWARD_BLOCK_ROWS), batch)
    partial_means = torch.empty(grid[0] * grid[1] * grid[2], dtype=torch.float32, device=x.device)
    map_shape = (batch, out_height, out_row_length) if store_grad_maps else (1,)  # unused placeholders without grad
    maps = tuple(torch.empty(map_shape, dtype=torch.float32, device=x.device) for _ in range(3))
    _ssim_forward_kernel[grid](
        x, y, window, *maps, partial_means,
        height, width * channels, channels, out_height, out_row_length,
        1.0 / (batch * out_height * out_row_length), c1, c2,
        STORE_GRAD_MAPS=store_grad_maps, WIN=WINDOW, RING_ROWS=RING,
        BLOCK_ROWS=FORWARD_BLOCK_ROWS, BLOCK_COLS=BLOCK_COLUMNS, num_warps=NUM_WARPS,
    )
    return partial_means.sum(), maps if store_grad_maps else None


def ssim_backward(
    x: torch.Tensor, y: torch.Tensor, window: torch.Tensor,
    maps: tuple[torch.Tensor, torch.Tensor, torch.Tensor], grad_output: torch.Tensor,
) -> torch.Tensor:
    """Gradient of the mean SSIM w.r.t. ``x`` (same shape), scaled by the 0-d ``grad_output``; one launch, and the
    incoming gradient is read on the device (no host sync)."""
    batch, height, width, channels = x.shape
    out_height, out_row_length = _output_shape(x)
    grad_x = torch.empty_like(x)
    grid = (triton.cdiv(width * channels, BLOCK_COLUMNS), triton.cdiv(height, BACKWARD_BLOCK_ROWS), batch)
    _ssim_backward_kernel[grid](
        x, y, window, *maps, grad_output.to(torch.float32).reshape(1), grad_x,
        height, width * channels, channels, out_height, out_row_length,
        1.0 / (batch * out_height * out_row_length),
        WIN=WINDOW, RING_ROWS=RING, BLOCK_ROWS=BACKWARD_BLOCK_ROWS, BLOCK_COLS=BLOCK_COLUMNS, num_warps=NUM_WARPS,
    )
    return grad_x
