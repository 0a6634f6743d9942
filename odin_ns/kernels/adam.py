"""Adam publication in fused passes over row selections: the Gaussians of an update scope, or every other row.

Rows outside a selection are neither read nor written (param and both moments stay bit-identical), which is what
lets a unit publish its update scope while other units still read the rest of the model. A step may also take no
gradient (``grad`` None): dense Adam's step of a row whose gradient is zero, its drift, which needs nothing from
the exchange; stepping the complement of a scope that way and the scope with its gradients is, element for
element, the dense step.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

import torch

from odin_ns.kernels.bitmap import bitmap_to_mask, check_bitmap
from odin_ns.kernels.compaction import as_rows
from odin_ns.kernels.dispatch import resolve_backend, triton_kernels


def _check_row_range(row_range: tuple[int, int] | None, n: int) -> tuple[int, int]:
    if row_range is None:
        return 0, n
    lo, hi = row_range
    if not 0 <= lo <= hi <= n:
        raise ValueError(f"row_range {row_range} is not within [0, {n}]")
    return lo, hi


def _check_adam_tensors(
    param: torch.Tensor, grad: torch.Tensor | None, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor
) -> None:
    if param.dim() == 0:
        raise ValueError("selective_adam_step needs a param of shape [N, ...], got a 0-d tensor")
    for name, tensor in (("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        if tensor is None:
            continue
        if tensor.shape != param.shape or tensor.dtype != param.dtype or tensor.device != param.device:
            raise ValueError(
                f"{name} is {tuple(tensor.shape)} {tensor.dtype} on {tensor.device}, "
                f"param is {tuple(param.shape)} {param.dtype} on {param.device}"
            )
    for name, tensor in (("param", param), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        if not tensor.is_contiguous():
            raise ValueError(f"{name} must be contiguous: it is updated in place row by row")


def _checked_step(
    param: torch.Tensor,
    grad: torch.Tensor | None,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    rows: torch.Tensor | None,
    step: int,
    row_range: tuple[int, int] | None,
) -> tuple[int, int]:
    """Check a step's operands before anything is written; return its row range."""
    _check_adam_tensors(param, grad, exp_avg, exp_avg_sq)
    if step < 1:
        raise ValueError(f"Adam step count must be >= 1, got {step}")
    if rows is not None:
        check_bitmap(rows, "rows", param.shape[0])
    return _check_row_range(row_range, param.shape[0])


def adam_update_(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    step: int,
) -> None:
    """torch.optim.Adam's single-tensor update, op for op, so the fallback matches torch Adam bit for bit."""
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = (1 - beta2**step) ** 0.5
    _adam_moments_(grad, exp_avg, exp_avg_sq, beta1, beta2)
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1))


def _adam_moments_(
    grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, beta1: float, beta2: float
) -> None:
    """torch.optim.Adam's moment updates, op for op."""
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)


@torch.no_grad()
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
    row_range: tuple[int, int] | None = None,
    backend: str = "auto",
) -> None:
    """In place Adam step on the rows of ``param`` [N, ...] set in the ``rows`` bitmap (None = every row).

    ``row_range=(lo, hi)`` further restricts the step to rows lo..hi-1, so a scope can be published chunk by chunk
    as its gradient buckets arrive. ``step`` is the (1-based) count used for bias correction. Every other row of
    ``param``, ``exp_avg`` and ``exp_avg_sq`` is left untouched. Triton does it in one kernel launch.
    """
    lo, hi = _checked_step(param, grad, exp_avg, exp_avg_sq, rows, step, row_range)
    if resolve_backend(backend, param) == "triton":
        triton_kernels().selective_adam_step(
            param, grad.contiguous(), exp_avg, exp_avg_sq, rows, lr, beta1, beta2, eps, step, lo, hi
        )
        return
    tensors = [as_rows(t) for t in (param, grad.contiguous(), exp_avg, exp_avg_sq)]
    _torch_adam_rows(*tensors, rows, lr, beta1, beta2, eps, step, lo, hi)


