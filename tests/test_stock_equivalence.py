"""odin-splatfacto's one-rank step against nerfstudio's plain training loop with torch Adam.

Odin replaces the optimizer step with its runtime's publication (packed tables, per-column learning rates, staged
gradients), the loss's inputs with views built once per unit, and the renders with private views of the Gaussians.
On one rank with ``--pipeline.odin.adam dense`` none of that may change what is learnt: the same views in the same
order must give the same Gaussians and Adam moments as splatfacto's loop (zero the gradients, forward, backward,
``torch.optim.Adam`` per group, schedulers, then the callbacks that densify).

The equality is bitwise for the first steps only. From the fifth step on the tiny scene, the gradients of Gaussians
that barely touch a pixel (values near 1e-11) differ between the two at rounding level, and Adam with splatfacto's
eps of 1e-15 turns such a gradient into a step of about the full learning rate whatever its size, so the two runs
part by up to a learning rate on those rows (docs/results.md, twelfth session). This test stops before that step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from nerfstudio.engine.callbacks import TrainingCallbackLocation

from odin_ns.benchmarks.host_waits import in_process_trainer, run_step

EQUAL_STEPS = 4
"""Steps 0-3 (the opacity reset of step 0 among them) agree bitwise on the tiny scene."""


def plain_adam_step(trainer, step: int) -> None:
    """nerfstudio's training iteration and callbacks, with the trainer's optimizers as it built them."""
    optimizers, model = trainer.optimizers, trainer.pipeline.model
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    optimizers.zero_grad_all()
    camera, batch = trainer.pipeline.datamanager.next_train(step)
    losses = model.get_loss_dict(model(camera), batch, {})
    sum(losses.values()).backward()
    optimizers.optimizer_step_all()
    optimizers.scheduler_step_all(step)
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.AFTER_TRAIN_ITERATION)


def with_torch_adam(trainer) -> None:
    """Replace every optimizer of ``trainer`` by ``torch.optim.Adam`` with its hyperparameters, and rebuild the
    schedulers on them (nerfstudio's Optimizers would have built exactly these from an AdamOptimizerConfig)."""
    optimizers = trainer.optimizers
    for name, optimizer in list(optimizers.optimizers.items()):
        group = optimizer.param_groups[0]
        optimizers.optimizers[name] = torch.optim.Adam(group["params"], lr=group["lr"], eps=group["eps"],
                                                       betas=group["betas"])
        if name in optimizers.schedulers:
            lr_init = optimizers.config[name]["optimizer"].lr
            optimizers.schedulers[name] = optimizers.config[name]["scheduler"].setup().get_scheduler(
                optimizer=optimizers.optimizers[name], lr_init=lr_init)
    trainer.pipeline.model.optimizers = optimizers.optimizers  # what the densification strategy steps


def adam_state(trainer, name: str) -> dict:
    optimizer = trainer.optimizers.optimizers[name]
    return optimizer.state[optimizer.param_groups[0]["params"][0]]


@pytest.mark.slow
def test_one_rank_sync_step_learns_what_nerfstudios_loop_with_torch_adam_learns(tiny_scene: Path, tmp_path: Path):
    trainers = []
    for name in ("odin", "plain"):
        torch.manual_seed(0)  # splatfacto's random quaternions
        trainers.append(in_process_trainer(tiny_scene, tmp_path / name, "cpu", runtime_options={"adam": "dense"}))
    odin, plain = trainers
    with_torch_adam(plain)
    for step in range(EQUAL_STEPS):
        run_step(odin, step)
        plain_adam_step(plain, step)
    odin.pipeline.drain()
    for name, param in odin.pipeline.model.gauss_params.items():
        assert torch.equal(param, plain.pipeline.model.gauss_params[name]), name
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(adam_state(odin, name)[key], adam_state(plain, name)[key]), (name, key)
        assert adam_state(odin, name)["step"] == adam_state(plain, name)["step"] == EQUAL_STEPS, name
