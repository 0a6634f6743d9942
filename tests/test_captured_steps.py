"""Captured units on a GPU (odin_ns.runtime.capture through the pipeline): every replayed step computes what the eager
step computes on the same state and the same batch (the loss exactly, the gradients to gsplat's atomic rounding),
through densification, pruning and an opacity reset, which recapture. Skipped without CUDA; the decision logic is
tested on the CPU in tests/test_capture.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from odin_ns.in_process import in_process_trainer, run_step
from odin_ns.runtime.capture import UnitGraphs

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

STEPS = 120
DENSIFY = dict(warmup_length=30, refine_every=10, reset_alpha_every=10, stop_split_at=110)
"""Densify and prune every 10 steps from step 40 to 90 (the tiny scene's 21 training views pause refinement for 31
steps after a reset), reset opacities at step 100: structural changes the captured units are recaptured after."""


def test_every_replayed_step_computes_the_eager_step(tiny_scene: Path, tmp_path: Path, monkeypatch):
    """Before each replay the same unit is computed eagerly on the state and inputs the replay starts from (what it
    produced then put back, so training goes on from the replay's): the same loss and rows, the gradient table to the
    rounding of gsplat's atomic accumulation. The replay also publishes the unit and accumulates its statistics (one
    rank): after each replay that effect is applied eagerly to the replay's outputs from the state before it, and
    must leave that state bit for bit (a step-dependent value baked into the graph, such as a learning rate, would
    pass the capture's check and fail here)."""
    trainer = in_process_trainer(tiny_scene, tmp_path, "cuda", runtime_options={"mode": "sync"}, **DENSIFY)
    pipeline = trainer.pipeline
    checks, effects = [], []
    replay = UnitGraphs.run

    def run_and_check(self, key, inputs, fn, effect=None):
        replays = key is not None and self.capturing and key in self._graphs
        if replays:
            produced = dict(pipeline._produced)
            eager = [tensor.clone() for tensor in fn(inputs)[:3]]
            pipeline._produced.update(produced)
            before = [tensor.clone() for tensor in effect.state()] if effect is not None else []
        out = replay(self, key, inputs, fn, effect)
        if replays:
            loss, visible, table = out[:3]
            scale = eager[2].abs().max().clamp_min(1e-30)
            checks.append((abs(loss.item() - eager[0].item()) / abs(eager[0].item()), torch.equal(visible, eager[1]),
                           ((table - eager[2]).abs().max() / scale).item()))
            if effect is not None:
                replayed = [tensor.clone() for tensor in effect.state()]
                for tensor, saved in zip(effect.state(), before):
                    tensor.copy_(saved)
                pipeline.model.info = pipeline._produced[key][2]  # the graph's render info, which the statistics read
                effect.apply(out, self._graphs[key].inputs)
                effects.append(all(torch.equal(a, b) for a, b in zip(effect.state(), replayed)))
        return out

    monkeypatch.setattr(UnitGraphs, "run", run_and_check)
    gaussians = []
    for step in range(STEPS):
        loss, _, _ = run_step(trainer, step)
        assert torch.isfinite(loss), step
        gaussians.append(pipeline.model.num_points)
    graphs = pipeline.runtime.graphs
    assert graphs.stats.fallback is None, graphs.stats.fallback
    assert graphs.stats.replayed > STEPS // 3 and len(checks) == graphs.stats.replayed, graphs.stats
    assert len(set(gaussians)) > 3, "densified"
    assert graphs.stats.captured >= 3 and graphs.stats.dropped >= 2, "recaptured after the structural changes"
    assert max(loss for loss, _, _ in checks) <= 1e-6, checks
    assert all(same for _, same, _ in checks)
    assert max(table for _, _, table in checks) <= 1e-4, checks
    assert len(effects) == len(checks) and all(effects), effects


def test_units_with_the_camera_optimizer_run_eagerly_said_once(tiny_scene: Path, tmp_path: Path):
    from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig

    trainer = in_process_trainer(tiny_scene, tmp_path, "cuda", runtime_options={"mode": "sync"},
                                 camera_optimizer=CameraOptimizerConfig(mode="SO3xR3"))
    for step in range(5):
        run_step(trainer, step)
    graphs = trainer.pipeline.runtime.graphs
    assert not graphs.capturing and "dense parameters" in graphs.stats.fallback
    assert graphs.stats.replayed == 0 and graphs.stats.captured == 0


def test_units_of_several_views_run_eagerly_said_once(tiny_scene: Path, tmp_path: Path):
    trainer = in_process_trainer(tiny_scene, tmp_path, "cuda", views_per_rank=2, runtime_options={"mode": "sync"})
    for step in range(5):
        run_step(trainer, step)
    graphs = trainer.pipeline.runtime.graphs
    assert not graphs.capturing and "units of 2 views run eagerly" in graphs.stats.fallback
    assert graphs.stats.replayed == 0 and graphs.stats.captured == 0
    assert trainer.pipeline.model._presized is None, "no capture, no presized intersections"
