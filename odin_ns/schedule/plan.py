"""Static (ahead-of-time) schedule: which views every rank renders at every step, and where overlap windows are.

A *unit* is what all ranks render in one step: world_size x views_per_rank views, rank r taking the r-th block of
views_per_rank. Each epoch is a fresh, seeded permutation of the training views cut into units:

* ``rlg`` order: views are shuffled inside their region and cut into single-region units; the units of the K
  regions are interleaved evenly (never two of one region in a row while another region has units left), ties
  going along the region rotation (the cyclic order with the weakest coupling between consecutive regions), so
  consecutive units come from weakly coupled regions. The views left over when a region's size is not a multiple
  of the unit size are pooled into mixed units, interleaved like one more region.
* ``random`` order: a plain shuffle (the baseline).

Remainder: when the number of views V is not a multiple of the unit size B, each epoch drops V mod B views (drawn at
random from the pool of leftovers, so a different set every epoch) and has V // B units; no unit ever holds the same
view twice and no view appears twice in an epoch. Unit u of epoch e is step e * (V // B) + u.

Plan quality: between consecutive units the plan predicts the conflict from the RLG (sum and maximum of the Jaccard
weights between the two units' views), and counts the pairs whose maximum is below ``conflict_threshold`` as
admissible overlap windows. These statistics judge an order against a random one (``summary``); the runtime decides
each overlap from the actual read and update scopes, not from them.
"""

from __future__ import annotations

import heapq
import json
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Literal, Optional, Sequence, get_args

import numpy as np
import scipy.sparse as sp

from odin_ns.schedule.partition import DEFAULT_NUM_REGIONS, Partition, partition_views, region_coupling
from odin_ns.schedule.rlg import DEFAULT_MAX_TRACK_LENGTH, DEFAULT_TOP_K, RelativeLocalityGraph, build_rlg
from odin_ns.schedule.tracks import ViewCameras, collect_observations, view_names

logger = logging.getLogger(__name__)

Order = Literal["rlg", "random"]
ORDERS = get_args(Order)

DEFAULT_CONFLICT_THRESHOLD = 0.05
"""A window is admissible when no view pair across two consecutive units shares 5% or more of its points. On cup77
the 8 strongest neighbours of a view overlap by 0.17 or more on average, so this only admits pairs that are not
close neighbours (docs/schedule.md)."""

_PLAN_FORMAT = 1
SUMMARY_EPOCHS = 4
"""Epochs the plan statistics average over: each epoch is a different shuffle, one alone is noisy on small data."""


@dataclass(frozen=True)
class UnitConflicts:
    """Predicted conflict between each unit and the next one."""

    total: np.ndarray
    """Sum of RLG weights over all view pairs across the two units."""
    peak: np.ndarray
    """Largest single RLG weight across the two units."""
    threshold: float

    @property
    def admissible(self) -> np.ndarray:
        """Candidate overlap windows: no strongly overlapping pair across the two units."""
        return self.peak < self.threshold

    @property
    def admissible_fraction(self) -> float:
        return float(self.admissible.mean()) if len(self.peak) else 1.0


