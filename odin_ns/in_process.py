"""odin-splatfacto trained from Python, one step at a time: a trainer set up in this process without ns-train (one
rank, no viewer, no periodic evaluation or saving), and nerfstudio's training step with its callbacks. For notebooks,
experiments that need each step's outputs, and the tests and benchmarks that compare training runs step by step."""

from __future__ import annotations

import copy
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from nerfstudio.engine.callbacks import TrainingCallbackLocation

from odin_ns.method_configs import odin_splatfacto


def in_process_trainer(
    data: Path,
    output_dir: Path,
    device_type: str,
    views_per_rank: int = 1,
    runtime_options: Mapping[str, Any] = MappingProxyType({}),
    **model_options,
):
    """An OdinTrainer set up in this process (one rank, no viewer, no periodic evaluation or saving);
    ``runtime_options`` set fields of ``--pipeline.odin`` (the runtime's configuration), ``model_options`` the model's."""
    config = copy.deepcopy(odin_splatfacto.config)
    config.data = config.pipeline.datamanager.data = Path(data)
    config.output_dir = Path(output_dir)
    config.vis = "tensorboard"
    config.machine.device_type = device_type
    config.pipeline.model.num_downscales = 0
    for name, value in model_options.items():
        setattr(config.pipeline.model, name, value)
    config.pipeline.datamanager.views_per_rank = views_per_rank
    for name, value in runtime_options.items():
        setattr(config.pipeline.odin, name, value)
    config.logging.steps_per_log = 1000
    config.steps_per_eval_image = config.steps_per_eval_all_images = config.steps_per_save = 1_000_000
    config.set_timestamp()
    trainer = config.setup(local_rank=0, world_size=1)
    trainer.setup()
    return trainer


def run_step(trainer, step: int):
    """One step as nerfstudio's training loop runs it, callbacks included (the densification strategy's among them);
    returns ``train_iteration``'s (loss, loss dict, metrics dict)."""
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    outputs = trainer.train_iteration(step)
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.AFTER_TRAIN_ITERATION)
    return outputs
