"""nerfstudio's optimizer config for the Gaussians' groups: builds ScopedAdam (``odin_ns.runtime.optimizer``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple, Type

from nerfstudio.engine.optimizers import OptimizerConfig

from odin_ns.runtime.optimizer import ScopedAdam


@dataclass
class ScopedAdamOptimizerConfig(OptimizerConfig):
    """nerfstudio optimizer config that builds a ScopedAdam (drop-in for AdamOptimizerConfig)."""

    _target: Type = ScopedAdam
    betas: Tuple[float, float] = (0.9, 0.999)
    """Adam's betas (raised to the power of the batch by ``odin_ns.batch``)."""
    weight_decay: float = 0
    """Must stay 0: ScopedAdam has no weight decay."""
