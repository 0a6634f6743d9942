"""How much of a unit's exchange predicted read scopes could leave in flight on a capture, per bucket count.

Predicted read scopes (``--pipeline.odin.read-scopes predicted``) let unit t+1 start before unit t's exchange has
arrived only for the buckets no view of unit t+1 can see, judged by the view frusta against per-bucket bounds. Whether
a capture leaves any such bucket is geometry: a frustum holds everything in front of the camera within the field of
view, occluded or not, so a capture whose views each see a small part of the scene through occlusion (a courtyard
photographed from inside) may still have every view's frustum meet every bucket. This answers it before any training,
on the CPU in seconds: the capture's initial Gaussians (as training starts, Morton-ordered), the AOT plan for
``--world-size`` ranks, and the runtime's own predictor (``SplatReadPredictor``) with the initial learning rates.
Later in training the Gaussians are smaller and more numerous; the bounds then tighten.

Usage: ``odin-bench prediction-reach --data data/castle_p30 --world-size 2 --buckets 8 32 128``.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

import numpy as np
import tyro

from odin_ns.in_process import in_process_trainer
from odin_ns.comm.collectives import RowBuckets
from odin_ns.data.datamanager import plan_training_views
from odin_ns.model import NEAR_PLANE
from odin_ns.read_prediction import SplatReadPredictor, pinhole_views
from odin_ns.runtime.config import RuntimeConfig


@dataclass
class PredictionReachCommand:
    """Per bucket count: how many buckets a view's frustum meets, and how many windows could leave buckets in flight."""

    data: Path
    """Capture (COLMAP or transforms.json)."""
    world_size: int = 2
    """Ranks the plan deals the views to."""
    buckets: Tuple[int, ...] = (8, 32, 128)
    """Bucket counts to compare, buckets of any size (finer where a bucket would exceed the default
    ``--pipeline.odin.bucket-mb``). Each is printed with its bucket size: below 4 MB, the ``--pipeline.odin.bucket-mb``
    that cuts a training run's exchange so."""
    units: int = 200
    """Units of the plan to examine (from the first)."""

    def main(self) -> None:
        if self.world_size < 2:
            raise SystemExit(f"error: --world-size must be at least 2 (one rank has no exchange), got {self.world_size}")
        if not self.data.exists():
            raise SystemExit(f"error: data directory does not exist: {self.data}")
        for row in reach(self.data, self.world_size, self.buckets, self.units):
            print(
                f"{row['buckets']:4d} buckets of {row['bucket_mb']:.3g} MB: a view's frustum meets "
                f"{row['view_meets']:.0%} of them (median); {row['windows_in_flight']} of {row['units']} windows "
                f"could leave buckets in flight, {row['in_flight']:.0%} of their update buckets on average"
            )


def reach(data: Path, world_size: int, buckets: Tuple[int, ...], units: int) -> list[dict]:
    """One row per bucket count of ``buckets`` (see ``PredictionReachCommand``)."""
    with tempfile.TemporaryDirectory() as scratch:
        trainer = in_process_trainer(data, Path(scratch), "cpu")
    datamanager, model = trainer.pipeline.datamanager, trainer.pipeline.model
    datamanager.cached_train  # sets train_cameras
    config = datamanager.config
    plan = plan_training_views(
        datamanager.train_dataparser_outputs, config.dataparser, world_size=world_size, views_per_rank=1,
        num_regions=config.num_regions, order=config.order, seed=config.train_cameras_sampling_seed,
        top_k=config.top_k, max_track_length=config.max_track_length,
    )
    means, scales = (trainer.optimizers.optimizers[name].param_groups[0] for name in ("means", "scales"))
    params = model.gauss_params
    tensors = list(params.values())
    row_bytes = sum(tensor[:1].numel() * tensor.element_size() for tensor in tensors)
    results = []
    for count in buckets:
        cut = RowBuckets.for_tensors(tensors, RuntimeConfig().bucket_bytes, min_buckets=count)
        predictor = SplatReadPredictor(
            pinhole_views(datamanager.train_cameras), plan.unit_views, 0, lambda: means["lr"], lambda: scales["lr"],
            tuple(means["betas"]), NEAR_PLANE, largest_downscale=2**model.config.num_downscales,
        )
        predictor.rebind(params, cut)
        view_meets = [predictor.read_buckets(unit, every_rank=False).mean() for unit in range(min(units, 50))]
        in_flight = []
        for unit in range(units):
            updates = predictor.read_buckets(unit, every_rank=True)
            left = updates & ~predictor.read_buckets(unit + 1, every_rank=True)
            if left.any():
                in_flight.append(left.sum() / updates.sum())
        results.append({
            "buckets": len(cut.ranges), "bucket_mb": cut.rows_per_bucket * row_bytes / 2**20,
            "view_meets": statistics.median(view_meets),
            "units": units, "windows_in_flight": len(in_flight), "in_flight": float(np.mean(in_flight)) if in_flight else 0.0,
        })
    return results


if __name__ == "__main__":
    tyro.cli(PredictionReachCommand).main()
