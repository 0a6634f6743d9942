"""OdinTrainer: nerfstudio's Trainer, launched by ns-train or torchrun, training through OdinPipeline.

What it adds to nerfstudio's Trainer:
- under torchrun (RANK/WORLD_SIZE/LOCAL_RANK set, ns-train launched once per process) it joins the process group
  itself (NCCL on GPUs, gloo on CPU) and takes LOCAL_RANK for its device, viewer and logging decisions;
- it falls back to the CPU when CUDA is unavailable (the device follows the machine);
- a step is one Odin task unit of B = world_size views; with ``--pipeline.odin.scale-with-batch`` (default) learning
  rates scale by sqrt(B), Adam betas become beta**B and the model's schedules count views (Grendel-GS's rules);
- checkpoints are written after draining in-flight units on every rank, with plain Python numbers where nerfstudio
  1.1.5 leaves ``numpy.float64`` learning rates (torch >= 2.6 loads with ``weights_only=True`` and refuses those);
- per-unit runtime statistics go to ``odin_units.jsonl`` (rank 0; ``odin_units_rank{r}.jsonl`` for the others) in the
  run directory and to nerfstudio's writers;
- with ``--pipeline.odin.profile-steps N`` it records steps ``profile-start`` .. +N-1 with torch.profiler into
  ``profile_rank{r}.json.gz`` per rank (:mod:`odin_ns.profiling`), the input of ``odin-ns timeline``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Literal, Type

import numpy as np
import torch
import torch.distributed as dist
from nerfstudio.engine.trainer import TRAIN_INTERATION_OUTPUT, Trainer, TrainerConfig
from nerfstudio.utils import comms, writer
from nerfstudio.utils.rich_utils import CONSOLE

from odin_ns.comm.process_group import init_from_env
from odin_ns.pipeline import OdinPipelineConfig
from odin_ns.runtime.stats import unit_log


def to_python_scalars(value: Any) -> Any:
    """``value`` with every numpy scalar inside dicts, lists and tuples replaced by the Python number it holds."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: to_python_scalars(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_python_scalars(item) for item in value)
    return value