def _torch_adam_rows(
    param: torch.Tensor,
    grad: torch.Tensor | None,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    rows: torch.Tensor | None,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    step: int,
    lo: int,
    hi: int,
    complement: bool = False,
) -> None:
    """The torch fallback on [N, D] tensors (column slices of a packed table too): rows lo..hi-1 in ``rows`` (not
    in ``rows`` with ``complement``); ``grad`` None is a zero gradient."""
    grad_rows = torch.zeros_like(param[lo:hi]) if grad is None else grad[lo:hi]
    if rows is None:
        adam_update_(param[lo:hi], grad_rows, exp_avg[lo:hi], exp_avg_sq[lo:hi], lr, beta1, beta2, eps, step)
        return
    selected = bitmap_to_mask(rows, param.shape[0], backend="torch")[lo:hi, None]  # a mask, not indices: no host read
    if complement:
        selected = ~selected
    p, m, v = (t[lo:hi].clone() for t in (param, exp_avg, exp_avg_sq))
    adam_update_(p, grad_rows, m, v, lr, beta1, beta2, eps, step)  # reads the gradient, writes the clones
    for target, updated in zip((param, exp_avg, exp_avg_sq), (p, m, v)):
        target[lo:hi] = torch.where(selected, updated, target[lo:hi])


class ColumnGroup(NamedTuple):
    """Columns [lo, hi) of a packed [N, C] table that one parameter group owns, with its Adam learning rate and eps."""

    lo: int
    hi: int
    lr: float
    eps: float


def _check_columns(columns: Sequence[ColumnGroup], width: int) -> None:
    covered = sorted((group.lo, group.hi) for group in columns)
    if [lo for lo, _ in covered] != [0, *(hi for _, hi in covered[:-1])] or covered[-1][1] != width:
        raise ValueError(f"column groups {covered} do not tile the {width} columns")


def packed_adam_hyper(
    columns: Sequence[ColumnGroup], width: int, beta1: float, beta2: float, step: int
) -> torch.Tensor:
    """What a packed launch reads from device memory at step ``step`` (a host fp32 tensor, pinned where CUDA is
    available): each column's -lr / (1 - beta1^t), each column's eps, then sqrt(1 - beta2^t). Formed in double
    precision, as torch Adam and the scalar path form them, and rounded to fp32 once."""
    bias_correction1 = 1 - beta1**step
    values = [0.0] * (2 * width + 1)
    for group in columns:
        values[group.lo : group.hi] = [-(group.lr / bias_correction1)] * (group.hi - group.lo)
        values[width + group.lo : width + group.hi] = [group.eps] * (group.hi - group.lo)
    values[2 * width] = (1 - beta2**step) ** 0.5
    return torch.tensor(values, dtype=torch.float32, pin_memory=torch.cuda.is_available())


def _launch_packed_adam(
    param: torch.Tensor,
    grad: torch.Tensor | None,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    rows: torch.Tensor | None,
    complement: bool,
    beta1: float,
    beta2: float,
    lo: int,
    hi: int,
    hyper: torch.Tensor,
) -> None:
    """The Triton launch, its step-dependent values all read from ``hyper`` on the device (the scalars it also takes
    are unused with it): one launch serves every step, so a CUDA graph can capture it."""
    triton_kernels().selective_adam_step(
        param, grad, exp_avg, exp_avg_sq, rows, 0.0, beta1, beta2, 0.0, 1, lo, hi, column_hyper=hyper,
        complement=complement,
    )


@torch.no_grad()
def packed_adam_step(
    param: torch.Tensor,
    grad: torch.Tensor | None,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    rows: torch.Tensor | None,
    columns: Sequence[ColumnGroup],
    beta1: float,
    beta2: float,
    step: int,
    row_range: tuple[int, int] | None = None,
    backend: str = "auto",
    complement: bool = False,
) -> None:
    """``selective_adam_step`` over a packed [N, C] table whose column groups have their own learning rate and eps:
    one launch for every group (Triton), each element stepped exactly as ``selective_adam_step`` steps its group's
    column slice. ``grad`` None steps with a zero gradient without reading one (dense Adam's drift);
    ``complement`` steps the rows of ``row_range`` whose bit in ``rows`` is clear instead of those set."""
    if param.dim() != 2:
        raise ValueError(f"packed_adam_step needs a [N, C] table, got {tuple(param.shape)}")
    if complement and rows is None:
        raise ValueError("complement needs a rows bitmap whose clear bits select the rows")
    _check_columns(columns, param.shape[1])
    lo, hi = _checked_step(param, grad, exp_avg, exp_avg_sq, rows, step, row_range)
    grad = None if grad is None else grad.contiguous()
    if resolve_backend(backend, param) == "triton":
        hyper = packed_adam_hyper(columns, param.shape[1], beta1, beta2, step).to(param.device, non_blocking=True)
        _launch_packed_adam(param, grad, exp_avg, exp_avg_sq, rows, complement, beta1, beta2, lo, hi, hyper)
        return
    for group in columns:
        _torch_adam_rows(
            *(None if t is None else t[:, group.lo : group.hi] for t in (param, grad, exp_avg, exp_avg_sq)), rows,
            group.lr, beta1, beta2, group.eps, step, lo, hi, complement,
        )


