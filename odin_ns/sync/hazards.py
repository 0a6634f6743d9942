"""Hazards between the unit whose exchange is in flight (t) and the unit computing meanwhile (t+1).

* RAW: unit t+1 reads a Gaussian that unit t's publication has not written yet. Measured per row bucket, on scopes
  gathered from every rank, so all ranks see the same numbers and take the same decision (a rank-local decision
  would let ranks diverge). The admission policy then names the buckets to publish before t+1 runs.
* WAW / WAR: unit t+1's backward writes gradients while unit t's exchange reads its own gradients and its
  publication writes the parameters. With private gradient staging (the Shadow Graph) these live in different memory
  and cannot collide; ``check_private_staging`` verifies that cheaply (storage pointers) for every unit.
* Late visibility: a Gaussian unit t moves into unit t+1's view invalidates t+1's speculative run; ``stale_reads``
  detects it after publication.
* Delayed reads (throughput-first only): unit t+1 may read rows of unit t's update stale when a bound on the skipped
  update (``DelayBound``, computed by ``odin_ns.sync.gate``) is small; ``WindowHazards.delay_bounds`` carries it
  to the policy.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

import torch

from odin_ns.kernels import bitmap_and, bitmap_and_count, bitmap_count, bitmap_or
from odin_ns.sync.scopes import restrict_to_ranges, rows_per_range


class HazardKind(str, Enum):
    RAW = "RAW"
    WAW = "WAW"
    WAR = "WAR"


class HazardError(RuntimeError):
    """A hazard the runtime must not resolve silently (a unit's private staging aliases shared memory)."""


@dataclass(frozen=True)
class DelayBound:
    """Upper bound on the update a delayed read skips, over the delayed rows: the largest screen displacement
    (pixels, in the reader's cameras) of a Gaussian's centre, the largest opacity change, and the largest change of
    any other parameter element (in its own units)."""

    pixels: float
    opacity: float
    param_step: float

    def max(self, other: DelayBound) -> DelayBound:
        return DelayBound(
            max(self.pixels, other.pixels), max(self.opacity, other.opacity), max(self.param_step, other.param_step)
        )


@dataclass(frozen=True)
class WindowHazards:
    """RAW exposure of unit t+1 to unit t's pending update, per row bucket and per reading rank, as host integers
    equal on all ranks."""

    conflict_rows: tuple[int, ...]
    """Rows of each bucket that unit t updates and unit t+1 reads on some rank."""
    update_rows: tuple[int, ...]
    """Rows of each bucket that unit t updates."""
    read_rows: int
    """|R|: rows unit t+1 reads on some rank."""
    rank_conflict_rows: tuple[tuple[int, ...], ...]
    """Per rank, rows of each bucket that unit t updates and that rank's share of unit t+1 reads."""
    rank_read_rows: tuple[int, ...]
    """Per rank, the rows its share of unit t+1 reads."""
    delay_bounds: tuple[DelayBound, ...] | None = None
    """Per bucket, the bound on the skipped update of its conflicting rows (zero where it has none); set only for a
    policy that admits delayed reads (``needs_delay_bounds``) and a window with conflicts."""

    @classmethod
    def from_device(cls, exposure: torch.Tensor) -> WindowHazards:
        """Read ``raw_exposure``'s counts on the host: the overlap decision's one host synchronisation."""
        *per_rank, union, updates = exposure.tolist()
        return cls(
            conflict_rows=tuple(union[:-1]),
            update_rows=tuple(updates[:-1]),
            read_rows=union[-1],
            rank_conflict_rows=tuple(tuple(row[:-1]) for row in per_rank),
            rank_read_rows=tuple(row[-1] for row in per_rank),
        )

    @property
    def raw(self) -> bool:
        return any(self.conflict_rows)

    def delayed_share(self, delayed: Sequence[int]) -> float:
        """The largest share, over reading ranks, of a rank's reads that fall in the ``delayed`` buckets' conflicts:
        what throughput-first's tau bounds, so that no rank reads more than tau of its own rows stale."""
        shares = [
            sum(conflicts[bucket] for bucket in delayed) / reads
            for conflicts, reads in zip(self.rank_conflict_rows, self.rank_read_rows)
            if reads
        ]
        return max(shares, default=0.0)


def raw_exposure(
    update_scope: torch.Tensor, read_scopes: torch.Tensor, ranges: Sequence[tuple[int, int]]
) -> torch.Tensor:
    """int64 [world_size + 2, buckets + 1], computed on the device: for each rank's read scope (``read_scopes``
    [world_size, words]) and then for their union, |update ∩ read| per bucket followed by |read|; last, |update| per
    bucket (and a 0)."""
    union = functools.reduce(bitmap_or, read_scopes.unbind(0))
    rows = [
        torch.cat([rows_per_range(bitmap_and(update_scope, read), ranges), bitmap_count(read)[None]])
        for read in (*read_scopes.unbind(0), union)
    ]
    zero = torch.zeros(1, dtype=torch.int64, device=update_scope.device)
    rows.append(torch.cat([rows_per_range(update_scope, ranges), zero]))
    return torch.stack(rows)


def stale_reads(
    update_scope: torch.Tensor, late_ranges: Sequence[tuple[int, int]], seen_scope: torch.Tensor
) -> torch.Tensor:
    """0-d count of rows unit t+1 saw (under the parameters before or after unit t's publication) that unit t wrote
    only after t+1 had run; non-zero means t+1's speculative run read stale values and must be re-run."""
    return bitmap_and_count(restrict_to_ranges(update_scope, late_ranges), seen_scope)


class AdmissionPolicy(ABC):
    """Admission gate of the overlap window: which of unit t's buckets must be published before unit t+1 runs.

    Every rank calls it with the same ``WindowHazards``, so every rank decides the same. A policy that admits
    delayed (stale) reads, such as ``odin_ns.sync.gate.ThroughputFirstPolicy``, returns fewer buckets than there are
    conflicts; the conflicting buckets it leaves out are the delayed ones.
    """

    name: ClassVar[str]
    needs_delay_bounds: ClassVar[bool] = False
    """Whether the runtime must attach ``delay_bounds`` to windows with conflicts (costs a bound computation and a
    host read per such window)."""

    @abstractmethod
    def buckets_to_publish_first(self, hazards: WindowHazards) -> list[int]:
        """Indices of the buckets to wait for and publish before unit t+1 runs."""


class QualityFirstPolicy(AdmissionPolicy):
    """No delayed reads: every bucket holding a row that unit t+1 reads is published before it runs."""

    name = "quality-first"

    def buckets_to_publish_first(self, hazards: WindowHazards) -> list[int]:
        return [bucket for bucket, rows in enumerate(hazards.conflict_rows) if rows]


def _storage_of(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def check_private_staging(
    staging: Mapping[str, torch.Tensor],
    shared_params: Mapping[str, torch.Tensor],
    in_flight: Iterable[torch.Tensor],
) -> None:
    """WAW/WAR guard: a unit's staged gradients must be memory of its own, apart from the shared parameters (which
    publication writes) and from the buffers of the exchange in flight (which the collectives read and write).

    Also rejects gradients that landed on the shared parameters themselves: that happens when ``compute_fn``
    differentiates through the model's tensors instead of the views it was given, and would race with publication.
    """
    for name, param in shared_params.items():
        if param.grad is not None:
            raise HazardError(
                f"{HazardKind.WAW.value}: gradients reached the shared parameter '{name}' instead of its shadow view: "
                "compute_fn must differentiate through the views it is given"
            )
    busy = {_storage_of(t) for t in (*shared_params.values(), *in_flight) if t.numel()}
    for name, grad in staging.items():
        if grad.numel() and _storage_of(grad) in busy:
            raise HazardError(
                f"{HazardKind.WAW.value}/{HazardKind.WAR.value}: the staged gradient of '{name}' shares memory with "
                "the shared parameters or the exchange in flight"
            )