def launched_by_torchrun() -> bool:
    """True in a process that torchrun started as one of several ranks."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "LOCAL_RANK" in os.environ


@dataclass
class OdinTrainerConfig(TrainerConfig):
    """Trainer configuration of odin-splatfacto."""

    _target: Type = field(default_factory=lambda: OdinTrainer)


class OdinTrainer(Trainer):
    """See the module docstring."""

    config: OdinTrainerConfig

    def __init__(self, config: OdinTrainerConfig, local_rank: int = 0, world_size: int = 1) -> None:
        if not isinstance(config.pipeline, OdinPipelineConfig):
            raise ValueError(f"OdinTrainer needs an OdinPipelineConfig, got {type(config.pipeline).__name__}")
        if config.machine.device_type == "cuda" and not torch.cuda.is_available():
            CONSOLE.log("CUDA is not available: training on the CPU")
            config.machine.device_type = "cpu"
        if launched_by_torchrun() and world_size == 1:
            backend = "nccl" if config.machine.device_type == "cuda" else "gloo"
            context = init_from_env(timeout_s=config.pipeline.odin.timeout_s, backend=backend)
            local_rank, world_size = context.local_rank, context.world_size
            self._share_run_directory(config)
        elif torch.cuda.is_available() and config.machine.device_type == "cuda":
            torch.cuda.set_device(local_rank)
        self._apply_batch_scaling(config, views_per_step=world_size)
        super().__init__(config, local_rank, world_size)
        self._profile_window = None  # built only when asked for: training without it never touches the profiler
        odin = config.pipeline.odin
        if odin.profile_steps > 0:
            from odin_ns.profiling import ProfileWindow

            self._profile_window = ProfileWindow(odin.profile_start, odin.profile_steps, self.base_dir)

    @staticmethod
    def _share_run_directory(config: OdinTrainerConfig) -> None:
        """Under torchrun every rank parsed the command line and saved config.yml under its own timestamp: all ranks
        take rank 0's run directory, and a rank's stray one (holding only that config.yml) is removed."""
        own_directory = config.get_base_dir()
        shared = [config.timestamp]
        dist.broadcast_object_list(shared, src=0)
        if shared[0] == config.timestamp:
            return
        config.timestamp = shared[0]
        try:  # several ranks may share one stray directory
            if all(path.name == "config.yml" for path in own_directory.iterdir()):
                shutil.rmtree(own_directory, ignore_errors=True)
        except FileNotFoundError:  # another rank with the same timestamp removed it first
            pass

    def setup(self, test_mode: Literal["test", "val", "inference"] = "val") -> None:
        super().setup(test_mode)
        self._bind_optimizers_to_model_tensors()

    def _bind_optimizers_to_model_tensors(self) -> None:
        """Point every optimizer at the tensors the model trains, keeping the optimizer state.

        Resuming, nerfstudio builds the optimizers around the freshly initialised Gaussians, then loads the checkpoint
        by replacing those tensors with new ones of the checkpoint's size (splatfacto's ``load_state_dict``) and loads
        the optimizer state keyed by the old ones: the optimizers would step tensors nothing renders.
        """
        for group, params in self.pipeline.get_param_groups().items():
            optimizer = self.optimizers.optimizers[group]
            held = optimizer.param_groups[0]["params"]
            for index, (old, new) in enumerate(zip(held, params)):
                if old is not new:
                    held[index] = new
                    if old in optimizer.state:
                        optimizer.state[new] = optimizer.state.pop(old)
            self.optimizers.parameters[group] = params

    @staticmethod
    def _apply_batch_scaling(config: OdinTrainerConfig, views_per_step: int) -> None:
        """Grendel-GS's batch rules for B views per step: lr * sqrt(B), beta ** B, schedules counted in views."""
        if views_per_step == 1 or not config.pipeline.odin.scale_with_batch:
            return
        for group in config.optimizers.values():
            optimizer = group["optimizer"]
            optimizer.lr *= math.sqrt(views_per_step)
            if hasattr(optimizer, "betas"):
                optimizer.betas = tuple(beta**views_per_step for beta in optimizer.betas)
            scheduler = group["scheduler"]
            if scheduler is not None:
                scheduler.lr_final *= math.sqrt(views_per_step)
                scheduler.max_steps = max(1, scheduler.max_steps // views_per_step)
                scheduler.warmup_steps = scheduler.warmup_steps // views_per_step
        config.pipeline.model = dataclasses.replace(config.pipeline.model, views_per_step=views_per_step)
        CONSOLE.log(f"{views_per_step} views per step: learning rates x{math.sqrt(views_per_step):.3g}, "
                    f"Adam betas ** {views_per_step}, densification schedule counted in views")

    def train_iteration(self, step: int) -> TRAIN_INTERATION_OUTPUT:
        """One Odin task unit: the pipeline computes, exchanges and publishes; then the schedulers step."""
        if self.use_grad_scaler:
            raise ValueError("odin-splatfacto does not support mixed precision or a gradient scaler")
        if self._profile_window is not None:
            return self._profile_window.run(step, lambda: self._train_unit(step))
        return self._train_unit(step)

    def _train_unit(self, step: int) -> TRAIN_INTERATION_OUTPUT:
        self.optimizers.zero_grad_all()
        loss, loss_dict, metrics_dict = self.pipeline.train_unit(step, self.optimizers)
        self.optimizers.scheduler_step_all(step)
        self._log_units(step)
        return loss, loss_dict, metrics_dict

    def _log_units(self, step: int, force: bool = False) -> None:
        """At logging steps, append the newly published units' records to this rank's unit log (``unit_log``) and,
        on the main process, to nerfstudio's writers; batched because reading a record's GPU timings waits for the
        GPU."""
        if not force and step % self.config.logging.steps_per_log != 0:
            return
        records = self.pipeline.new_unit_records()
        if not records:
            return
        with open(unit_log(self.base_dir, comms.get_rank()), "a") as log:
            log.writelines(json.dumps(record) + "\n" for record in records)
        if not comms.is_main_process():
            return
        for key, value in records[-1].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                writer.put_scalar(name=f"Odin/{key}", scalar=value, step=step)

    def _after_train(self) -> None:
        """Training that ends inside the profile window still writes its trace (before the final checkpoint)."""
        if self._profile_window is not None:
            self._profile_window.close()
        super()._after_train()

    def save_checkpoint(self, step: int) -> None:
        """Drain in-flight units on every rank, then (main process) write a weights_only-loadable checkpoint."""
        with self.train_lock:  # the viewer renders under this lock: never a half-published state
            self.pipeline.drain()
        self._log_units(step, force=True)
        if not comms.is_main_process():
            return
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        checkpoint_path = self.checkpoint_dir / f"step-{step:09d}.ckpt"
        torch.save(
            {
                "step": step,
                "pipeline": self.pipeline.state_dict(),
                "optimizers": to_python_scalars({k: v.state_dict() for k, v in self.optimizers.optimizers.items()}),
                "schedulers": to_python_scalars({k: v.state_dict() for k, v in self.optimizers.schedulers.items()}),
                "scalers": self.grad_scaler.state_dict(),
            },
            checkpoint_path,
        )
        if self.config.save_only_latest_checkpoint:
            for stale in self.checkpoint_dir.glob("*.ckpt"):
                if stale != checkpoint_path:
                    stale.unlink()
