"""Predicted read scopes are conservative: every Gaussian gsplat's projection renders lies in a predicted bucket.

gsplat's own torch projection (``_fully_fused_projection``, what its CUDA kernel computes) is the judge, over
random scenes and cameras, near-plane and border cases, downscaled renders, and bounds taken before the Gaussians
moved and grew by as much as the margins allow.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gsplat.cuda._torch_impl import _fully_fused_projection, _quat_scale_to_covar_preci

from odin_ns.comm.collectives import RowBuckets
from odin_ns.strategy import morton_order
from odin_ns.sync.frustum import PIXEL_MARGIN, PinholeView, buckets_in_view, gaussian_bucket_bounds
from odin_ns.sync.predicted import BucketBounds, adam_step_factor

NUM_ROWS = 6000
ROWS_PER_BUCKET = 64


def random_scene(generator: torch.Generator) -> dict[str, torch.Tensor]:
    means = (torch.rand(NUM_ROWS, 3, generator=generator) - 0.5) * 8.0
    order = morton_order(means)
    return {
        "means": means[order],
        "scales": torch.empty(NUM_ROWS, 3).uniform_(-6.0, -2.0, generator=generator),
        "quats": torch.nn.functional.normalize(torch.randn(NUM_ROWS, 4, generator=generator), dim=1),
    }


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-to-camera [4, 4] (OpenCV axes: +z forward, +y down) looking from ``eye`` at ``target``."""
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    rotation = np.stack([right, down, forward])
    viewmat = np.eye(4)
    viewmat[:3, :3], viewmat[:3, 3] = rotation, -rotation @ eye
    return viewmat


def rendered_rows(scene, viewmat: np.ndarray, fx, fy, cx, cy, width, height, near) -> torch.Tensor:
    covars, _ = _quat_scale_to_covar_preci(scene["quats"], torch.exp(scene["scales"]), compute_covar=True,
                                           compute_preci=False, triu=False)
    Ks = torch.tensor([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], dtype=torch.float32)[None]
    radii = _fully_fused_projection(scene["means"], covars, torch.from_numpy(viewmat).float()[None], Ks, width,
                                    height, near_plane=near)[0]
    return radii[0] > 0


CAMERAS = [  # (eye, target, fx, fy, width, height): wide, narrow, inside the cloud, anisotropic focal lengths
    (np.array([0.0, -12.0, 1.0]), np.array([0.0, 0.0, 0.0]), 300.0, 300.0, 320, 240),
    (np.array([6.0, -6.0, 3.0]), np.array([1.0, 1.0, 0.0]), 900.0, 900.0, 320, 240),
    (np.array([0.5, 0.2, 0.1]), np.array([3.0, 2.0, 0.5]), 200.0, 260.0, 400, 300),
    (np.array([-9.0, 2.0, -1.0]), np.array([0.0, -1.0, 1.0]), 500.0, 350.0, 257, 199),
]


