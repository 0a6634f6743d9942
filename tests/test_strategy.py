"""OdinStrategy's densification statistics against gsplat's DefaultStrategy, whose decisions they feed.

OdinStrategy accumulates gsplat's running statistics (``grad2d``, ``count``, ``radii``) with dense masked sums, so
that no host synchronisation learns how many (camera, Gaussian) pairs were visible. With one camera per step, as
stock splatfacto trains, the statistics must be gsplat's bit for bit, whichever 2D gradient (plain or absgrad) the
strategy densifies on. With several cameras per step the sums agree to rounding, and the largest radius is the
maximum over the cameras, where gsplat's indexed assignment keeps the last camera's for a Gaussian two cameras see.
"""

from __future__ import annotations

import pytest
import torch
from gsplat.strategy import DefaultStrategy

from odin_ns.strategy import OdinStrategy

GAUSSIANS = 500
WIDTH, HEIGHT = 640, 480


def render_info(cameras: int, seed: int) -> dict:
    """What gsplat's rasterization leaves in ``info`` after the backward: radii (0 where unseen), and the projected
    means with their gradient and absgrad."""
    generator = torch.Generator().manual_seed(seed)
    means2d = torch.randn(cameras, GAUSSIANS, 2, generator=generator).requires_grad_()
    means2d.grad = 1e-3 * torch.randn(cameras, GAUSSIANS, 2, generator=generator)
    means2d.absgrad = means2d.grad.abs() + 1e-4 * torch.rand(cameras, GAUSSIANS, 2, generator=generator)
    seen = torch.rand(cameras, GAUSSIANS, generator=generator) < 0.6
    radii = torch.randint(1, 90, (cameras, GAUSSIANS), generator=generator, dtype=torch.int32) * seen
    return {"width": WIDTH, "height": HEIGHT, "n_cameras": cameras, "radii": radii.int(), "gaussian_ids": None,
            "means2d": means2d}


def accumulate(strategy, infos) -> dict:
    params = {"means": torch.nn.Parameter(torch.zeros(GAUSSIANS, 3))}
    state = strategy.initialize_state()
    for info in infos:
        strategy._update_state(params, state, info)
    return state


@pytest.mark.parametrize("absgrad", [False, True], ids=["grad", "absgrad"])
def test_one_camera_per_step_accumulates_gsplats_statistics_bitwise(absgrad: bool):
    infos = [render_info(1, seed) for seed in range(3)]
    options = dict(absgrad=absgrad, refine_scale2d_stop_iter=4000)
    gsplat_state = accumulate(DefaultStrategy(**options), infos)
    odin_state = accumulate(OdinStrategy(**options), infos)
    for key in ("grad2d", "count", "radii"):
        assert torch.equal(odin_state[key], gsplat_state[key]), key


def test_several_cameras_per_step_sum_like_gsplat_and_keep_the_largest_radius_of_any_camera():
    infos = [render_info(3, seed) for seed in range(3)]
    options = dict(absgrad=True, refine_scale2d_stop_iter=4000)
    gsplat_state = accumulate(DefaultStrategy(**options), infos)
    odin_state = accumulate(OdinStrategy(**options), infos)
    torch.testing.assert_close(odin_state["grad2d"], gsplat_state["grad2d"], rtol=1e-6, atol=0)
    assert torch.equal(odin_state["count"], gsplat_state["count"])
    largest = torch.stack([info["radii"].amax(0) for info in infos]).amax(0) / float(max(WIDTH, HEIGHT))
    assert torch.equal(odin_state["radii"], largest)
    assert not torch.equal(gsplat_state["radii"], largest)  # gsplat's last-camera-wins, which this case exercises


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA")])])
def test_a_training_step_accumulates_its_renders_statistics_once(tiny_scene, tmp_path, device: str):
    """The unit accumulates its render's statistics (inside its graph where units are captured) and the strategy's
    callback then leaves them: before the first refinement each Gaussian's count is the number of steps whose
    render saw it."""
    from odin_ns.in_process import in_process_trainer, run_step

    trainer = in_process_trainer(tiny_scene, tmp_path, device)
    model = trainer.pipeline.model
    seen = 0
    for step in range(30):  # the tiny scene's 21 training views counted, then captured units on CUDA
        run_step(trainer, step)
        seen += int((model.info["radii"] > 0).sum())
    assert not any(model.strategy.refines(step) for step in range(30)), "no refinement zeroed the counts"
    assert int(model.strategy_state["count"].sum()) == seen
    if device == "cuda":
        assert trainer.pipeline.runtime.graphs.stats.replayed > 0
