"""GPU kernels of the Odin runtime (Triton, with a plain-torch fallback).

Every function dispatches per call: Triton for CUDA tensors (or CPU tensors under ``TRITON_INTERPRET=1``), torch
otherwise. Force one with ``backend="triton"|"torch"`` or the ``ODIN_KERNELS`` env var. See docs/kernels.md.
"""

import torch

from odin_ns.kernels.adam import (
    ColumnGroup,
    PackedAdam,
    packed_adam_hyper,
    packed_adam_step,
    packed_adam_step_from,
    selective_adam_step,
)
from odin_ns.kernels.bitmap import (
    BITS_PER_WORD,
    bitmap_and,
    bitmap_and_count,
    bitmap_andnot,
    bitmap_count,
    bitmap_indices,
    bitmap_or,
    bitmap_to_mask,
    check_bitmap,
    num_words,
    overlap_ratio,
    pack_bitmap,
)
from odin_ns.kernels.compaction import gather_rows_packed, pack_columns, scatter_rows_packed
from odin_ns.kernels.dispatch import resolve_backend
from odin_ns.kernels.finite import record_nonfinite_columns
from odin_ns.kernels.first_sightings import NEVER
from odin_ns.kernels.guard import record_rows_outside_buckets
from odin_ns.kernels.isect import fill_tile_intersections, tile_intersection_counts

__all__ = [
    "BITS_PER_WORD",
    "NEVER",
    "ColumnGroup",
    "bitmap_and",
    "bitmap_and_count",
    "bitmap_andnot",
    "bitmap_count",
    "bitmap_indices",
    "bitmap_or",
    "bitmap_to_mask",
    "check_bitmap",
    "fill_tile_intersections",
    "gather_rows_packed",
    "num_words",
    "overlap_ratio",
    "pack_columns",
    "packed_adam_hyper",
    "packed_adam_step",
    "packed_adam_step_from",
    "PackedAdam",
    "pack_bitmap",
    "record_nonfinite_columns",
    "record_rows_outside_buckets",
    "resolve_backend",
    "scatter_rows_packed",
    "selective_adam_step",
    "tile_intersection_counts",
]


def copy_to_host_behind_event(values: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event | None]:
    """``values`` copied to host memory without waiting: on CUDA a non-blocking copy into pinned memory, complete
    once the returned event has (the reader waits on it late, when it has long completed); elsewhere a clone."""
    if not values.is_cuda:
        return values.clone(), None
    host = torch.empty(values.shape, dtype=values.dtype, pin_memory=True)
    host.copy_(values, non_blocking=True)
    ready = torch.cuda.Event()
    ready.record()
    return host, ready
