"""The alternating-cost workload: an uneven schedule that overlap can hide and sync cannot.

Every rank alternates between views of the costlier half and of the cheaper half, neighbouring ranks out of phase
(rank r renders costly views at step t when t + r is even), and a unit's views come from regions the previous
unit's did not, where the pools allow. Under sync every step lasts as long as a costly view; overlapping units can
hide the cheap rank's wait, which is what this order is for measuring. A view's render cost is estimated as the
fraction of the seed points inside its frustum, so the capture needs seed points (a COLMAP model).

Training gets it through ``python -m odin_bench.train --alternating-cost`` (``odin-bench bench --alternating-cost``
launches that): the datamanager's plan is then an ``AlternatingCostPlan`` of the plan it would have built.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Optional

import numpy as np
from nerfstudio.data.dataparsers.base_dataparser import DataParserConfig, DataparserOutputs

from odin_ns.data.datamanager import plan_training_views
from odin_ns.data.dataparser import DatasetError
from odin_ns.schedule.plan import ORDERS, SUMMARY_EPOCHS, SchedulePlan
from odin_ns.schedule.tracks import ViewCameras, projected_incidence, seeded_subset

ALTERNATING_COST = "alternating-cost"
COST_SAMPLE_POINTS = 20_000
"""Seed points projected to estimate render costs: relative costs need far fewer than co-visibility does."""


def render_costs(cameras: ViewCameras, points: np.ndarray, seed: int = 0) -> np.ndarray:
    """Estimated render cost of each view: the fraction of the seed points inside its frustum (occluded ones too,
    as the rasterizer processes them), from a seeded sample of at most COST_SAMPLE_POINTS points."""
    if len(points) == 0:
        raise ValueError("render costs need seed points")
    points = seeded_subset(points, COST_SAMPLE_POINTS, seed)
    return projected_incidence(cameras, points).getnnz(axis=1) / len(points)


def rank_imbalance(units: np.ndarray, costs: np.ndarray, world_size: int) -> float:
    """Sum over units of the slowest rank's cost over the sum of the mean rank's: the step time lost to waiting for
    the slowest rank, relative to a perfectly balanced schedule (1.0)."""
    per_rank = costs[units].reshape(len(units), world_size, -1).sum(axis=2)
    return float(per_rank.max(axis=1).sum() / per_rank.mean(axis=1).sum())


@dataclass(eq=False)
class AlternatingCostPlan(SchedulePlan):
    """A plan that also deals the alternating-cost order (see the module docstring)."""

    orders: ClassVar[tuple[str, ...]] = (*ORDERS, ALTERNATING_COST)
    view_costs: Optional[np.ndarray] = None
    """(views,) estimated render cost of each view (``render_costs``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.view_costs is None or self.view_costs.shape != (self.num_views,):
            raise ValueError(f"the {ALTERNATING_COST} order needs each of the {self.num_views} views' render cost")

    @classmethod
    def of(cls, plan: SchedulePlan, view_costs: np.ndarray) -> AlternatingCostPlan:
        """``plan``'s graph, regions and batch, dealt in the alternating-cost order."""
        kept = {field.name: getattr(plan, field.name) for field in fields(plan) if field.init}
        return cls(**{**kept, "order": ALTERNATING_COST, "view_costs": view_costs})

    def ordered_units(self, rng: np.random.Generator) -> np.ndarray:
        if self.order != ALTERNATING_COST:
            return super().ordered_units(rng)
        shuffled = rng.permutation(self.num_views)
        by_cost = shuffled[np.argsort(-self.view_costs[shuffled], kind="stable")]
        half = len(by_cost) // 2
        pools = [list(rng.permutation(by_cost[:half])), list(rng.permutation(by_cost[half:]))]  # costly, cheap
        labels = self.partition.labels
        units, previous_regions = [], set()
        for unit in range(self.units_per_epoch):
            views, regions = [], set()
            for rank in range(self.world_size):
                wanted = (unit + rank) % 2  # 0: costly, 1: cheap
                for _ in range(self.views_per_rank):
                    pool = pools[wanted] if pools[wanted] else pools[1 - wanted]
                    pick = next((i for i, view in enumerate(pool) if labels[view] not in previous_regions), 0)
                    views.append(pool.pop(pick))
                    regions.add(labels[views[-1]])
            units.append(views)
            previous_regions = regions
        return np.array(units, dtype=np.int64).reshape(-1, self.views_per_step)

    def summary(self) -> dict:
        """The plan statistics, with the predicted ``rank_imbalance`` of this order and of a random one."""
        return {**super().summary(), "rank_imbalance": self._rank_imbalance(self),
                "random_rank_imbalance": self._rank_imbalance(self.with_batch(order="random"))}

    def _rank_imbalance(self, plan: SchedulePlan) -> float:
        units = np.concatenate([plan.epoch_units(epoch) for epoch in range(SUMMARY_EPOCHS)])
        return rank_imbalance(units, self.view_costs, self.world_size)


def alternating_cost_training_views(
    outputs: DataparserOutputs, dataparser_config: DataParserConfig, **plan_options
) -> AlternatingCostPlan:
    """What ``plan_training_views`` builds, dealt in the alternating-cost order, its view costs from the seed points
    the dataparser read. It stands in for the datamanager's ``plan_training_views`` (``odin_bench.train``), whose
    original this module bound at import."""
    plan = plan_training_views(outputs, dataparser_config, **plan_options)
    points = outputs.metadata.get("points3D_xyz")
    if points is None or len(points) == 0:
        raise DatasetError(f"the {ALTERNATING_COST} workload estimates render costs from seed points, and "
                           f"{dataparser_config.data} has none")
    cameras = ViewCameras.from_nerfstudio(outputs.cameras)
    return AlternatingCostPlan.of(plan, render_costs(cameras, np.asarray(points), plan.seed))
