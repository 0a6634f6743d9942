"""Splatfacto's resolution warm-up stops halving where densification would split every Gaussian."""

from __future__ import annotations

import pytest
import torch

from odin_ns.model import MIN_RENDER_LONG_SIDE, OdinSplatfactoModel, OdinSplatfactoModelConfig


def warmup_model(step: int, long_side: int | None) -> OdinSplatfactoModel:
    """Just the state ``_get_downscale_factor`` reads (building a whole model needs a dataset)."""
    model = OdinSplatfactoModel.__new__(OdinSplatfactoModel)
    torch.nn.Module.__init__(model)
    model.config = OdinSplatfactoModelConfig(num_downscales=2, resolution_schedule=3000)
    model.step = step
    if long_side is not None:
        model._image_long_side = long_side
    return model


@pytest.mark.parametrize(
    ("long_side", "step", "factor"),
    [
        (800, 0, 4),  # cup77: 200 px at 1/4, splatfacto's schedule unchanged
        (800, 3000, 2),
        (800, 6000, 1),
        (128, 0, 1),  # the demo scene: 32 and 64 px would split every Gaussian
        (300, 0, 2),  # 150 px at 1/2 is fine, 75 px at 1/4 is not
        (None, 0, 4),  # no training camera seen yet: splatfacto's own factor
    ],
)
def test_downscale_keeps_the_long_side_above_the_minimum(long_side, step, factor):
    model = warmup_model(step, long_side)
    assert model._get_downscale_factor() == factor
    if long_side is not None:
        assert long_side / factor >= MIN_RENDER_LONG_SIDE or factor == 1
    model.eval()
    assert model._get_downscale_factor() == 1  # evaluation renders at full resolution