@torch.no_grad()
def packed_adam_step_from(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    rows: torch.Tensor | None,
    hyper: torch.Tensor,
    beta1: float,
    beta2: float,
    backend: str = "auto",
) -> None:
    """``packed_adam_step`` of the whole table whose step-dependent values are ``hyper`` (``packed_adam_hyper``'s
    values on ``param``'s device): no host value changes from step to step, so a CUDA graph that records this launch
    steps correctly at every replay once ``hyper`` is rewritten. Triton's is bitwise the scalar step (both read the
    same fp32 values). torch's is torch Adam op for op with those values, which are what its scalars round to: bitwise
    on the CPU; on CUDA torch rounds a division by a host scalar and addcdiv in another order than tensor operands,
    so there it is the scalar step to fp32 rounding (CUDA trains with Triton)."""
    if param.dim() != 2:
        raise ValueError(f"packed_adam_step_from needs a [N, C] table, got {tuple(param.shape)}")
    width = param.shape[1]
    if hyper.shape != (2 * width + 1,) or hyper.dtype != torch.float32 or hyper.device != param.device:
        raise ValueError(f"hyper must be float32 [{2 * width + 1}] on {param.device}, got {hyper.dtype} "
                         f"{tuple(hyper.shape)} on {hyper.device}")
    lo, hi = _checked_step(param, grad, exp_avg, exp_avg_sq, rows, 1, None)
    grad = grad.contiguous()
    if resolve_backend(backend, param) == "triton":
        _launch_packed_adam(param, grad, exp_avg, exp_avg_sq, rows, False, beta1, beta2, lo, hi, hyper)
        return
    negative_step, eps, bias_correction2_sqrt = hyper[:width], hyper[width : 2 * width], hyper[2 * width]
    p, m, v = (t.clone() for t in (param, exp_avg, exp_avg_sq)) if rows is not None else (param, exp_avg, exp_avg_sq)
    _adam_moments_(grad, m, v, beta1, beta2)
    denom = (v.sqrt() / bias_correction2_sqrt).add_(eps)
    p.add_(negative_step * m / denom)  # addcdiv's order on the CPU: (value * tensor1) / tensor2, then added
    if rows is not None:
        selected = bitmap_to_mask(rows, param.shape[0], backend="torch")[:, None]
        for target, updated in zip((param, exp_avg, exp_avg_sq), (p, m, v)):
            target.copy_(torch.where(selected, updated, target))


