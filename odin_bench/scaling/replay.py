"""Step time of each mode at W ranks over a link, replayed from measured compute times and synthetic windows.

For each of ``steps`` steps, rank r computes c_r, the sum of its views' measured times (views dealt as the plan
deals them); ranks meet at every exchange, so a step waits for the slowest, C = max_r c_r. With O the mode's host
time outside the runtime's spans, P the publication, g the scope all-gather that opens every exchange and e_j the
all-reduce of row bucket j (issued in row order on one stream, so bucket j arrives at a_j = g + e_0 + ... + e_j):

* sync: O + C + a_last + P;
* quality-first and throughput-first, in a window whose policy publishes buckets F first: the unit waits for
  t_F = a_max(F) (g alone when F is empty) and publishes F's share of P, computes, and publishes the rest once the
  last bucket arrived: O + max(t_F + C, a_last) + P_rest + the re-run of the slowest rank that re-ran (ranks re-run
  at the measured rate). A unit the runtime puts on sync's path skips the window's host work and costs a sync step
  (O_sync); so do all units on one rank;
* sharded (gsplat's distributed rasterization, as Grendel-GS shards): each rank holds 1/W of the Gaussians, sends
  the projected Gaussians to the ranks whose cameras see them (all-to-all) and gets their gradients back the same
  way; no gradient all-reduce. O_sharded + C + both all-to-alls + two small all-gathers (Gaussian counts,
  cameras) + P / W (each rank steps its own rows). The render is taken to cost what the replicated one costs.

Host time O is the one measured on one rank at W = 1 and the one measured on 2+ ranks at every W >= 2
(``Calibration.host_s``); with a host-bound term, one rank's plus what W - 1 peers add to a host-bound step, which
grows with the slowest of W hosts and with the collectives a unit launches (``Wire.collectives``,
``HostBound``).

A run replayed from its recorded paths (``recorded_paths``: predicted read scopes, or no window at all), at its own
W, costs per unit, with the mode's O throughout: O + the window + the unit's own exchange where it published at once.
The window is C where the unit opened none; else the slowest rank r's max(a_(k_r - 1) + P_k + c_r, a_last) + P - P_k
with k_r the buckets r waited for (taken as the first k_r launched: a lower bound, a_last the upper) and P_k their
share of P. Publishing at once adds a_last + P (the exchange a later window would otherwise have overlapped).

Views per second: W x views per rank over the mean step time.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from odin_ns.comm.collectives import RowBuckets
from odin_ns.kernels import BITS_PER_WORD
from odin_ns.runtime.config import RuntimeConfig
from odin_ns.runtime.window import SyncPathStretches, WindowDecision
from odin_bench.scaling.links import Link, all_gather, all_reduce, all_to_all
from odin_bench.scaling.measured import Calibration, MeasuredRun, ScalingInputError
from odin_bench.scaling.windows import RecordedPath, WindowStatistics, window_decisions
from odin_ns.schedule.plan import SchedulePlan
from odin_ns.sync.gate import ThroughputFirstPolicy
from odin_ns.sync.hazards import QualityFirstPolicy

MODES = ("sync", "quality-first", "throughput-first", "sharded")
OVERLAPPED = ("quality-first", "throughput-first")
ShardedSends = Literal["visible", "all"]

PROJECTED_BYTES = 48
"""What gsplat 1.4's distributed rasterization sends per projected (Gaussian, camera) pair: radii (2 int32),
means2d (2), depth (1), conic (3), opacity (1) and colour (3) float32."""
PAIR_INDEX_BYTES = 16
"""Its packed mode also sends each pair's camera and Gaussian index (int64)."""
PROJECTED_GRADIENT_BYTES = 40
"""Backward: the gradients of means2d, depth, conic, opacity and colour, float32."""
CAMERA_BYTES = 100
"""A camera's view matrix (16) and intrinsics (9), float32, all-gathered before projection."""
SPLATFACTO_ROW_TENSORS = 6
"""means, scales, quats, opacities, features_dc, features_rest."""


