"""Batch scaling: the one place that adapts splatfacto's per-view hyperparameters to B views per optimizer step.

A step of Odin trains B = world size x views per rank views at once. Grendel-GS's rules keep the trajectory of
per-view training: learning rates x sqrt(B), Adam's eps / sqrt(B) and betas ** B (B steps of momentum decay in
one), learning-rate schedules and the model's view-counted schedules (densification cadence, resolution warm-up,
SH degree) counted in steps of B views. The square root assumes the views' gradients are noise around a common
direction; where every view pushes the same way (opacities after a reset, say) B views of single-view steps move a
parameter B lr and one step of B views sqrt(B) lr, so ``lr_exponent`` sets the power of B between the two rules.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

VIEW_COUNTED_SCHEDULES = (
    "warmup_length",
    "refine_every",
    "resolution_schedule",
    "stop_split_at",
    "stop_screen_size_at",
    "sh_degree_interval",
)
"""Splatfacto model settings counted in training steps of one view."""


def scale_for_batch(
    optimizers: dict[str, dict[str, Any]], model_config: Any, views_per_step: int, lr_exponent: float = 0.5
) -> Any:
    """Scale nerfstudio's ``optimizers`` config (in place) for ``views_per_step`` views per step, learning rates by
    ``views_per_step ** lr_exponent``; return the model config with its view-counted schedules divided (and
    ``views_per_step`` set). B = 1 changes nothing."""
    if views_per_step == 1:
        return model_config
    root, lr_factor = math.sqrt(views_per_step), views_per_step**lr_exponent
    for group in optimizers.values():
        optimizer = group["optimizer"]
        optimizer.lr *= lr_factor
        if hasattr(optimizer, "eps"):
            optimizer.eps /= root
        if hasattr(optimizer, "betas"):
            optimizer.betas = tuple(beta**views_per_step for beta in optimizer.betas)
        scheduler = group["scheduler"]
        if scheduler is not None:
            if scheduler.lr_final is not None:
                scheduler.lr_final *= lr_factor
            scheduler.max_steps = max(1, scheduler.max_steps // views_per_step)
            scheduler.warmup_steps = scheduler.warmup_steps // views_per_step
    per_step = {name: max(1, getattr(model_config, name) // views_per_step) for name in VIEW_COUNTED_SCHEDULES}
    return dataclasses.replace(model_config, views_per_step=views_per_step, **per_step)


def scale_run_for_batch(config: Any, views_per_step: int) -> bool:
    """Apply the pipeline's batch scaling (``scale_with_batch``, ``lr_batch_exponent``) to a trainer ``config`` (its
    optimizers and model config, in place) for ``views_per_step`` views per step; whether anything was scaled."""
    pipeline = config.pipeline
    if not pipeline.scale_with_batch or views_per_step == 1:
        return False
    pipeline.model = scale_for_batch(config.optimizers, pipeline.model, views_per_step, pipeline.lr_batch_exponent)
    return True
