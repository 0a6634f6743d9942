"""Overlap windows at a world size not measured: synthetic per-bucket RAW counts, decided by the runtime's own code.

Unit logs keep each window's totals (``WindowRecord``: buckets, buckets with updates, buckets published first and
delayed), not its per-bucket counts, so the model describes a view by three chances fitted on the measured
windows, with V views per unit:

* ``bucket_touch`` p: that a view sees rows of a given bucket. A unit of V views updates a bucket with chance
  1 - (1 - p)^V, which is the measured share of buckets with updates at the measured V;
* ``reread`` p_r: that a view of the next unit sees rows of a bucket the unit before updated; fitted so that
  1 - (1 - p_r)^V is the measured share of updated buckets that conflict (consecutive units of the RLG order come
  from weakly coupled regions, so p_r is below p);
* ``row_share`` q: the share of a touched bucket's rows a view sees, so that p q is a view's share of all the
  Gaussians (from the units' update scopes, ``update_rows``, over the Gaussian count).

At W ranks a window draws, for every bucket, how many of the V = W x views-per-rank views of each unit touch it,
turns that into row counts (views see rows independently within a bucket), builds the ``WindowHazards`` the
runtime would have read and hands them to ``odin_ns.runtime.window.decide`` with the mode's admission policy, and
to ``SyncPathStretches``, exactly as ``OdinRuntime`` does: the admission rule and the fallback to sync's path are the
runtime's, not a copy. Throughput-first also needs each conflicting bucket's delay bound; those are drawn from the
bounds its measured windows logged (admitted and refused), so it is predicted only from logs that hold some.

Windows decided from predicted read scopes (``--pipeline.odin.read-scopes predicted``, ``WindowRecord.predicted``)
follow none of this: each rank waits for the buckets its own views of unit t+1 can see by the per-bucket geometric
bounds, and a unit publishes at once (sync's path) where the plan's next unit is predicted to read every bucket it
updates (``odin_ns.sync.predicted``). Neither the geometry nor the bounds are in the unit logs, so such windows are
not fitted (``fit`` skips them) and not extrapolated to other world sizes; ``recorded_paths`` replays what each unit
of the run did, at its own world size, for ``odin-bench simulate --validate``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from odin_ns.comm.collectives import RowBuckets
from odin_ns.kernels import BITS_PER_WORD
from odin_ns.runtime.config import OVERLAPPED_MODES
from odin_ns.runtime.exchange import InFlightExchange
from odin_ns.runtime.window import SyncPathStretches, WindowDecision, decide
from odin_bench.scaling.measured import MeasuredRun, per_view_share
from odin_ns.sync.hazards import AdmissionPolicy, DelayBound, WindowHazards

NO_BOUND = DelayBound(0.0, 0.0, 0.0)
"""The delay bound of a bucket without conflicts (what the runtime's per-bucket maxima hold there)."""


@dataclass(frozen=True)
class WindowStatistics:
    """Per-view chances behind the overlap windows of the measured runs (module docstring)."""

    bucket_touch: float
    reread: float
    row_share: float
    rerun_rate: float
    """Re-runs per rank and window: the chance a rank re-runs its unit after a window."""
    delay_bounds: tuple[DelayBound, ...]
    """Every bound the measured throughput-first windows logged (admitted or refused)."""
    windows: int

    @classmethod
    def fit(cls, runs: Sequence[MeasuredRun], visible_share: float) -> WindowStatistics | None:
        """Fitted on the runs that logged overlap windows from measured read scopes (None when none did: overlapped
        modes need one), with a view's share of the Gaussians ``visible_share``."""
        measured = [run for run in runs if run.windows and not any(window.predicted for window in run.windows)]
        if not measured:
            return None
        weights = [len(run.windows) for run in measured]

        def weighted(values: Sequence[float]) -> float:
            return sum(value * weight for value, weight in zip(values, weights)) / sum(weights)

        touch, reread = [], []
        for run in measured:
            views = run.views_per_unit
            updated = statistics.fmean(w.buckets_with_updates / w.buckets for w in run.windows)
            with_updates = [w for w in run.windows if w.buckets_with_updates]
            conflicting = statistics.fmean(
                (w.buckets_published_first + w.delayed_buckets) / w.buckets_with_updates for w in with_updates
            ) if with_updates else 0.0
            touch.append(per_view_share(updated, views))
            reread.append(per_view_share(conflicting, views))
        windowed = [record for run in measured for records in run.ranks for record in records if record.window]
        bounds = [bound for run in measured for window in run.windows
                  for bound in (window.delay_bound, window.refused_bound) if bound is not None]
        bucket_touch = weighted(touch)
        return cls(
            bucket_touch=bucket_touch,
            reread=weighted(reread),
            row_share=min(1.0, visible_share / bucket_touch) if bucket_touch else 0.0,
            rerun_rate=statistics.fmean(min(record.reruns, 1) for record in windowed),
            delay_bounds=tuple(bounds),
            windows=sum(weights),
        )


@dataclass(frozen=True)
class RecordedPath:
    """What the runtime did with one unit of a measured run, as its unit logs say."""

    first: tuple[int, ...] | None
    """Per rank, how many of the previous unit's buckets it waited for and published before computing (its window's
    ``buckets_published_first``); None: the unit opened no window (nothing was in flight)."""
    buckets_with_updates: int
    sync_path: bool
    """The unit's own exchange and publication ran at once, after its compute, as under sync."""


def recorded_paths(run: MeasuredRun) -> list[RecordedPath] | None:
    """The path of each of ``run``'s steady units where its windows cannot be fitted: an overlapped run whose
    windows were decided from predicted read scopes, or that opened no window at all (every unit on sync's path).
    None for any other run. Which buckets a rank waited for is not logged, only how many."""
    if run.mode not in OVERLAPPED_MODES:
        return None
    if run.windows and not any(window.predicted for window in run.windows):
        return None
    by_rank = [{record.unit_id: record for record in records} for records in run.ranks]
    paths = []
    for record in run.ranks[0]:
        if not all(record.unit_id in ranks for ranks in by_rank):
            continue
        first = None
        if record.window is not None:
            windows = [ranks[record.unit_id].window for ranks in by_rank]
            first = tuple(window.buckets_published_first if window is not None else 0 for window in windows)
        updated = record.window.buckets_with_updates if record.window is not None else 0
        paths.append(RecordedPath(first, updated, record.sync_path))
    return paths


def window_decisions(
    fitted: WindowStatistics,
    policy: AdmissionPolicy,
    buckets: RowBuckets,
    world_size: int,
    views_per_rank: int,
    steps: int,
    stretches: SyncPathStretches,
    rng: np.random.Generator,
) -> list[WindowDecision | None]:
    """The decision of each of ``steps`` windows at ``world_size`` ranks; None for a unit ``stretches`` puts on
    sync's path."""
    rows = np.array([hi - lo for lo, hi in buckets.ranges])
    decisions: list[WindowDecision | None] = []
    for _ in range(steps):
        if stretches.take_sync_unit():
            decisions.append(None)
            continue
        hazards = _draw_hazards(fitted, rows, world_size, views_per_rank, policy.needs_delay_bounds, rng)
        decision = decide(_in_flight(hazards), policy, RowBuckets(len(rows) * BITS_PER_WORD, BITS_PER_WORD))
        stretches.count(decision.record.overlapped)
        decisions.append(decision)
    return decisions


def _draw_hazards(
    fitted: WindowStatistics,
    rows: np.ndarray,
    world_size: int,
    views_per_rank: int,
    with_bounds: bool,
    rng: np.random.Generator,
) -> WindowHazards:
    """One window's ``WindowHazards``: unit t's views update buckets, each rank's views of unit t+1 read them."""
    unseen = 1.0 - fitted.row_share
    touched_by_update = rng.binomial(world_size * views_per_rank, fitted.bucket_touch, size=len(rows))
    updated = touched_by_update > 0
    update_share = 1.0 - unseen**touched_by_update
    chance = np.where(updated, fitted.reread, fitted.bucket_touch)
    touched_by_rank = rng.binomial(views_per_rank, np.broadcast_to(chance, (world_size, len(rows))))
    rank_reads = _rows(rows * (1.0 - unseen**touched_by_rank), touched_by_rank > 0)
    union_touched = touched_by_rank.sum(0)
    union_reads = _rows(rows * (1.0 - unseen**union_touched), union_touched > 0)
    rank_conflicts = _rows(rank_reads * update_share, (touched_by_rank > 0) & updated)
    conflicts = _rows(union_reads * update_share, (union_touched > 0) & updated)
    bounds = None
    if with_bounds:
        drawn = rng.integers(len(fitted.delay_bounds), size=len(rows))
        bounds = tuple(fitted.delay_bounds[index] if conflict else NO_BOUND
                       for index, conflict in zip(drawn, conflicts))
    return WindowHazards(
        conflict_rows=tuple(conflicts.tolist()),
        update_rows=tuple(_rows(rows * update_share, updated).tolist()),
        read_rows=int(union_reads.sum()),
        rank_conflict_rows=tuple(tuple(rank.tolist()) for rank in rank_conflicts),
        rank_read_rows=tuple(rank_reads.sum(1).tolist()),
        delay_bounds=bounds,
    )


def _rows(expected: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Whole rows: the expected count rounded, at least one wherever some view touched the rows."""
    return np.where(present, np.maximum(np.rint(expected), 1), 0).astype(np.int64)


def _in_flight(hazards: WindowHazards) -> InFlightExchange:
    """The in-flight exchange ``decide`` reads, one bitmap word per bucket. ``decide`` only intersects the read
    scope with the update scope, so the conflicting buckets stand for the read scope."""
    updated = torch.tensor([-1 if rows else 0 for rows in hazards.update_rows], dtype=torch.int32)
    read = torch.tensor([-1 if rows else 0 for rows in hazards.conflict_rows], dtype=torch.int32)
    return InFlightExchange(staged=None, scopes=None, hazards=hazards, update_scope=updated, read_scope=read)
