"""The overlap window (unit t in flight, unit t+1 about to run): the admission decision, its record, and the checks
behind it.

* ``decide``: which of unit t's buckets unit t+1 waits for (the admission policy's choice, from the window's hazards
  and, for throughput-first, the delay bound of each bucket) and the ``WindowRecord`` of the decision.
* ``delay_bounds``: throughput-first's per-bucket bound on the update a delayed read skips (``odin_ns.sync.gate``).
* ``saw_stale_rows``: after unit t+1 ran, whether a row published after it ran was one it saw: then its
  speculative gradients differ from sync's and it must re-run.
* ``SyncPathStretches``: where windows keep leaving nothing in flight, run stretches of units on sync's path.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from odin_ns.comm.collectives import RowBuckets
from odin_ns.kernels import bitmap_and, bitmap_andnot, bitmap_or, bitmap_to_mask
from odin_ns.runtime.exchange import InFlightExchange
from odin_ns.runtime.records import WindowRecord
from odin_ns.sync.gate import AdamRows, DelayLimits, bucket_maxima, gathered_maxima, row_bounds
from odin_ns.sync.hazards import AdmissionPolicy, DelayBound, WindowHazards, stale_reads
from odin_ns.sync.scopes import restrict_to_ranges


@dataclass(frozen=True)
class WindowDecision:
    publish_first: list[int]
    """Buckets of unit t to wait for and publish before unit t+1 runs."""
    record: WindowRecord


def decide(in_flight: InFlightExchange, policy: AdmissionPolicy, buckets: RowBuckets) -> WindowDecision:
    """Admission of unit t+1 against ``in_flight`` (its hazards read); sets the delayed scope of admitted stale
    reads."""
    hazards = in_flight.hazards
    first = policy.buckets_to_publish_first(hazards)
    delayed = [bucket for bucket, rows in enumerate(hazards.conflict_rows) if rows and bucket not in first]
    if delayed:
        conflicts = bitmap_and(in_flight.update_scope, in_flight.read_scope)
        in_flight.delayed_scope = restrict_to_ranges(conflicts, [buckets.ranges[b] for b in delayed])
    record = WindowRecord(
        conflict_rows=sum(hazards.conflict_rows),
        buckets=len(buckets.ranges),
        buckets_with_updates=sum(1 for rows in hazards.update_rows if rows),
        buckets_published_first=len(first),
        **(_delay_fields(hazards, first, delayed) if policy.needs_delay_bounds else {}),
    )
    return WindowDecision(first, record)


def _delay_fields(hazards: WindowHazards, first: Sequence[int], delayed: Sequence[int]) -> dict:
    """Record of a delayed-read decision: delayed rows and buckets, the largest share a rank read stale (and the
    whole conflict's share of the read scope), the bound that admitted them, and the bound of the highest conflicting
    bucket published first (within the limits there means tau, not the bound, stopped the delays)."""
    bounds = hazards.delay_bounds or ()
    refused = [bucket for bucket in first if hazards.conflict_rows[bucket]]
    admitted = [bounds[bucket] for bucket in delayed]
    return {
        "delayed_rows": sum(hazards.conflict_rows[bucket] for bucket in delayed),
        "delayed_buckets": len(delayed),
        "delayed_ratio": hazards.delayed_share(delayed),
        "conflict_ratio": sum(hazards.conflict_rows) / hazards.read_rows if hazards.read_rows else 0.0,
        "delay_bound": functools.reduce(DelayBound.max, admitted) if admitted else None,
        "refused_bound": bounds[refused[-1]] if refused and bounds else None,
    }


def with_delay_bounds(
    in_flight: InFlightExchange,
    adam: Mapping[str, AdamRows],
    limits: DelayLimits,
    buckets: RowBuckets,
) -> None:
    """Attach to the window's hazards, per bucket, the bound on the update unit t+1 would skip by reading its
    conflicting rows stale, from the gathered ``local_maxima`` and the replicated Adam state ``adam``; one host
    read. Runs after the gradient buckets are launched, so it overlaps their transfer."""
    grad_bounds, sensitivity = gathered_maxima(in_flight.maxima, list(adam), buckets.num_rows)
    bounds = row_bounds(adam, grad_bounds, sensitivity, limits)
    candidates = bitmap_to_mask(bitmap_and(in_flight.update_scope, in_flight.read_scope), buckets.num_rows)
    per_bucket = bucket_maxima(bounds, candidates, buckets.rows_per_bucket).T.tolist()
    in_flight.hazards = replace(in_flight.hazards, delay_bounds=tuple(DelayBound(*bound) for bound in per_bucket))


def saw_stale_rows(
    in_flight: InFlightExchange,
    late_buckets: Sequence[int],
    buckets: RowBuckets,
    seen_before: torch.Tensor,
    seen_after: torch.Tensor,
) -> bool:
    """Whether a row published after unit t+1 ran (in ``late_buckets``) is one this rank's views saw, under the
    parameters before (``seen_before``, what it rendered) or after (``seen_after``) that publication (a Gaussian
    moved into or out of its views). Delayed rows this rank rendered were read stale on purpose and do not count; a
    delayed row that enters this rank's views only through the update does: the delay was bounded for the ranks that
    read it, not for this one."""
    seen = bitmap_or(seen_before, seen_after)
    if in_flight.delayed_scope is not None:
        seen = bitmap_andnot(seen, bitmap_and(in_flight.delayed_scope, seen_before))
    late_ranges = [buckets.ranges[bucket] for bucket in late_buckets]
    return bool(stale_reads(in_flight.update_scope, late_ranges, seen).item())


SYNC_PATH_AFTER = 16
"""Windows in a row that left nothing in flight (as on captures where every view sees almost everything) after which
an overlapped mode runs a stretch on sync's path: enough that a short run of conflicting units does not end overlap
the next units could have."""
SYNC_PATH_UNITS = 64
"""Units of such a stretch before windows are probed again: a probe costs the window's host work, so probing is
rare where it keeps finding nothing to overlap."""


class SyncPathStretches:
    """After ``after`` windows in a row that left nothing in flight, run ``units`` units on sync's path (no
    read-scope pass, hazard read or validation, and with predicted read scopes no bounds refresh or prediction: host
    work that cannot pay), then probe again. The parameters are sync's either way. Every rank counts the same windows
    (decided from gathered scopes, or from the plan and bounds adopted alike), so every rank switches at the same
    unit."""

    def __init__(self, after: int = SYNC_PATH_AFTER, units: int = SYNC_PATH_UNITS):
        self.after, self.units = after, units
        self._idle_windows = 0
        self._remaining = 0

    def count(self, overlapped: bool) -> None:
        """One more window: ``overlapped`` if it left some bucket of the previous unit in flight."""
        self._idle_windows = 0 if overlapped else self._idle_windows + 1
        if self._idle_windows >= self.after:
            self._idle_windows, self._remaining = 0, self.units

    @property
    def in_stretch(self) -> bool:
        """Whether units of the current stretch are still to run (after ``take_sync_unit`` took its last: False)."""
        return self._remaining > 0

    def take_sync_unit(self) -> bool:
        """Whether the next unit runs on sync's path (and count it)."""
        if not self._remaining:
            return False
        self._remaining -= 1
        return True
