"""Rows outside their predicted buckets, folded into a first-sighting record on the device.

Predicted read scopes (``odin_ns.sync.predicted``) are checked behind every unit: the rows the unit read, and the
rows it updated, must lie in the buckets predicted for it. The check runs on every unit of a host-bound step, so
its cost is its launches: on Triton one launch that tests each row against its bucket's flag and, only when some
row escaped, lowers the record to the unit (an atomic minimum: units are numbered in the order they run); in torch
the rows of the selected buckets are expanded to a mask and compared.
"""

from __future__ import annotations

import torch

from odin_ns.kernels.dispatch import resolve_backend, triton_kernels
from odin_ns.kernels.first_sightings import lower_first_sightings


def record_rows_outside_buckets(
    rows: torch.Tensor,
    selected: torch.Tensor,
    rows_per_bucket: int,
    first_unit: torch.Tensor,
    unit_id: int,
    backend: str = "auto",
) -> torch.Tensor:
    """``first_unit`` (int64 [1]) lowered to ``unit_id`` if a row of bool ``rows`` [N] lies in a bucket that bool
    ``selected`` [buckets] leaves out (bucket b holds rows [b * rows_per_bucket, (b + 1) * rows_per_bucket)).
    Triton updates ``first_unit`` in place and returns it; torch returns a new tensor."""
    if rows.dtype != torch.bool or rows.dim() != 1 or selected.dtype != torch.bool or selected.dim() != 1:
        raise ValueError(f"need bool rows [N] and bool bucket flags [buckets], got {rows.dtype} {tuple(rows.shape)} "
                         f"and {selected.dtype} {tuple(selected.shape)}")
    if rows_per_bucket < 1 or selected.numel() * rows_per_bucket < rows.numel():
        raise ValueError(f"{selected.numel()} buckets of {rows_per_bucket} rows do not cover {rows.numel()} rows")
    if first_unit.shape != (1,) or first_unit.dtype != torch.int64 or unit_id < 0:
        raise ValueError(f"need an int64 [1] record and a unit id >= 0, got {first_unit.dtype} "
                         f"{tuple(first_unit.shape)} and {unit_id}")
    if rows.numel() == 0:
        return first_unit
    if resolve_backend(backend, rows) == "triton" and rows.is_contiguous() and selected.is_contiguous():
        triton_kernels().record_rows_outside_buckets(rows, selected, rows_per_bucket, first_unit, unit_id)
        return first_unit
    predicted = selected.repeat_interleave(rows_per_bucket)[: rows.numel()]
    escaped = (rows & ~predicted).any().reshape(1)
    return lower_first_sightings(first_unit, escaped, unit_id)
