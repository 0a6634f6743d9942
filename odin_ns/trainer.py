"""OdinTrainer: nerfstudio's Trainer with checkpoints that torch >= 2.6 can load.

nerfstudio 1.1.5's schedulers write ``numpy.float64`` learning rates into scheduler and optimizer state; ``torch.load`` defaults to
``weights_only=True`` since torch 2.6 and refuses them, so ``ns-eval`` and ``--load-dir`` fail on stock checkpoints.
Ours store plain Python numbers instead, which every torch version loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Type

import numpy as np
import torch
from nerfstudio.engine.trainer import Trainer, TrainerConfig
from nerfstudio.utils.decorators import check_main_thread
from nerfstudio.utils.rich_utils import CONSOLE


def to_python_scalars(value: Any) -> Any:
    """``value`` with every numpy scalar inside dicts, lists and tuples replaced by the Python number it holds."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: to_python_scalars(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_python_scalars(item) for item in value)
    return value


@dataclass
class OdinTrainerConfig(TrainerConfig):
    """Trainer configuration of odin-splatfacto."""

    _target: Type = field(default_factory=lambda: OdinTrainer)


class OdinTrainer(Trainer):
    """Trainer whose checkpoints load under ``weights_only=True``."""

    config: OdinTrainerConfig

    def __init__(self, config: OdinTrainerConfig, local_rank: int = 0, world_size: int = 1) -> None:
        if config.machine.device_type == "cuda" and not torch.cuda.is_available():
            CONSOLE.log("CUDA is not available: training on the CPU")
            config.machine.device_type = "cpu"
        super().__init__(config, local_rank, world_size)

    @check_main_thread
    def save_checkpoint(self, step: int) -> None:
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        checkpoint_path = self.checkpoint_dir / f"step-{step:09d}.ckpt"
        pipeline = self.pipeline.module if hasattr(self.pipeline, "module") else self.pipeline
        torch.save(
            {
                "step": step,
                "pipeline": pipeline.state_dict(),
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