class PackedAdam:
    """``packed_adam_step`` for a caller that steps the same tables again and again (a training run's publications):
    with ``capture`` on CUDA, a launch whose operands (tables, row bitmap, row range, betas) come back a second time
    is captured in a CUDA graph and replayed from then on, its step-dependent values copied to the device first.

    A replay costs the host a copy and a graph launch instead of the argument checks and Triton's launcher, which in
    a host-bound step is time the GPU waits. The graphs are keyed by the operands' addresses and shapes, so a graph
    only ever replays over the tensors it was captured with; the least recently used of ``MAX_GRAPHS`` is dropped.
    A capture costs more host time than the launches it saves until its graph has been replayed a few times, so
    once ``JUDGED_AFTER`` captures have been made, a new one is made only while the replays number at least
    ``REPLAYS_PER_CAPTURE`` per capture: where the operands keep changing (row ranges that vary from window to window,
    more of them than graphs are kept) most launches are not captured.
    """

    MAX_GRAPHS = 8
    MAX_SIGHTINGS = 64
    JUDGED_AFTER = 8
    REPLAYS_PER_CAPTURE = 4

    def __init__(self, capture: bool):
        self.capture = capture
        """Replay repeated launches from CUDA graphs (CUDA with Triton only; elsewhere every step is launched)."""
        self.captures = 0
        self.replays = 0
        self._graphs: OrderedDict[tuple, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = OrderedDict()
        self._sighted: set[tuple] = set()
        self._stream: torch.cuda.Stream | None = None

    def step(
        self,
        param: torch.Tensor,
        grad: torch.Tensor | None,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        rows: torch.Tensor | None,
        columns: Sequence[ColumnGroup],
        beta1: float,
        beta2: float,
        step: int,
        row_range: tuple[int, int],
        complement: bool = False,
    ) -> None:
        """``packed_adam_step`` with these operands."""
        key = self._key(param, grad, exp_avg, exp_avg_sq, rows, complement, beta1, beta2, row_range)
        entry = None if key is None else self._graphs.get(key)
        if entry is None and key in self._sighted and self._captures_pay():
            entry = self._captured(param, grad, exp_avg, exp_avg_sq, rows, complement, columns, beta1, beta2, step,
                                   row_range, key)
        if entry is None:
            if key is not None:
                if len(self._sighted) >= self.MAX_SIGHTINGS:
                    self._sighted.clear()
                self._sighted.add(key)
            packed_adam_step(param, grad, exp_avg, exp_avg_sq, rows, columns, beta1, beta2, step, row_range,
                             complement=complement)
            return
        if step < 1:
            raise ValueError(f"Adam step count must be >= 1, got {step}")
        self._graphs.move_to_end(key)
        graph, hyper = entry
        hyper.copy_(packed_adam_hyper(columns, param.shape[1], beta1, beta2, step), non_blocking=True)
        graph.replay()
        self.replays += 1

    def _captures_pay(self) -> bool:
        return self.captures < self.JUDGED_AFTER or self.replays >= self.REPLAYS_PER_CAPTURE * self.captures

    def _key(
        self,
        param: torch.Tensor,
        grad: torch.Tensor | None,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        rows: torch.Tensor | None,
        complement: bool,
        beta1: float,
        beta2: float,
        row_range: tuple[int, int],
    ) -> tuple | None:
        """What a graph is captured over; None where no graph may serve (capture off, not CUDA with Triton, a
        non-contiguous gradient table, an empty range)."""
        if not self.capture or not param.is_cuda or resolve_backend("auto", param) != "triton":
            return None
        if (grad is not None and not grad.is_contiguous()) or row_range[1] <= row_range[0]:
            return None
        tensors = (param, exp_avg, exp_avg_sq, *(() if grad is None else (grad,)), *(() if rows is None else (rows,)))
        return (
            tuple((t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype) for t in tensors),
            grad is None, rows is None, complement, beta1, beta2, tuple(row_range),
        )

    def _captured(
        self,
        param: torch.Tensor,
        grad: torch.Tensor | None,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        rows: torch.Tensor | None,
        complement: bool,
        columns: Sequence[ColumnGroup],
        beta1: float,
        beta2: float,
        step: int,
        row_range: tuple[int, int],
        key: tuple,
    ) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        """Check the operands as an eager step would, then capture their launch (nothing runs until a replay)."""
        lo, hi = _checked_step(param, grad, exp_avg, exp_avg_sq, rows, step, row_range)
        _check_columns(columns, param.shape[1])
        hyper = torch.empty(2 * param.shape[1] + 1, dtype=torch.float32, device=param.device)
        if self._stream is None:
            self._stream = torch.cuda.Stream(param.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(self._stream):
            graph.capture_begin(capture_error_mode="thread_local")  # other threads (the NCCL watch) may use CUDA
            try:
                _launch_packed_adam(param, grad, exp_avg, exp_avg_sq, rows, complement, beta1, beta2, lo, hi, hyper)
            finally:
                graph.capture_end()
        self.captures += 1
        self._graphs[key] = (graph, hyper)
        if len(self._graphs) > self.MAX_GRAPHS:
            self._graphs.popitem(last=False)
        return self._graphs[key]
