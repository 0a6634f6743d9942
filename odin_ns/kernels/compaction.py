"""Row compaction for scoped gradient exchange.

Only the rows of an update scope travel between GPUs: they are gathered into one contiguous buffer (all parameter
tensors side by side, so a single collective moves them) and scattered back after the exchange.
"""

from __future__ import annotations

import math

import torch

from odin_ns.kernels.dispatch import resolve_backend, triton_kernels


def as_rows(tensor: torch.Tensor) -> torch.Tensor:
    """View a contiguous [N, ...] tensor as [N, D] (also for N == 0, where view(N, -1) is ambiguous)."""
    return tensor.view(tensor.shape[0], math.prod(tensor.shape[1:]))


def _check_row_aligned(tensors: list[torch.Tensor]) -> None:
    if not tensors:
        raise ValueError("need at least one tensor to gather/scatter rows of")
    first = tensors[0]
    for t in tensors:
        if t.dim() == 0 or t.shape[0] != first.shape[0] or t.dtype != first.dtype or t.device != first.device:
            raise ValueError(
                f"row-aligned tensors must share N, dtype and device: {tuple(t.shape)} {t.dtype} {t.device} vs "
                f"{tuple(first.shape)} {first.dtype} {first.device}"
            )


def _rows_2d(tensors: list[torch.Tensor], indices: torch.Tensor) -> list[torch.Tensor]:
    """Validate row-aligned tensors and view each as [N, D]."""
    _check_row_aligned(tensors)
    if indices.dim() != 1 or indices.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"indices must be a 1-D int32/int64 tensor, got {indices.dtype} {tuple(indices.shape)}")
    first = tensors[0]
    for t in tensors:
        if not t.is_contiguous():
            raise ValueError(f"tensor of shape {tuple(t.shape)} must be contiguous to gather/scatter its rows")
    if indices.device != first.device:
        raise ValueError(f"indices are on {indices.device}, tensors on {first.device}")
    return [as_rows(t) for t in tensors]


def packed_width(tensors: list[torch.Tensor]) -> int:
    """Columns of the packed buffer: the sum of the tensors' elements per row."""
    return sum(math.prod(t.shape[1:]) for t in tensors)


def gather_rows_packed(tensors: list[torch.Tensor], indices: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Rows ``indices`` of each [N, ...] tensor, side by side in one [k, sum(D)] buffer (D = elements per row)."""
    views = _rows_2d(tensors, indices)
    if resolve_backend(backend, views[0]) == "triton":
        return triton_kernels().gather_rows_packed(views, indices)
    return torch.cat([v.index_select(0, indices) for v in views], dim=1)


@torch.no_grad()
def scatter_rows_packed(
    tensors: list[torch.Tensor], indices: torch.Tensor, buf: torch.Tensor, backend: str = "auto"
) -> None:
    """Overwrite rows ``indices`` of each tensor with its columns of ``buf`` (inverse of gather_rows_packed).

    ``indices`` must be unique (scopes are sets); with duplicates the surviving row is unspecified.
    """
    views = _rows_2d(tensors, indices)
    widths = [v.shape[1] for v in views]
    expected_shape = (indices.numel(), packed_width(tensors))
    if buf.shape != expected_shape or buf.dtype != views[0].dtype or buf.device != views[0].device:
        raise ValueError(
            f"buf is {tuple(buf.shape)} {buf.dtype} on {buf.device}, expected "
            f"({indices.numel()}, {sum(widths)}) {views[0].dtype} on {views[0].device}"
        )
    if resolve_backend(backend, views[0]) == "triton":
        triton_kernels().scatter_rows_packed(views, indices, buf.contiguous())
        return
    for view, columns in zip(views, buf.split(widths, dim=1)):
        view.index_copy_(0, indices.to(torch.int64), columns)


TRITON_PACK_MIN_ROWS = 1 << 17
"""``pack_columns`` on ``auto`` packs fewer rows with ``torch.cat``: its one launch then costs less than the Triton
pack's host work (an index vector and Triton's launcher), while on large tables its strided stores cost more GPU time
than the whole rows the Triton programs write (docs/kernels.md)."""


def pack_columns(tensors: list[torch.Tensor], backend: str = "auto") -> torch.Tensor:
    """Row-aligned [N, ...] tensors side by side in one new [N, sum(D)] table (``torch.cat`` along the rows' elements).

    Triton: ``gather_rows_packed`` over every row, whose programs each write whole rows of the table; ``torch.cat``
    writes each tensor's column slice apart, a strided, uncoalesced store per tensor.
    """
    _check_row_aligned(tensors)
    first = tensors[0]
    if backend == "auto" and first.shape[0] < TRITON_PACK_MIN_ROWS:
        backend = "torch"
    if resolve_backend(backend, first) == "triton":
        all_rows = torch.arange(first.shape[0], dtype=torch.int32, device=first.device)
        return triton_kernels().gather_rows_packed([as_rows(t.contiguous()) for t in tensors], all_rows)
    return torch.cat([t.reshape(t.shape[0], math.prod(t.shape[1:])) for t in tensors], dim=1)
