"""odin-splatfacto's one-rank step against nerfstudio's plain training loop with torch Adam.

Odin replaces the optimizer step with its runtime's publication (packed tables, per-column learning rates, staged
gradients), the loss's inputs with views built once per unit, and the renders with private views of the Gaussians.
On one rank, where the default ``--pipeline.odin.adam auto`` is stock's dense Adam, none of that may change what is
learnt: the same views in the same order must give the same Gaussians and Adam moments as splatfacto's loop (zero the
gradients, forward, backward, ``torch.optim.Adam`` per group, schedulers, then the callbacks that densify). With
Selective Adam (the default on several ranks) it must step exactly the rows the step's render saw, as torch Adam's
update written out on those rows would.

The equality is bitwise for the first steps only. From the fourth or fifth step on the tiny scene (by machine), the
gradients of Gaussians that barely touch a pixel (values near 1e-11) differ between the two at rounding level, and
Adam with splatfacto's eps of 1e-15 turns such a gradient into a step of about the full learning rate whatever its
size, so the two runs part by up to a learning rate on those rows (docs/results.md, "The step is stock's"). This test stops before that step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from nerfstudio.engine.callbacks import TrainingCallbackLocation

from odin_ns.in_process import in_process_trainer, run_step
from odin_ns.gaussians import GAUSSIAN_GROUPS

EQUAL_STEPS = 3
"""Steps 0-2 (the opacity reset of step 0 among them) agree bitwise on the tiny scene. The fourth step agreed on the
machine this test was written on and parts on another (the rounding of the reductions differs between machines)."""
SELECTIVE_EQUAL_STEPS = 3
"""Steps 0-2 agree bitwise with the hand-written Selective Adam (its gathered rows round differently later)."""


def plain_adam_step(trainer, step: int, gaussian_step=None) -> None:
    """nerfstudio's training iteration and callbacks, with the trainer's optimizers as it built them;
    ``gaussian_step(trainer)``, where given, steps the Gaussian groups instead of their optimizers."""
    optimizers, model = trainer.optimizers, trainer.pipeline.model
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    optimizers.zero_grad_all()
    camera, batch = trainer.pipeline.datamanager.next_train(step)
    losses = model.get_loss_dict(model(camera), batch, {})
    sum(losses.values()).backward()
    if gaussian_step is None:
        optimizers.optimizer_step_all()
    else:
        gaussian_step(trainer)
        for name in optimizers.optimizers:
            if name not in GAUSSIAN_GROUPS:
                optimizers.optimizer_step(name)
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


@torch.no_grad()
def selective_adam_on_visible_rows(trainer) -> None:
    """Selective Adam written out: torch Adam's update, operation for operation, on the rows the step's render saw
    (radius > 0 in some view) and nothing else, bias-corrected by one step count that advances every step."""
    model = trainer.pipeline.model
    rows = (model.info["radii"] > 0).any(dim=0)
    for name in GAUSSIAN_GROUPS:
        optimizer = trainer.optimizers.optimizers[name]
        group = optimizer.param_groups[0]
        param = group["params"][0]
        state = optimizer.state.setdefault(param, {})
        if "exp_avg" not in state:
            state.update(exp_avg=torch.zeros_like(param), exp_avg_sq=torch.zeros_like(param), step=torch.tensor(0.0))
        state["step"] += 1
        beta1, beta2 = group["betas"]
        step = float(state["step"])
        exp_avg, exp_avg_sq = state["exp_avg"][rows], state["exp_avg_sq"][rows]
        grad, seen = param.grad[rows], param[rows]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(group["eps"])
        seen.addcdiv_(exp_avg, denom, value=-(group["lr"] / (1 - beta1**step)))
        state["exp_avg"][rows], state["exp_avg_sq"][rows], param[rows] = exp_avg, exp_avg_sq, seen


def adam_state(trainer, name: str) -> dict:
    optimizer = trainer.optimizers.optimizers[name]
    return optimizer.state[optimizer.param_groups[0]["params"][0]]


@pytest.mark.slow
def test_one_rank_sync_step_learns_what_nerfstudios_loop_with_torch_adam_learns(tiny_scene: Path, tmp_path: Path):
    trainers = []
    for name in ("odin", "plain"):
        torch.manual_seed(0)  # splatfacto's random quaternions
        trainers.append(in_process_trainer(tiny_scene, tmp_path / name, "cpu"))
    odin, plain = trainers
    assert odin.pipeline.config.odin.adam == "dense"  # the default
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


@pytest.mark.slow
def test_one_rank_sync_step_with_selective_adam_steps_exactly_the_rows_its_render_saw(tiny_scene: Path, tmp_path: Path):
    """Selective Adam against the same loop with Adam written out on the visible rows only: which rows a step updates
    (its update scope, what every overlapped mode relies on), and how."""
    trainers = []
    for name in ("odin", "written-out"):
        torch.manual_seed(0)
        trainers.append(in_process_trainer(tiny_scene, tmp_path / name, "cpu", runtime_options={"adam": "selective"}))
    odin, written_out = trainers
    assert odin.pipeline.config.odin.adam == "selective"
    for step in range(SELECTIVE_EQUAL_STEPS):
        run_step(odin, step)
        plain_adam_step(written_out, step, gaussian_step=selective_adam_on_visible_rows)
    odin.pipeline.drain()
    unseen = ~(written_out.pipeline.model.info["radii"] > 0).any(dim=0)
    assert unseen.any()  # the last step left some rows out, so "only the visible rows" is tested
    for name, param in odin.pipeline.model.gauss_params.items():
        assert torch.equal(param, written_out.pipeline.model.gauss_params[name]), name
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(adam_state(odin, name)[key], adam_state(written_out, name)[key]), (name, key)