@dataclass(frozen=True)
class Wire:
    """What crosses the link in a step, for ``gaussians`` Gaussians in splatfacto's layout at ``sh_degree``."""

    gaussians: int
    sh_degree: int = 3
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    """The runtime configuration whose bucket plan the exchange follows (its defaults unless the runs say otherwise)."""

    @property
    def gradient_row_bytes(self) -> int:
        """float32 gradient of one Gaussian: means 3, scales 3, quats 4, opacity 1, colour 3 (sh_degree + 1)^2."""
        return 4 * (11 + 3 * (self.sh_degree + 1) ** 2)

    @property
    def buckets(self) -> RowBuckets:
        """The runtime's bucket plan for these rows."""
        return self.runtime.buckets_for([torch.empty((self.gaussians, self.gradient_row_bytes // 4), device="meta")])

    def bucket_bytes(self) -> list[int]:
        return [(hi - lo) * self.gradient_row_bytes for lo, hi in self.buckets.ranges]

    def collectives(self, world_size: int, exchange: str = "dense") -> int:
        """Collectives one rank launches per unit at ``world_size`` ranks (each a launch its host pays for), as
        ``GradientExchange`` plans them, for a unit whose record says ``exchange``: none on one rank or alone
        (``local``, as no-exchange runs); ``dense``: the scope all-gather and one all-reduce per bucket. A scoped
        exchange launches one all-reduce per bucket holding update rows, which the logs do not count. Not
        counted: the all-reduce of dense parameters' gradients, which has none with splatfacto's camera optimizer
        off (its default)."""
        if world_size == 1 or exchange == "local":
            return 0
        if exchange == "dense":
            return 1 + len(self.buckets.ranges)
        raise ScalingInputError(f"the collectives of a {exchange!r} exchange are not modelled (dense only)")

    def scope_piece(self, mode: str) -> int:
        """One rank's part of the scope all-gather: its update and read bitmaps (int32 words), and for
        throughput-first the per-32-row gradient maxima of every tensor and two sensitivity maxima."""
        words = -(-self.gaussians // BITS_PER_WORD)
        maxima = SPLATFACTO_ROW_TENSORS + 2 if mode == "throughput-first" else 0
        return 4 * words * (2 + maxima)

    def dense_unit_bytes(self, mode: str) -> int:
        """What one rank's dense exchange of a unit moves (its ``bytes_exchanged``): its scope piece and every row."""
        return self.scope_piece(mode) + self.gaussians * self.gradient_row_bytes

    def sharded_collectives(
        self, link: Link, world_size: int, views_per_rank: int, visible_share: float, sends: ShardedSends
    ) -> list[float]:
        """Seconds of each collective the sharded peer launches in a step: pairs of this rank's Gaussians and every
        rank's cameras go out (only visible pairs when packed, ``sends='visible'``; all of them otherwise, as
        ``odin_bench.gsplat_distributed`` runs it) and their gradients come back."""
        share = visible_share if sends == "visible" else 1.0
        pairs = views_per_rank * self.gaussians * share
        forward = PROJECTED_BYTES + (PAIR_INDEX_BYTES if sends == "visible" else 0)
        collectives = [all_to_all(link, pairs * forward, world_size),
                       all_to_all(link, pairs * PROJECTED_GRADIENT_BYTES, world_size),
                       all_gather(link, 4, world_size), all_gather(link, CAMERA_BYTES * views_per_rank, world_size)]
        if sends == "visible":
            collectives.append(all_to_all(link, 4 * world_size, world_size))  # the pair counts, before the pairs
        return collectives


def run_collectives(run: MeasuredRun, wire: Wire) -> float:
    """Collectives per unit that ``run``'s ranks launched, by the exchange each of rank 0's units recorded (the mean:
    an auto exchange may change kind between units)."""
    kinds = [record.exchange for record in run.ranks[0]]
    counts = {kind: wire.collectives(run.world_size, kind) for kind in set(kinds)}
    return statistics.fmean(counts[kind] for kind in kinds)


def gaussians_from_exchange(runs: Sequence[MeasuredRun], sh_degree: int = 3) -> int | None:
    """The Gaussian count a dense exchange on 2+ ranks implies: the N whose ``Wire.dense_unit_bytes`` is the median
    ``bytes_exchanged`` of rank 0's dense units (the median over such runs); None without any."""
    counts = []
    for run in runs:
        exchanged = [record.bytes_exchanged for record in run.ranks[0]
                     if record.exchange == "dense" and record.bytes_exchanged > 0]
        if run.world_size < 2 or not exchanged:
            continue
        nbytes = int(statistics.median(exchanged))
        estimate = nbytes // Wire(1, sh_degree).gradient_row_bytes
        while estimate > 0 and Wire(estimate, sh_degree).dense_unit_bytes(run.mode) > nbytes:
            estimate -= 1
        counts.append(estimate)
    return round(statistics.median(counts)) if counts else None


@dataclass(frozen=True)
class WorldDraw:
    """What one world size draws once, shared by every link: each rank's compute per step, which ranks re-run,
    and every overlapped mode's window decisions."""

    world_size: int
    compute: np.ndarray
    """[steps, world_size] seconds."""
    reruns: np.ndarray
    """[steps, world_size] bool."""
    decisions: dict[str, list[WindowDecision | None] | list[RecordedPath]]
    dealing: str
    """How views reached ranks: 'plan', 'round-robin' (more views per step than the plan has) or 'drawn' (no
    plan: per-view times drawn from the measured distribution)."""


@dataclass(frozen=True)
class Prediction:
    mode: str
    world_size: int
    link: str
    step_s: float
    """Mean predicted step time."""
    compute_s: float
    """Mean compute of the slowest rank."""
    views_per_s: float


def draw_world(
    calibration: Calibration,
    fitted: WindowStatistics | None,
    plan: SchedulePlan | None,
    wire: Wire,
    world_size: int,
    modes: Sequence[str],
    steps: int,
    seed: int,
    recorded: Sequence[RecordedPath] | None = None,
) -> WorldDraw:
    """Compute times, re-runs and window decisions of ``steps`` steps at ``world_size`` ranks; with ``recorded``,
    the overlapped modes take those paths in turn instead (at the world size they were recorded at)."""
    rng = np.random.default_rng([seed, world_size])
    compute, dealing = _rank_compute(calibration, plan, world_size, steps, rng)
    rerun_rate = fitted.rerun_rate if fitted is not None and world_size > 1 else 0.0
    config = RuntimeConfig()
    policies = {"quality-first": QualityFirstPolicy(), "throughput-first": ThroughputFirstPolicy(config.delay)}
    decisions = {}
    for mode in predictable(modes, fitted, recorded):
        if mode in OVERLAPPED and recorded:
            if any(path.first is not None and len(path.first) != world_size for path in recorded):
                raise ValueError(f"recorded paths are replayed at the world size they were recorded at, not {world_size}")
            decisions[mode] = [recorded[step % len(recorded)] for step in range(steps)]
        elif mode in OVERLAPPED:
            decisions[mode] = [None] * steps if world_size == 1 else window_decisions(
                fitted, policies[mode], wire.buckets, world_size, calibration.views_per_rank, steps,
                SyncPathStretches(), rng,
            )
    return WorldDraw(world_size, compute, rng.random(compute.shape) < rerun_rate, decisions, dealing)


def predictable(
    modes: Sequence[str], fitted: WindowStatistics | None, recorded: Sequence[RecordedPath] | None = None
) -> list[str]:
    """The modes the measured runs allow predicting: overlapped ones need windows, throughput-first their delay
    bounds, or the recorded paths of a run."""
    return [mode for mode in modes if mode not in OVERLAPPED or recorded or (
        fitted is not None and (mode == "quality-first" or fitted.delay_bounds))]


def _rank_compute(
    calibration: Calibration, plan: SchedulePlan | None, world_size: int, steps: int, rng: np.random.Generator
) -> tuple[np.ndarray, str]:
    per_rank = calibration.views_per_rank
    view_seconds, view_samples = calibration.compute_samples(world_size)
    if plan is None:
        return rng.choice(view_seconds, size=(steps, world_size, per_rank)).sum(2), "drawn"
    views, dealing = _dealt_views(plan, world_size, per_rank, steps, rng)
    seconds = np.empty(views.shape)
    for view in np.unique(views):
        dealt = views == view
        samples = view_samples.get(int(view), view_seconds)
        seconds[dealt] = rng.choice(samples, size=int(dealt.sum()))
    return seconds.sum(2), dealing


def _dealt_views(
    plan: SchedulePlan, world_size: int, per_rank: int, steps: int, rng: np.random.Generator
) -> tuple[np.ndarray, str]:
    """[steps, world_size, per_rank] view indices: the plan's units at this world size, or, when a step needs more
    views than the plan has, views dealt round-robin from one shuffle of all views after another."""
    per_step = world_size * per_rank
    if per_step <= plan.num_views:
        scaled = plan.with_batch(world_size, views_per_rank=per_rank)
        return np.array([scaled.unit_views(step) for step in range(steps)]), "plan"
    shuffles = [rng.permutation(plan.num_views) for _ in range(math.ceil(steps * per_step / plan.num_views))]
    return np.concatenate(shuffles)[: steps * per_step].reshape(steps, world_size, per_rank), "round-robin"


def step_seconds(
    mode: str, link: Link, calibration: Calibration, wire: Wire, draw: WorldDraw, sharded_sends: ShardedSends
) -> np.ndarray:
    """[steps] predicted seconds of each step of ``mode`` over ``link`` (module docstring)."""
    world_size = draw.world_size
    slowest = draw.compute.max(1)
    publish = calibration.publish_s
    if mode == "sharded":
        collectives = wire.sharded_collectives(
            link, world_size, calibration.views_per_rank, calibration.visible_share, sharded_sends
        )
        overhead = calibration.host_s(mode, world_size, len(collectives))
        return overhead + slowest + sum(collectives) + publish / world_size
    overhead = calibration.host_s(mode, world_size, wire.collectives(world_size))
    sync_overhead = calibration.host_s("sync", world_size, wire.collectives(world_size))
    buckets = np.cumsum([all_reduce(link, nbytes, world_size) for nbytes in wire.bucket_bytes()])
    sync_exchange = all_gather(link, wire.scope_piece("sync"), world_size) + buckets[-1]
    seconds = sync_overhead + slowest + sync_exchange + publish  # sync, and every unit on sync's path
    gather = all_gather(link, wire.scope_piece(mode), world_size)
    arrivals = gather + buckets
    for step, decision in enumerate(draw.decisions.get(mode, ())):
        if isinstance(decision, RecordedPath):
            seconds[step] = overhead + _recorded_step(decision, draw.compute[step], arrivals, publish, gather)
            continue
        if decision is None:
            continue
        first = decision.publish_first
        first_publish = publish * len(first) / max(decision.record.buckets_with_updates, 1)
        ready = (arrivals[max(first)] if first else gather) + first_publish
        rerun = (draw.compute[step] * draw.reruns[step]).max()
        seconds[step] = overhead + max(ready + slowest[step], arrivals[-1]) + publish - first_publish + rerun
    return seconds


def _recorded_step(
    path: RecordedPath, compute: np.ndarray, arrivals: np.ndarray, publish: float, gather: float
) -> float:
    """A recorded unit's step without host time (module docstring): its window, and its own exchange and publication
    where it took sync's path."""
    if path.first is None:
        seconds = float(compute.max())
    else:
        ends = []
        for waited, rank_compute in zip(path.first, compute):
            first_publish = publish * waited / max(path.buckets_with_updates, 1)
            ready = (arrivals[min(waited, len(arrivals)) - 1] if waited else gather) + first_publish
            ends.append(max(ready + rank_compute, arrivals[-1]) + publish - first_publish)
        seconds = max(ends)
    return seconds + (arrivals[-1] + publish if path.sync_path else 0.0)


def predict(
    calibration: Calibration,
    fitted: WindowStatistics | None,
    plan: SchedulePlan | None,
    links: Sequence[Link],
    world_sizes: Sequence[int],
    modes: Sequence[str],
    steps: int,
    seed: int,
    sharded_sends: ShardedSends = "visible",
    sh_degree: int = 3,
    recorded: Sequence[RecordedPath] | None = None,
    runtime: RuntimeConfig | None = None,
) -> tuple[list[Prediction], dict[int, str]]:
    """Every predictable mode at every world size over every link, and how views were dealt at each world size
    (``recorded``: the overlapped modes replay those paths, ``draw_world``), for ``runtime``'s bucket plan (the
    runtime's defaults when None)."""
    wire = Wire(calibration.gaussians, sh_degree, runtime or RuntimeConfig())
    predictions, dealings = [], {}
    for world_size in world_sizes:
        draw = draw_world(calibration, fitted, plan, wire, world_size, modes, steps, seed, recorded)
        dealings[world_size] = draw.dealing
        views = world_size * calibration.views_per_rank
        for link in links:
            for mode in predictable(modes, fitted, recorded):
                step = float(step_seconds(mode, link, calibration, wire, draw, sharded_sends).mean())
                predictions.append(
                    Prediction(mode, world_size, link.name, step, float(draw.compute.max(1).mean()), views / step)
                )
    return predictions, dealings
