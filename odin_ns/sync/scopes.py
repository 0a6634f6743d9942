"""Read and update scopes of a unit, as packed Gaussian bitmaps, and their restriction to row buckets.

A unit's *read scope* is the set of Gaussians its views see (the rows its forward reads); its *update scope* is the
union over ranks of the Gaussians seen by the unit (the rows its publication writes). Everything here stays on the
device: counts are tensors, so building a hazard check never synchronises with the host.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from odin_ns.kernels import BITS_PER_WORD, bitmap_count, bitmap_or, num_words, pack_bitmap


def scope_of(visible: torch.Tensor, num_rows: int, device: torch.device) -> torch.Tensor:
    """Bitmap of a bool visibility mask [num_rows] on ``device``; ValueError for anything else (a caller bug)."""
    if visible.dtype != torch.bool or visible.shape != (num_rows,) or visible.device != device:
        raise ValueError(
            f"visibility must be a bool mask of shape ({num_rows},) on {device}, "
            f"got {visible.dtype} {tuple(visible.shape)} on {visible.device}"
        )
    return pack_bitmap(visible)


def union_over_ranks(gathered: torch.Tensor) -> torch.Tensor:
    """OR of per-rank bitmaps [world_size, words] (collectives have no bitwise reduction, so it is done locally)."""
    return functools.reduce(bitmap_or, gathered.unbind(0)).contiguous()


def word_slice(row_range: tuple[int, int]) -> slice:
    """The bitmap words of a row range starting on a word boundary (every bucket does)."""
    lo, hi = row_range
    if lo % BITS_PER_WORD:
        raise ValueError(f"row range {row_range} does not start on a {BITS_PER_WORD}-row word boundary")
    return slice(lo // BITS_PER_WORD, num_words(hi))


def rows_per_range(bitmap: torch.Tensor, ranges: Sequence[tuple[int, int]]) -> torch.Tensor:
    """int64 [len(ranges)] count of set rows of ``bitmap`` within each range (device tensor, no host sync)."""
    if not ranges:
        return torch.zeros(0, dtype=torch.int64, device=bitmap.device)
    return torch.stack([bitmap_count(bitmap[word_slice(row_range)]) for row_range in ranges])


def restrict_to_ranges(bitmap: torch.Tensor, ranges: Sequence[tuple[int, int]]) -> torch.Tensor:
    """``bitmap`` with every row outside ``ranges`` cleared."""
    restricted = torch.zeros_like(bitmap)
    for row_range in ranges:
        words = word_slice(row_range)
        restricted[words] = bitmap[words]
    return restricted
