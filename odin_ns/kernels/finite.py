"""The columns of a gradient table that hold NaN or Inf, folded into a first-sighting record on the device.

The runtime watches every unit's local gradient table for non-finite values (``odin_ns.runtime.finite``) without a
host read: per column, the first unit it went non-finite in. On a host-bound step the watch's cost is its launches:
in torch a pass for the columns' minima and maxima and a few launches on the [columns] result; on Triton one launch
that reads the table once and, only where a column holds NaN or Inf, lowers that column's record to the unit
(an atomic minimum: units are numbered in the order they run, so the minimum is the first).
"""

from __future__ import annotations

import torch

from odin_ns.kernels.dispatch import resolve_backend, triton_kernels
from odin_ns.kernels.first_sightings import lower_first_sightings


def record_nonfinite_columns(
    table: torch.Tensor, first_unit: torch.Tensor, unit_id: int | torch.Tensor, backend: str = "auto"
) -> torch.Tensor:
    """``first_unit`` (int64 [C], ``NEVER`` where unseen) with ``unit_id`` recorded for every column of ``table``
    [N, C] that holds NaN, +Inf or -Inf: the minimum of the two. Triton updates ``first_unit`` in place and returns
    it; torch returns a new tensor. ``unit_id`` may be an int64 scalar tensor on the table's device (read there: a
    launch a CUDA graph replays for every unit)."""
    if table.dim() != 2 or first_unit.shape != (table.shape[1],) or first_unit.dtype != torch.int64:
        raise ValueError(f"need a table [N, C] and an int64 [C] record, got {tuple(table.shape)} and "
                         f"{first_unit.dtype} {tuple(first_unit.shape)}")
    if isinstance(unit_id, torch.Tensor):
        if unit_id.shape != () or unit_id.dtype != torch.int64 or unit_id.device != table.device:
            raise ValueError(f"a unit id tensor is an int64 scalar on {table.device}, got {unit_id.dtype} "
                             f"{tuple(unit_id.shape)} on {unit_id.device}")
    elif unit_id < 0:
        raise ValueError(f"unit ids are >= 0, got {unit_id}")
    if table.shape[0] == 0:
        return first_unit
    use_triton = table.dtype == torch.float32 and table.is_contiguous() and first_unit.is_contiguous()
    if use_triton and resolve_backend(backend, table) == "triton":
        triton_kernels().record_nonfinite_columns(table, first_unit, unit_id)
        return first_unit
    low, high = torch.aminmax(table, dim=0)
    nonfinite = (low * 0 + high * 0) != 0  # x * 0 is NaN exactly when x is NaN or Inf (finite sums could overflow)
    return lower_first_sightings(first_unit, nonfinite, unit_id)
