"""Which buckets of Gaussians a pinhole view can render, from per-bucket bounds, conservatively.

gsplat renders a Gaussian in a camera (radius > 0) only if its centre is in front of the near plane and the square
of half-side ``radius`` around its projected centre meets the image, where (gsplat's projection)

    radius = ceil(3 sqrt(b + sqrt(max(b^2 - det, 0.01)))) <= 3 sqrt(lambda_max(J S J^T)) + 3 sqrt(0.3 + 0.1) + 1,

with S the 3D covariance, J the projection's Jacobian at the centre (its normalised coordinates clamped to the
field of view plus 30%, ``lim``) and 0.3 the 2D blur. With sigma the largest scale, sqrt(lambda_max(J S J^T)) <=
sigma f_max sqrt(1 + lim_x^2 + lim_y^2) / z. So, in normalised image coordinates, the square's half-side is at most
(3 sigma f_max sqrt(1 + lim^2) + PIXEL_MARGIN z) / (f z): a sphere of radius 3 sigma sqrt(1 + lim^2) f_max / f_min
about the centre that meets the frustum widened by PIXEL_MARGIN pixels on every side holds every rendered Gaussian.
A bucket's bounds are the box of its rows' 3-sigma spheres and the largest 3 sigma; the test widens the box by what
the radius factor (and growth since the bounds were taken) can add to the largest sphere, then tests it against the
five planes (the p-vertex test: outside if its farthest corner along a plane's normal is behind it). The box of the
spheres, not of the centres plus the largest radius, keeps a bucket with one large Gaussian from reaching far on
every side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from odin_ns.comm.collectives import RowBuckets
from odin_ns.sync.predicted import per_bucket

PIXEL_MARGIN = 3 * math.sqrt(0.4) + 1
"""Pixels the rendered square may extend past the geometric 3-sigma footprint: gsplat's 0.3 blur, the 0.01 floor
under its eigenvalue's square root, and the ceil."""
BOUND_COLUMNS = 7
"""Per bucket: the box of the rows' 3-sigma spheres (min x, y, z, max x, y, z) and the largest 3-sigma radius."""


def gaussian_bucket_bounds(means: torch.Tensor, log_scales: torch.Tensor, buckets: RowBuckets) -> torch.Tensor:
    """float32 [buckets, 7] on the device: each bucket's box of 3-sigma spheres and largest 3 sigma (splatfacto
    keeps log scales)."""
    radius = 3.0 * torch.exp(log_scales.detach().amax(dim=1, keepdim=True))
    centres = means.detach()
    return torch.cat(
        [
            per_bucket(centres - radius, buckets, "min"),
            per_bucket(centres + radius, buckets, "max"),
            per_bucket(radius, buckets, "max"),
        ],
        dim=1,
    ).float()


@dataclass(frozen=True)
class PinholeView:
    """A training view as the host knows it: world-to-camera rotation and translation (+z forward, OpenCV axes, as
    gsplat's ``viewmats``), intrinsics at full resolution and the image size."""

    rotation: np.ndarray
    translation: np.ndarray
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    def planes(self, near: float, pixel_margin: float) -> tuple[np.ndarray, np.ndarray, float]:
        """(unit normals [5, 3], offsets [5], radius factor) of the near and four side planes in world coordinates:
        a point p is on the visible side of a plane when normal . p + offset >= 0; a Gaussian's 3 sigma times the
        radius factor is the sphere the module docstring bounds its footprint by."""
        left = (self.cx + pixel_margin) / self.fx
        right = (self.width - self.cx + pixel_margin) / self.fx
        top = (self.cy + pixel_margin) / self.fy
        bottom = (self.height - self.cy + pixel_margin) / self.fy
        camera_normals = np.array(
            [[0.0, 0.0, 1.0], [1.0, 0.0, left], [-1.0, 0.0, right], [0.0, 1.0, top], [0.0, -1.0, bottom]]
        )
        camera_normals /= np.linalg.norm(camera_normals, axis=1, keepdims=True)
        camera_offsets = np.array([-near * camera_normals[0, 2], 0.0, 0.0, 0.0, 0.0])
        # n . (R p + t) + d = (R^T n) . p + (n . t + d)
        normals = camera_normals @ self.rotation
        offsets = camera_normals @ self.translation + camera_offsets
        lim_x = max(self.cx, self.width - self.cx) / self.fx + 0.15 * self.width / self.fx
        lim_y = max(self.cy, self.height - self.cy) / self.fy + 0.15 * self.height / self.fy
        radius_factor = math.sqrt(1 + lim_x**2 + lim_y**2) * max(self.fx, self.fy) / min(self.fx, self.fy)
        return normals, offsets, radius_factor


def buckets_in_view(
    bounds: np.ndarray,
    view: PinholeView,
    near: float,
    position_margin: float = 0.0,
    radius_scale: float = 1.0,
    pixel_margin: float = PIXEL_MARGIN,
) -> np.ndarray:
    """bool [buckets]: buckets that may hold a Gaussian ``view`` renders, from ``bounds`` [buckets, 7] taken earlier:
    centres may since have moved by ``position_margin`` per axis and 3-sigma radii grown by ``radius_scale``;
    ``pixel_margin`` in full-resolution pixels (scale it by the largest downscale factor renders use)."""
    normals, offsets, radius_factor = view.planes(near, pixel_margin)
    widening = position_margin + bounds[:, None, 6:7] * (radius_scale * radius_factor - 1.0)  # [buckets, 1, 1]
    lo = bounds[:, None, 0:3] - widening
    hi = bounds[:, None, 3:6] + widening
    farthest = np.where(normals[None] >= 0, hi, lo)  # [buckets, planes, 3]
    distance = (farthest * normals[None]).sum(-1) + offsets[None]
    return (distance >= 0).all(axis=1)
