"""Predicted read scopes of splatfacto's units: the AOT plan's views against per-bucket bounds of the Gaussians.

The runtime (``read_scopes="predicted"``) asks, before unit t+1 runs, which buckets this rank's views of unit t+1
can read and which buckets unit t's views on every rank updated. The plan says which views those are; their poses
are the training cameras' (fixed: the camera optimizer must be off); the Gaussians' per-bucket bounds
(``odin_ns.sync.frustum``) come to the host asynchronously after each publication and are widened by what Adam can
have moved the centres and grown the scales since, steps of at most ``adam_step_factor`` times the learning rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from nerfstudio.cameras.cameras import Cameras

from odin_ns.comm.collectives import RowBuckets
from odin_ns.rendering import world_to_camera
from odin_ns.sync.frustum import PIXEL_MARGIN, PinholeView, buckets_in_view, gaussian_bucket_bounds
from odin_ns.sync.predicted import BucketBounds, adam_step_factor

LearningRate = Callable[[], float]

STEPS_OF_SLACK = 2
"""Steps the parameters a prediction is for may be from the bounds' snapshot beyond the units published since it:
the unit in flight's publication (part of it lands before the next unit runs) and, for an update scope, the
previous unit's rows published after it ran."""


def pinhole_views(cameras: Cameras) -> list[PinholeView]:
    """Each training camera as the host-side ``PinholeView`` gsplat projects with (full resolution), in double
    precision."""
    world_to_cameras = world_to_camera(cameras.camera_to_worlds.detach().cpu().double()).numpy()
    inverse_rotations, translations = world_to_cameras[:, :3, :3], world_to_cameras[:, :3, 3]
    intrinsics = [getattr(cameras, name)[:, 0].double().tolist() for name in ("fx", "fy", "cx", "cy")]
    sizes = (cameras.width[:, 0].tolist(), cameras.height[:, 0].tolist())
    return [
        PinholeView(rotation, translation, fx, fy, cx, cy, int(width), int(height))
        for rotation, translation, fx, fy, cx, cy, width, height in zip(
            inverse_rotations, translations, *intrinsics, *sizes
        )
    ]


class SplatReadPredictor:
    """``odin_ns.sync.predicted.ReadPredictor`` of splatfacto's Gaussians under an AOT plan."""

    def __init__(
        self,
        views: Sequence[PinholeView],
        unit_views: Callable[[int], Sequence[Sequence[int]]],
        rank: int,
        means_lr: LearningRate,
        scales_lr: LearningRate,
        betas: tuple[float, float],
        near_plane: float,
        largest_downscale: int,
    ):
        self.views = list(views)
        self.unit_views = unit_views
        """Unit id -> the training views of each rank."""
        self.rank = rank
        self._lrs = (means_lr, scales_lr)
        self._step_factor = adam_step_factor(*betas)
        self._near = near_plane
        self._pixel_margin = PIXEL_MARGIN * largest_downscale
        self._bounds: BucketBounds | None = None
        self._largest_lrs = (0.0, 0.0)
        """The largest learning rates seen since the Gaussians were bound (schedules move them; a bound taken with
        the largest holds for every step since)."""
        self._seen_by_view: dict[int, np.ndarray] = {}
        self._seen_for: tuple | None = None
        """Each view's buckets under the bounds (the array itself), age and learning rates of ``_seen_for``: a unit's
        views are asked for up to three times between two publications (as the next unit, as this unit, as the
        previous unit), and each time the frustum test would repeat the same arithmetic on the host."""

    def rebind(self, params: Mapping[str, torch.Tensor], buckets: RowBuckets) -> None:
        self._bounds = BucketBounds(lambda p: gaussian_bucket_bounds(p["means"], p["scales"], buckets))
        self._bounds.refresh(params, wait=True)
        self._largest_lrs = self._current_lrs()

    def published(self, params: Mapping[str, torch.Tensor], refresh: bool = True) -> None:
        self._largest_lrs = tuple(map(max, self._largest_lrs, self._current_lrs()))
        self._bounds.tick()
        if refresh:
            self._bounds.refresh(params)

    def read_buckets(self, unit_id: int, every_rank: bool) -> np.ndarray:
        bounds, age = self._bounds.latest()
        seen_for = self._seen_for
        if seen_for is None or seen_for[0] is not bounds or seen_for[1:] != (age, self._largest_lrs):
            self._seen_by_view, self._seen_for = {}, (bounds, age, self._largest_lrs)  # holds the bounds it is for
        per_rank = self.unit_views(unit_id)
        views = [view for rank_views in per_rank for view in rank_views] if every_rank else per_rank[self.rank]
        hit = np.zeros(len(bounds), dtype=bool)
        for view in views:
            if view not in self._seen_by_view:
                self._seen_by_view[view] = self._buckets_in_view(bounds, age, view)
            hit |= self._seen_by_view[view]
        return hit

    def _buckets_in_view(self, bounds: np.ndarray, age: int, view: int) -> np.ndarray:
        steps = age + STEPS_OF_SLACK
        means_lr, scales_lr = self._largest_lrs
        position_margin = steps * means_lr * self._step_factor
        radius_scale = math.exp(steps * scales_lr * self._step_factor)
        return buckets_in_view(bounds, self.views[view], self._near, position_margin, radius_scale, self._pixel_margin)

    def _current_lrs(self) -> tuple[float, float]:
        return tuple(float(lr()) for lr in self._lrs)
