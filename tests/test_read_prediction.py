"""The predictor of splatfacto's units: host-side views of the training cameras, and what the pipeline refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.models.splatfacto import get_viewmat

from odin_ns.in_process import in_process_trainer, run_step
from odin_ns.read_prediction import pinhole_views
from odin_ns.rendering import splatfacto_view_matrices, view_inverses, world_to_camera


def test_world_to_camera_is_nerfstudios_get_viewmat_operation_for_operation():
    """The model's view matrices are what nerfstudio's ``get_viewmat`` computes, bit for bit (its eager function;
    compiled, it would take seconds to build here)."""
    generator = torch.Generator().manual_seed(4)
    rotations, _ = torch.linalg.qr(torch.randn(6, 3, 3, generator=generator))
    camera_to_worlds = torch.cat([rotations, torch.randn(6, 3, 1, generator=generator)], 2)
    eager_get_viewmat = get_viewmat._torchdynamo_orig_callable
    assert torch.equal(world_to_camera(camera_to_worlds), eager_get_viewmat(camera_to_worlds))


def test_renders_take_splatfactos_compiled_view_matrices_one_view_at_a_time():
    """The matrices odin renders with are what splatfacto's own (compiled) ``get_viewmat`` gives each view alone,
    bit for bit, whatever the eager operations round to."""
    generator = torch.Generator().manual_seed(6)
    rotations, _ = torch.linalg.qr(torch.randn(5, 3, 3, generator=generator))
    camera_to_worlds = torch.cat([rotations, 3 * torch.randn(5, 3, 1, generator=generator)], 2)
    viewmats = splatfacto_view_matrices(camera_to_worlds)
    for view in range(5):
        assert torch.equal(viewmats[view], get_viewmat(camera_to_worlds[view : view + 1])[0]), view


def test_the_view_inverses_are_gsplats_own_inverse_of_each_view():
    """What gsplat is handed instead of inverting the view matrices: for each view, bit for bit the inverse gsplat
    computes when it renders that view alone, so the SH colours' view directions are stock splatfacto's. The poses'
    own translations, the exact inverse, differ from it by rounding on these poses: an assembled inverse would fail."""
    generator = torch.Generator().manual_seed(5)
    rotations, _ = torch.linalg.qr(torch.randn(6, 3, 3, generator=generator))
    camera_to_worlds = torch.cat([rotations, torch.randn(6, 3, 1, generator=generator)], 2)
    viewmats = world_to_camera(camera_to_worlds)
    inverses = view_inverses(viewmats)
    for view in range(6):
        assert torch.equal(inverses[view], torch.inverse(viewmats[view : view + 1])[0]), view
    assert not torch.equal(inverses[:, :3, 3], camera_to_worlds[:, :3, 3])
    torch.testing.assert_close(inverses[:, :3, 3], camera_to_worlds[:, :3, 3], rtol=0, atol=1e-5)


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


def test_each_views_buckets_are_computed_once_per_bounds_age_and_learning_rate(monkeypatch):
    """A unit's views are asked for as the next unit, as this unit and as the previous unit: between two
    publications each view's frustum test runs once, and the answers are the uncached ones; a publication (the
    bounds one unit older, so wider) or a new learning rate recomputes them."""
    import odin_ns.read_prediction as read_prediction
    from odin_ns.comm.collectives import RowBuckets
    from odin_ns.sync.frustum import PinholeView, buckets_in_view

    generator = torch.Generator().manual_seed(0)
    means = torch.rand(512, 3, generator=generator) * 8 - 4
    means[:, 2] += 6  # in front of cameras at the origin looking down +z
    params = {"means": means, "scales": torch.full((512, 3), -3.0)}
    views = [PinholeView(np.eye(3), np.array([shift, 0.0, 0.0]), 60.0, 60.0, 32.0, 24.0, 64, 48)
             for shift in (-3.0, -1.0, 1.0, 3.0)]
    plan = {unit: [[unit % 4], [(unit + 1) % 4]] for unit in range(8)}  # two ranks, one view each per unit
    learning_rate = [1e-3]
    predictor = read_prediction.SplatReadPredictor(views, plan.__getitem__, rank=0, means_lr=lambda: learning_rate[0],
                                                   scales_lr=lambda: 5e-3, betas=(0.9, 0.999), near_plane=0.01,
                                                   largest_downscale=1)
    predictor.rebind(params, RowBuckets(num_rows=512, rows_per_bucket=64))
    calls = []
    monkeypatch.setattr(read_prediction, "buckets_in_view", lambda *args: calls.append(args[1]) or buckets_in_view(*args))

    def uncached(unit: int, every_rank: bool) -> np.ndarray:
        chosen = [v for rank in plan[unit] for v in rank] if every_rank else plan[unit][0]
        return np.logical_or.reduce([predictor._buckets_in_view(predictor._bounds.latest()[0],
                                                                predictor._bounds.latest()[1], v) for v in chosen])

    for unit in range(1, 6):
        calls.clear()
        asked = [(unit - 1, True), (unit, True), (unit, False), (unit + 1, True)]
        answers = [predictor.read_buckets(u, every_rank) for u, every_rank in asked]
        assert len(calls) == len({id(v) for v in calls}), "a view's frustum test ran twice between publications"
        for (u, every_rank), answer in zip(asked, answers):
            assert np.array_equal(answer, uncached(u, every_rank))
        before = len(calls)
        predictor.published(params)  # one unit older: every view is tested again, with a wider margin
        predictor.read_buckets(unit, every_rank=True)
        assert len(calls) == before + 2
    learning_rate[0] = 2e-3
    predictor.published(params, refresh=False)
    calls.clear()
    predictor.read_buckets(3, every_rank=False)
    assert len(calls) == 1