def consecutive_conflicts(weights: sp.csr_matrix, units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum, max) of RLG weights between units[i] and units[i + 1], for every i, without densifying anything."""
    pairs = len(units) - 1
    if pairs < 1:
        return np.zeros(0), np.zeros(0)
    views = units[:-1].reshape(-1)
    unit_of_view = np.repeat(np.arange(pairs), units.shape[1])
    starts, ends = weights.indptr[views], weights.indptr[views + 1]
    edge_counts = ends - starts
    edge_unit = np.repeat(unit_of_view, edge_counts)
    edge_offsets = np.arange(edge_counts.sum()) - np.repeat(np.cumsum(edge_counts) - edge_counts, edge_counts)
    edge_index = np.repeat(starts, edge_counts) + edge_offsets
    num_views = weights.shape[0]
    next_members = unit_of_view * num_views + units[1:].reshape(-1)
    crosses = np.isin(edge_unit * num_views + weights.indices[edge_index], next_members)
    crossing_unit, crossing_weight = edge_unit[crosses], weights.data[edge_index[crosses]]
    total = np.bincount(crossing_unit, weights=crossing_weight, minlength=pairs)
    peak = np.zeros(pairs)
    np.maximum.at(peak, crossing_unit, crossing_weight)
    return total, peak


def check_views_per_step(world_size: int, views_per_rank: int, num_views: int) -> None:
    """Raise unless every step can get world_size * views_per_rank distinct views."""
    if world_size < 1 or views_per_rank < 1:
        raise ValueError(f"world_size and views_per_rank must be at least 1, got {world_size} and {views_per_rank}")
    if world_size * views_per_rank > num_views:
        raise ValueError(
            f"world_size * views_per_rank = {world_size} * {views_per_rank} = {world_size * views_per_rank} "
            f"views per step exceeds the {num_views} training views"
        )


def interleave_evenly(group_sizes: Sequence[int]) -> list[tuple[int, int]]:
    """(group, index) of every item of the groups, each group spread evenly over the sequence.

    Item i of a group of n sits at (i + 0.5) / n; ties go to the lower group. The next item never comes from the
    group of the previous one while another group still has items, so equal-sized and unequal groups alike
    alternate.
    """
    heap = [(0.5 / size, group, 0) for group, size in enumerate(group_sizes) if size > 0]
    heapq.heapify(heap)
    sequence, previous_group = [], None
    while heap:
        item = heapq.heappop(heap)
        if item[1] == previous_group and heap:
            item = heapq.heapreplace(heap, item)
        _, group, index = item
        sequence.append((group, index))
        previous_group = group
        if index + 1 < group_sizes[group]:
            heapq.heappush(heap, ((index + 1.5) / group_sizes[group], group, index + 1))
    return sequence


@dataclass(eq=False)
class SchedulePlan:
    """The AOT schedule: views of every rank at every step, plus predicted conflicts between steps."""

    orders: ClassVar[tuple[str, ...]] = ORDERS
    """The orders ``ordered_units`` deals; a subclass that deals another one adds its name."""

    view_names: list[str]
    """Training views, in dataset order (paths relative to the image folder): plan view i is dataset view i."""
    graph: RelativeLocalityGraph
    partition: Partition
    world_size: int = 1
    views_per_rank: int = 1
    order: Order = "rlg"
    seed: int = 0
    conflict_threshold: float = DEFAULT_CONFLICT_THRESHOLD
    positions: Optional[np.ndarray] = None
    """(views, 3) camera positions, for the figure."""
    settings: dict = field(default_factory=dict)
    """How the plan was built (top_k, max_track_length, AOT timings); recorded, not used."""
    rotation: np.ndarray = field(init=False, repr=False)
    """Cyclic order of the regions with the weakest coupling between consecutive ones."""
    _epoch_cache: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        check_views_per_step(self.world_size, self.views_per_rank, self.num_views)
        if self.order not in self.orders:
            raise ValueError(f"unknown order {self.order!r}, expected one of {self.orders}")
        if len(self.partition.labels) != self.num_views or self.graph.num_views != self.num_views:
            raise ValueError(f"plan of {self.num_views} views got a graph or partition of another size")
        self.rotation = self.partition.rotation_order()

    @property
    def num_views(self) -> int:
        return len(self.view_names)

    @property
    def views_per_step(self) -> int:
        return self.world_size * self.views_per_rank

    @property
    def units_per_epoch(self) -> int:
        return self.num_views // self.views_per_step

    def with_batch(
        self, world_size: Optional[int] = None, views_per_rank: Optional[int] = None, order: Optional[Order] = None
    ) -> SchedulePlan:
        """The same graph and regions scheduled for another world size, views per rank or order."""
        return replace(
            self,
            world_size=self.world_size if world_size is None else world_size,
            views_per_rank=self.views_per_rank if views_per_rank is None else views_per_rank,
            order=self.order if order is None else order,
        )

    def epoch_units(self, epoch: int) -> np.ndarray:
        """(units_per_epoch, views_per_step) view indices of every unit of an epoch, in step order."""
        if epoch not in self._epoch_cache:
            units = self.ordered_units(np.random.default_rng([self.seed, epoch]))
            self._epoch_cache = {key: value for key, value in self._epoch_cache.items() if key == epoch - 1}
            self._epoch_cache[epoch] = units
        return self._epoch_cache[epoch]

    def ordered_units(self, rng: np.random.Generator) -> np.ndarray:
        """(units_per_epoch, views_per_step) view indices of one epoch's units in step order, as ``order`` deals them
        with ``rng``, the epoch's own generator."""
        return self._rlg_units(rng) if self.order == "rlg" else self._random_units(rng)

    def _random_units(self, rng: np.random.Generator) -> np.ndarray:
        size = self.views_per_step
        return rng.permutation(self.num_views)[: self.units_per_epoch * size].reshape(-1, size)

    def _rlg_units(self, rng: np.random.Generator) -> np.ndarray:
        size = self.views_per_step
        groups, leftovers = [], []
        for region in self.rotation:
            views = rng.permutation(np.flatnonzero(self.partition.labels == region))
            full_units = len(views) // size
            groups.append(views[: full_units * size].reshape(-1, size))
            leftovers.append(views[full_units * size :])
        pool = np.concatenate(leftovers)
        pool = np.delete(pool, rng.choice(len(pool), len(pool) % size, replace=False))
        groups.append(pool.reshape(-1, size))
        sequence = interleave_evenly([len(group) for group in groups])
        return np.stack([groups[group][index] for group, index in sequence])

    def _unit(self, step: int) -> np.ndarray:
        if step < 0:
            raise ValueError(f"step must be non-negative, got {step}")
        epoch, unit = divmod(step, self.units_per_epoch)
        return self.epoch_units(epoch)[unit]

    def unit_views(self, step: int) -> list[list[int]]:
        """View indices of the unit of a step, one list per rank."""
        return self._unit(step).reshape(self.world_size, self.views_per_rank).tolist()

    def views_for(self, step: int, rank: int) -> list[int]:
        """View indices rank renders at step."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} outside world of size {self.world_size}")
        return self.unit_views(step)[rank]

    def epoch_conflicts(self, epoch: int = 0) -> UnitConflicts:
        """Predicted conflicts of every unit of an epoch with its successor (the last one's is in the next epoch)."""
        units = np.concatenate([self.epoch_units(epoch), self.epoch_units(epoch + 1)[:1]])
        total, peak = consecutive_conflicts(self.graph.weights, units)
        return UnitConflicts(total, peak, self.conflict_threshold)

    def conflicts(self, epochs: int = SUMMARY_EPOCHS) -> UnitConflicts:
        """Predicted conflicts of every step of the first ``epochs`` epochs."""
        per_epoch = [self.epoch_conflicts(epoch) for epoch in range(epochs)]
        return UnitConflicts(
            np.concatenate([c.total for c in per_epoch]),
            np.concatenate([c.peak for c in per_epoch]),
            self.conflict_threshold,
        )

    def summary(self) -> dict:
        """Plan-level statistics over the first epochs: partition quality, predicted conflicts vs a random order."""
        planned = self.conflicts()
        shuffled = self.with_batch(order="random").conflicts()
        return {
            "views": self.num_views,
            "rlg_source": self.graph.source,
            "rlg_edges": self.graph.weights.nnz // 2,
            "isolated_views": len(self.graph.isolated_views()),
            "regions": self.partition.region_sizes().tolist(),
            "intra_region_weight_fraction": self.partition.intra_fraction,
            "world_size": self.world_size,
            "views_per_rank": self.views_per_rank,
            "order": self.order,
            "units_per_epoch": self.units_per_epoch,
            "dropped_views_per_epoch": self.num_views % self.views_per_step,
            "statistics_epochs": SUMMARY_EPOCHS,
            "mean_conflict_sum": float(planned.total.mean()),
            "mean_conflict_max": float(planned.peak.mean()),
            "random_mean_conflict_sum": float(shuffled.total.mean()),
            "random_mean_conflict_max": float(shuffled.peak.mean()),
            "conflict_threshold": self.conflict_threshold,
            "admissible_window_fraction": planned.admissible_fraction,
            "random_admissible_window_fraction": shuffled.admissible_fraction,
            **self.settings,
        }

    def check_views(self, names: Sequence[str]) -> None:
        """Raise if the plan was made for other training views than names (same names, same order)."""
        names = list(names)
        if names == self.view_names:
            return
        if len(names) != self.num_views:
            raise ValueError(f"plan is for {self.num_views} training views, the dataset has {len(names)}")
        first = next(i for i, (a, b) in enumerate(zip(names, self.view_names)) if a != b)
        raise ValueError(
            f"plan does not match the dataset: training view {first} is {names[first]!r} in the dataset "
            f"but {self.view_names[first]!r} in the plan"
        )

    def save(self, path: Path) -> None:
        """Write the plan as one npz file, usable without pycolmap or the reconstruction."""
        weights = self.graph.weights
        meta = {
            "format": _PLAN_FORMAT,
            "rlg_source": self.graph.source,
            "world_size": self.world_size,
            "views_per_rank": self.views_per_rank,
            "order": self.order,
            "seed": self.seed,
            "conflict_threshold": self.conflict_threshold,
            "settings": self.settings,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as file:
            np.savez_compressed(
                file,
                meta=np.array(json.dumps(meta)),
                view_names=np.array(self.view_names, dtype=str),
                labels=self.partition.labels,
                num_regions=np.array(self.partition.num_regions),
                weights_indptr=weights.indptr,
                weights_indices=weights.indices,
                weights_data=weights.data,
                positions=self.positions if self.positions is not None else np.zeros((0, 3)),
            )

    @classmethod
    def load(cls, path: Path) -> SchedulePlan:
        if not path.is_file():
            raise FileNotFoundError(f"no plan file at {path}")
        with np.load(path, allow_pickle=False) as stored:
            meta = json.loads(str(stored["meta"]))
            if meta.get("format") != _PLAN_FORMAT:
                raise ValueError(f"{path} is a plan of format {meta.get('format')}, expected {_PLAN_FORMAT}")
            names = stored["view_names"].tolist()
            weights = sp.csr_matrix(
                (stored["weights_data"], stored["weights_indices"], stored["weights_indptr"]),
                shape=(len(names), len(names)),
            )
            labels = stored["labels"]
            positions = stored["positions"] if len(stored["positions"]) else None
            num_regions = int(stored["num_regions"])
        return cls(
            view_names=names,
            graph=RelativeLocalityGraph(weights, meta["rlg_source"]),
            partition=Partition(labels, region_coupling(weights, labels, num_regions)),
            world_size=meta["world_size"],
            views_per_rank=meta["views_per_rank"],
            order=meta["order"],
            seed=meta["seed"],
            conflict_threshold=meta["conflict_threshold"],
            positions=positions,
            settings=meta["settings"],
        )


def build_plan(
    view_paths: Sequence[Path | str],
    cameras: ViewCameras,
    *,
    recon_dir: Optional[Path] = None,
    seed_points: Optional[np.ndarray] = None,
    world_size: int = 1,
    views_per_rank: int = 1,
    num_regions: int = DEFAULT_NUM_REGIONS,
    order: Order = "rlg",
    seed: int = 0,
    top_k: int = DEFAULT_TOP_K,
    max_track_length: int = DEFAULT_MAX_TRACK_LENGTH,
    conflict_threshold: float = DEFAULT_CONFLICT_THRESHOLD,
) -> SchedulePlan:
    """Run the whole AOT step: observations -> RLG -> regions -> ordered units (timed, logged)."""
    check_views_per_step(world_size, views_per_rank, len(view_paths))  # before spending time on the graph
    start = time.perf_counter()
    observations = collect_observations(view_paths, cameras, recon_dir, seed_points, seed)
    observed = time.perf_counter()
    graph = build_rlg(observations, max_track_length, top_k)
    graphed = time.perf_counter()
    partition = partition_views(graph, num_regions, seed)
    partitioned = time.perf_counter()
    plan = SchedulePlan(
        view_names=view_names(view_paths),
        graph=graph,
        partition=partition,
        world_size=world_size,
        views_per_rank=views_per_rank,
        order=order,
        seed=seed,
        conflict_threshold=conflict_threshold,
        positions=cameras.positions,
    )
    plan.epoch_units(0)
    ordered = time.perf_counter()
    plan.settings = {
        "top_k": top_k,
        "max_track_length": max_track_length,
        "aot_seconds": {
            "observations": observed - start,
            "graph": graphed - observed,
            "partition": partitioned - graphed,
            "order": ordered - partitioned,
            "total": ordered - start,
        },
    }
    logger.info(
        "AOT schedule of %d views (%s) took %.2f s: observations %.2f, graph %.2f, partition %.2f, order %.2f",
        len(view_paths),
        graph.source,
        ordered - start,
        observed - start,
        graphed - observed,
        partitioned - graphed,
        ordered - partitioned,
    )
    return plan
