"""The predictor of splatfacto's units: host-side views of the training cameras, and what the pipeline refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.models.splatfacto import get_viewmat

from odin_ns.benchmarks.host_waits import in_process_trainer, run_step
from odin_ns.read_prediction import pinhole_views
from odin_ns.rendering import world_to_camera


def test_world_to_camera_is_nerfstudios_get_viewmat_operation_for_operation():
    """The model's view matrices are what nerfstudio's ``get_viewmat`` computes, bit for bit (its eager function;
    compiled, it would take seconds to build here)."""
    generator = torch.Generator().manual_seed(4)
    rotations, _ = torch.linalg.qr(torch.randn(6, 3, 3, generator=generator))
    camera_to_worlds = torch.cat([rotations, torch.randn(6, 3, 1, generator=generator)], 2)
    eager_get_viewmat = get_viewmat._torchdynamo_orig_callable
    assert torch.equal(world_to_camera(camera_to_worlds), eager_get_viewmat(camera_to_worlds))


def test_pinhole_views_hold_nerfstudios_world_to_camera_transform():
    """The host-side views of the training cameras project as splatfacto renders them: nerfstudio's ``get_viewmat``
    (compiled) and the predictor's views agree on random poses."""
    generator = torch.Generator().manual_seed(3)
    rotations, _ = torch.linalg.qr(torch.randn(5, 3, 3, generator=generator, dtype=torch.float64))
    camera_to_worlds = torch.cat([rotations, torch.randn(5, 3, 1, generator=generator, dtype=torch.float64)], 2)
    cameras = Cameras(camera_to_worlds.float(), fx=300.0, fy=310.0, cx=160.0, cy=120.0, width=320, height=240)
    expected = get_viewmat(cameras.camera_to_worlds.double())
    for view, viewmat in zip(pinhole_views(cameras), expected):
        np.testing.assert_allclose(view.rotation, viewmat[:3, :3].numpy(), atol=1e-6)
        np.testing.assert_allclose(view.translation, viewmat[:3, 3].numpy(), atol=1e-6)
        assert (view.fx, view.fy, view.cx, view.cy, view.width, view.height) == (300.0, 310.0, 160.0, 120.0, 320, 240)


def test_predicted_scopes_refuse_a_camera_optimizer(tiny_scene: Path, tmp_path: Path):
    """Poses the camera optimizer moves would leave the predicted frusta behind: the run stops with a one-line
    error before its first unit instead of predicting from the wrong cameras."""
    trainer = in_process_trainer(
        tiny_scene, tmp_path, "cpu", runtime_options={"mode": "quality-first", "read_scopes": "predicted"},
        camera_optimizer=CameraOptimizerConfig(mode="SO3xR3"),
    )
    with pytest.raises(ValueError, match="needs fixed camera poses.*camera-optimizer.mode off"):
        run_step(trainer, 1)
