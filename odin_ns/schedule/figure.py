"""Picture of a plan: the RLG over the camera positions, regions in colour, and the order of the first units.

Drawn on a bare matplotlib ``Figure`` (rendered by Agg on save) rather than pyplot, so importing this module
never touches the process-wide backend of a training run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from odin_ns.schedule.plan import SchedulePlan


def best_2d_projection(positions: np.ndarray) -> np.ndarray:
    """Camera positions on their two principal axes: a top-down view for orbits and street-level captures."""
    centred = positions - positions.mean(axis=0)
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    return centred @ axes[:2].T


def draw_plan(plan: SchedulePlan, path: Path, num_units: int = 12) -> None:
    """Write a PNG of the plan; needs the camera positions the plan was built with."""
    if plan.positions is None:
        raise ValueError("plan has no camera positions to draw (it was built without cameras)")
    xy = best_2d_projection(plan.positions)
    weights = plan.graph.weights.tocoo()
    upper = weights.row < weights.col
    rows, cols, strength = weights.row[upper], weights.col[upper], weights.data[upper]
    relative = strength / strength.max() if len(strength) else strength

    figure = Figure(figsize=(9, 9), dpi=110)
    axis = figure.subplots()
    edges = LineCollection(
        np.stack([xy[rows], xy[cols]], axis=1),
        linewidths=0.3 + 3.0 * relative,
        colors=[(0.3, 0.3, 0.3, 0.1 + 0.6 * r) for r in relative],
        zorder=1,
    )
    axis.add_collection(edges)
    colours = matplotlib.colormaps["tab10" if plan.partition.num_regions <= 10 else "tab20"]
    for region in range(plan.partition.num_regions):
        members = plan.partition.labels == region
        axis.scatter(
            xy[members, 0], xy[members, 1], s=40, color=colours(region % colours.N), zorder=2,
            edgecolors="black", linewidths=0.4, label=f"region {region} ({members.sum()} views)",
        )

    shown = min(num_units, plan.units_per_epoch)
    centres = np.stack([xy[plan.epoch_units(0)[unit]].mean(axis=0) for unit in range(shown)])
    for unit in range(shown - 1):
        axis.annotate(
            "", xy=centres[unit + 1], xytext=centres[unit],
            arrowprops={"arrowstyle": "->", "color": "crimson", "lw": 1.2, "alpha": 0.8}, zorder=3,
        )
    for unit, centre in enumerate(centres):
        axis.annotate(
            str(unit), centre, fontsize=9, fontweight="bold", color="white", ha="center", va="center", zorder=4,
            bbox={"boxstyle": "circle,pad=0.25", "facecolor": "crimson", "edgecolor": "none"},
        )

    summary = plan.summary()
    axis.set_title(
        f"RLG ({summary['rlg_source']}, {summary['views']} views, {summary['rlg_edges']} edges), "
        f"{plan.partition.num_regions} regions: {summary['intra_region_weight_fraction']:.0%} of weight inside\n"
        f"first {shown} units (W={plan.world_size}, b={plan.views_per_rank}) numbered in order; mean consecutive "
        f"conflict {summary['mean_conflict_sum']:.3f} (random {summary['random_mean_conflict_sum']:.3f})",
        fontsize=10,
    )
    axis.set_aspect("equal")
    axis.autoscale_view()
    axis.set_xticks([])
    axis.set_yticks([])
    axis.legend(loc="best", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, bbox_inches="tight")