@pytest.mark.parametrize("camera", range(len(CAMERAS)))
@pytest.mark.parametrize("downscale", [1, 4])
def test_every_rendered_gaussian_lies_in_a_predicted_bucket(camera, downscale):
    generator = torch.Generator().manual_seed(camera)
    scene = random_scene(generator)
    buckets = RowBuckets(NUM_ROWS, ROWS_PER_BUCKET)
    bounds = gaussian_bucket_bounds(scene["means"], scene["scales"], buckets).numpy()
    eye, target, fx, fy, width, height = CAMERAS[camera]
    view = PinholeView(look_at(eye, target)[:3, :3], look_at(eye, target)[:3, 3], fx, fy, width / 2 + 3.7,
                       height / 2 - 2.1, width, height)
    predicted = buckets_in_view(bounds, view, near=0.01, pixel_margin=PIXEL_MARGIN * downscale)
    rendered = rendered_rows(scene, look_at(eye, target), fx / downscale, fy / downscale, view.cx / downscale,
                             view.cy / downscale, width // downscale, height // downscale, 0.01)
    rendered_buckets = np.unique(torch.nonzero(rendered).squeeze(1).numpy() // ROWS_PER_BUCKET)
    assert rendered.any(), "the camera must see part of the scene"
    assert predicted[rendered_buckets].all(), f"buckets {rendered_buckets[~predicted[rendered_buckets]]} missed"
    if camera in (1, 2):  # a narrow view, a view from inside the cloud: the prediction must leave buckets out
        assert predicted.mean() < 0.8


def test_bounds_taken_before_adam_moved_the_gaussians_still_hold():
    """Bounds of the Gaussians as they were, widened by k Adam steps at the learning rates, hold every Gaussian
    rendered after k steps that moved each centre coordinate and each log scale by the most a step can."""
    generator = torch.Generator().manual_seed(7)
    scene = random_scene(generator)
    buckets = RowBuckets(NUM_ROWS, ROWS_PER_BUCKET)
    bounds = gaussian_bucket_bounds(scene["means"], scene["scales"], buckets).numpy()
    steps, means_lr, scales_lr = 3, 0.02, 0.05
    step = adam_step_factor(0.9, 0.999)
    moved = dict(scene)
    signs = torch.randint(0, 2, (NUM_ROWS, 3), generator=generator) * 2 - 1
    moved["means"] = scene["means"] + signs * steps * means_lr * step
    moved["scales"] = scene["scales"] + steps * scales_lr * step
    eye, target, fx, fy, width, height = CAMERAS[1]
    viewmat = look_at(eye, target)
    view = PinholeView(viewmat[:3, :3], viewmat[:3, 3], fx, fy, width / 2, height / 2, width, height)
    predicted = buckets_in_view(bounds, view, 0.01, steps * means_lr * step, math.exp(steps * scales_lr * step))
    rendered = rendered_rows(moved, viewmat, fx, fy, width / 2, height / 2, width, height, 0.01)
    rendered_buckets = np.unique(torch.nonzero(rendered).squeeze(1).numpy() // ROWS_PER_BUCKET)
    assert predicted[rendered_buckets].all()
    unwidened = buckets_in_view(bounds, view, 0.01)
    assert not unwidened[rendered_buckets].all(), "the move must take some Gaussian out of its old bounds' reach"


def test_adam_step_factor_bounds_real_adam_steps():
    """torch Adam never moves an element by more than K x lr in one step: random gradients of wild magnitudes, and
    the sequence that attains the bound (gradients growing by beta2 / beta1 a step: the Cauchy-Schwarz equality),
    which reaches K times the bias correction sqrt(1 - beta2^t) / (1 - beta1^t)."""
    generator = torch.Generator().manual_seed(0)
    bound = adam_step_factor(0.9, 0.999)
    random_param = torch.nn.Parameter(torch.zeros(20000))
    worst_param = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    optimizers = [torch.optim.Adam([param], lr=1.0, betas=(0.9, 0.999), eps=0.0) for param in (random_param, worst_param)]
    largest = {"random": 0.0, "worst": 0.0}
    for step in range(1, 401):
        before = [random_param.detach().clone(), worst_param.detach().clone()]
        scale = torch.exp(torch.empty(20000).uniform_(-12, 4, generator=generator))
        random_param.grad = torch.where(torch.rand(20000, generator=generator) < 0.02, scale * 1e4, scale)
        worst_param.grad = torch.tensor([(0.999 / 0.9) ** step], dtype=torch.float64)
        for optimizer in optimizers:
            optimizer.step()
        largest["random"] = max(largest["random"], (random_param.detach() - before[0]).abs().max().item())
        largest["worst"] = max(largest["worst"], (worst_param.detach() - before[1]).abs().max().item())
    assert max(largest.values()) <= bound * (1 + 1e-5)
    bias_correction = (1 - 0.999**400) ** 0.5 / (1 - 0.9**400)
    assert largest["worst"] > 0.95 * bound * bias_correction
    with pytest.raises(ValueError, match="beta1\\^2 < beta2"):
        adam_step_factor(0.99, 0.9)


def test_bucket_bounds_are_adopted_one_publication_after_they_were_taken():
    """Every rank adopts a refresh at the same point (one publication later), whatever its copy's timing, a refresh
    waits for adoption instead of replacing the pending one, and a barrier's refresh is adopted at once."""
    buckets = RowBuckets(64, 32)
    params = {"means": torch.zeros(64, 3), "scales": torch.full((64, 3), -3.0)}
    bounds = BucketBounds(lambda p: gaussian_bucket_bounds(p["means"], p["scales"], buckets))
    bounds.refresh(params, wait=True)
    first, age = bounds.latest()
    assert age == 0 and first[:, 0].max() < 0
    params["means"] = params["means"] + 1.0  # a publication moves the Gaussians
    bounds.tick()
    bounds.refresh(params)
    assert bounds.latest()[1] == 1 and bounds.latest()[0][:, 0].max() < 0, "adopted before a publication went by"
    params["means"] = params["means"] + 1.0
    bounds.tick()
    bounds.refresh(params)  # skipped: the previous refresh awaits adoption
    host, age = bounds.latest()
    assert age == 1 and 0.5 < host[:, 0].min() < 1.5, "the refresh taken after the first move, one publication old"
    bounds.tick()
    host, age = bounds.latest()
    assert age == 2 and 0.5 < host[:, 0].min() < 1.5
    bounds.refresh(params, wait=True)  # a structural barrier
    host, age = bounds.latest()
    assert age == 0 and 1.5 < host[:, 0].min() < 2.5

