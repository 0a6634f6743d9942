"""Captured units on a GPU (odin_ns.runtime.capture through the pipeline): a step replayed from a CUDA graph computes
what the eager step computes, to gsplat's own rounding (its backward accumulates with atomics, so two eager runs of
the same steps may differ in the last bits: that difference is the yardstick), through densification and pruning,
which recapture. Skipped without CUDA; the decision logic is tested on the CPU in tests/test_capture.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from odin_ns.in_process import in_process_trainer, run_step

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

STEPS = 120
DENSIFY = dict(warmup_length=30, refine_every=10, reset_alpha_every=10, stop_split_at=110)
"""Densify and prune every 10 steps from step 40 to 90 (the tiny scene's 21 training views pause refinement for 31
steps after a reset), reset opacities at step 100: structural changes the captured units are recaptured after."""


def train(scene: Path, out: Path, captured: bool, views_per_rank: int) -> tuple[list[float], dict, object]:
    torch.manual_seed(0)
    trainer = in_process_trainer(scene, out, "cuda", views_per_rank=views_per_rank,
                                 runtime_options={"mode": "sync", "captured_units": captured},
                                 presized_intersections=True, **DENSIFY)
    losses = []
    for step in range(STEPS):
        loss, _, _ = run_step(trainer, step)
        losses.append(float(loss))
    model = trainer.pipeline.model
    state = {name: param.detach().clone() for name, param in model.gauss_params.items()}
    return losses, state, trainer.pipeline.runtime.graphs


@pytest.mark.parametrize("views_per_rank", [1, 2])
def test_replayed_steps_train_what_eager_steps_train_to_gsplats_rounding(tiny_scene: Path, tmp_path: Path,
                                                                         views_per_rank: int):
    captured_losses, captured_state, graphs = train(tiny_scene, tmp_path / "captured", True, views_per_rank)
    eager_losses, eager_state, _ = train(tiny_scene, tmp_path / "eager", False, views_per_rank)
    again_losses, again_state, _ = train(tiny_scene, tmp_path / "again", False, views_per_rank)
    assert graphs.stats.fallback is None, graphs.stats.fallback
    assert graphs.stats.replayed > STEPS // 2, graphs.stats
    assert graphs.stats.captured >= 3 and graphs.stats.dropped >= 2, "recaptured after the structural changes"
    assert captured_state["means"].shape == eager_state["means"].shape, "the same densification decisions"
    assert captured_losses[0] == eager_losses[0], "the first unit runs eagerly in both"
    rounding = max(abs(a - b) for a, b in zip(eager_losses, again_losses))
    gap = max(abs(a - b) for a, b in zip(captured_losses, eager_losses))
    assert gap <= 10 * rounding + 1e-5 * max(eager_losses), (gap, rounding)
    for name, eager in eager_state.items():
        yardstick = (eager - again_state[name]).abs().max().item()
        difference = (captured_state[name] - eager).abs().max().item()
        assert difference <= 10 * yardstick + 1e-5 * eager.abs().max().item(), (name, difference, yardstick)


def test_units_with_the_camera_optimizer_run_eagerly_said_once(tiny_scene: Path, tmp_path: Path):
    from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig

    trainer = in_process_trainer(tiny_scene, tmp_path, "cuda", runtime_options={"mode": "sync"},
                                 camera_optimizer=CameraOptimizerConfig(mode="SO3xR3"))
    for step in range(5):
        run_step(trainer, step)
    graphs = trainer.pipeline.runtime.graphs
    assert not graphs.capturing and "dense parameters" in graphs.stats.fallback
    assert graphs.stats.replayed == 0 and graphs.stats.eager == 5
