"""AOT schedule time on a synthetic 50,000-view reconstruction (the paper reports < 10 s for 50k images).

The synthetic capture is a serpentine sweep (rows of views, like an aerial or street survey). Each 3D point is seen
by a run of consecutive views of one row, and 30% of points also by the facing views of the neighbouring row, so
the graph has the 2D locality of real large captures. Track lengths are 1 + Geometric(0.2): at least 2, mean 6,
90th percentile ~12, 99th ~22 -- close to cup77's (mean 6.2, 90th 13, 99th 27). About 600 observations per view
(cup77: 751) gives ~30 million observations in all.

Run: python -m odin_bench.aot_50k [--num-views 50000] [--world-size 8]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields

import numpy as np

from odin_ns.schedule.partition import partition_views
from odin_ns.schedule.plan import SchedulePlan
from odin_ns.schedule.rlg import build_rlg
from odin_ns.schedule.tracks import SFM_TRACKS, Observations, incidence_matrix


def synthetic_observations(
    num_views: int, views_per_row: int, observations_per_view: int, cross_row_fraction: float, seed: int
) -> Observations:
    """View x point incidence of a serpentine sweep with geometric track lengths (see module docstring)."""
    rng = np.random.default_rng(seed)
    rows = -(-num_views // views_per_row)
    num_points = num_views * observations_per_view // 6
    track_length = 1 + rng.geometric(0.2, num_points)
    crosses = (rng.random(num_points) < cross_row_fraction) & (rows > 1)
    in_anchor_row = np.where(crosses, (track_length + 1) // 2, track_length)
    anchor_row = rng.integers(0, rows, num_points)
    neighbour_row = np.where(anchor_row + 1 < rows, anchor_row + 1, anchor_row - 1)
    first_column = rng.integers(0, views_per_row, num_points)

    def run_of_views(point_rows: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = np.clip(first_column, 0, views_per_row - lengths)
        points = np.repeat(np.arange(num_points), lengths)
        offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        column = np.repeat(start, lengths) + offsets
        row = np.repeat(point_rows, lengths)
        serpentine_column = np.where(row % 2 == 0, column, views_per_row - 1 - column)
        views = row * views_per_row + serpentine_column
        valid = views < num_views
        return views[valid], points[valid]

    anchor_views, anchor_points = run_of_views(anchor_row, in_anchor_row)
    cross_views, cross_points = run_of_views(neighbour_row, track_length - in_anchor_row)
    return Observations(
        incidence_matrix(
            np.concatenate([anchor_views, cross_views]), np.concatenate([anchor_points, cross_points]), num_views
        ),
        SFM_TRACKS,
    )


@dataclass
class AotBenchmark:
    """Time the AOT schedule (graph, partition, order) on a synthetic large reconstruction."""

    num_views: int = 50_000
    views_per_row: int = 500
    observations_per_view: int = 600
    cross_row_fraction: float = 0.3
    world_size: int = 8
    views_per_rank: int = 1
    num_regions: int = 4
    seed: int = 0

    def main(self) -> None:
        start = time.perf_counter()
        observations = synthetic_observations(
            self.num_views, self.views_per_row, self.observations_per_view, self.cross_row_fraction, self.seed
        )
        generated = time.perf_counter()
        track_lengths = np.bincount(observations.incidence.indices, minlength=observations.incidence.shape[1])
        print(
            f"synthetic reconstruction: {self.num_views} views, {observations.incidence.shape[1]} points, "
            f"{observations.incidence.nnz} observations, track length mean {track_lengths.mean():.1f} "
            f"p90 {np.percentile(track_lengths, 90):.0f} p99 {np.percentile(track_lengths, 99):.0f} "
            f"(generated in {generated - start:.1f} s, not part of the AOT time)"
        )

        graph = build_rlg(observations)
        graphed = time.perf_counter()
        partition = partition_views(graph, self.num_regions, self.seed)
        partitioned = time.perf_counter()
        plan = SchedulePlan(
            view_names=[f"{view:05d}.jpg" for view in range(self.num_views)],
            graph=graph,
            partition=partition,
            world_size=self.world_size,
            views_per_rank=self.views_per_rank,
            seed=self.seed,
        )
        plan.epoch_units(0)
        ordered = time.perf_counter()
        conflicts = plan.epoch_conflicts(0)
        random_conflicts = plan.with_batch(order="random").epoch_conflicts(0)

        aot = ordered - generated
        print(f"AOT total {aot:.2f} s (paper: < 10 s for 50k images)")
        print(f"  graph     {graphed - generated:6.2f} s  ({graph.weights.nnz // 2} edges)")
        print(f"  partition {partitioned - graphed:6.2f} s  ({partition.intra_fraction:.1%} of weight inside regions)")
        print(f"  order     {ordered - partitioned:6.2f} s  ({plan.units_per_epoch} units of {plan.views_per_step})")
        print(
            f"mean consecutive conflict (sum of Jaccard) {conflicts.total.mean():.4f} vs random "
            f"{random_conflicts.total.mean():.4f}; admissible windows {conflicts.admissible_fraction:.1%} vs random "
            f"{random_conflicts.admissible_fraction:.1%}"
        )


def main() -> None:
    """Command line: every field of AotBenchmark as --field-name (plain argparse: runs where tyro is absent)."""
    parser = argparse.ArgumentParser(description=AotBenchmark.__doc__)
    for option in fields(AotBenchmark):
        parser.add_argument(f"--{option.name.replace('_', '-')}", type=type(option.default), default=option.default)
    AotBenchmark(**vars(parser.parse_args())).main()


if __name__ == "__main__":
    main()
