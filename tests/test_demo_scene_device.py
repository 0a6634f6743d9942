"""The demo scene's device option and presets: "auto" falls back to the CPU reference with unchanged bytes, the
GPU-side observation rule equals the numpy one, and `--preset large` is the benchmark scene."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import tyro

from odin_ns.data import demo_scene
from odin_ns.data.demo_scene import (
    LARGER_DEMO_SCENE,
    DemoSceneCommand,
    DemoSceneOptions,
    build_cameras,
    build_scene_gaussians,
    frustum_fractions,
    generate_demo_scene,
    observe_points,
    render_views,
    resolve_device,
    sample_surface_points,
)

TINY_SCENE = dict(
    num_views=3, width=32, height=24, gaussians_per_region=40, ground_gaussians_per_region=8, num_points3d=200
)


def _file_contents(directory: Path) -> dict:
    return {path.relative_to(directory): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()}


def test_device_option_resolves_and_rejects_bad_names():
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert DemoSceneOptions().device == "auto"
    with pytest.raises(ValueError, match="device must be 'auto' or a torch device"):
        DemoSceneOptions(device="gpu0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="auto means cuda here, whose bytes differ from the CPU's")
def test_auto_device_on_a_cpu_machine_writes_the_same_bytes_as_cpu(tmp_path):
    auto = _file_contents(generate_demo_scene(tmp_path / "auto", **TINY_SCENE))
    cpu = _file_contents(generate_demo_scene(tmp_path / "cpu", device="cpu", **TINY_SCENE))
    assert auto == cpu


def test_device_side_observations_match_the_numpy_rule():
    """observe_points on torch tensors (the CUDA path), run on CPU tensors, picks the same points at the same pixels
    as on numpy arrays."""
    options = DemoSceneOptions(num_views=8, width=64, height=48, gaussians_per_region=300, num_points3d=1500)
    scene = build_scene_gaussians(options)
    cameras = build_cameras(options, scene.region_centers)
    points, _ = sample_surface_points(scene, options.num_points3d, np.random.default_rng(0))
    names = ("means", "quats", "scales", "opacities", "colors")
    tensors = {name: torch.from_numpy(getattr(scene, name)) for name in names}
    rgba, alphas, depths = render_views(
        tensors, cameras.world_to_cameras, cameras.intrinsics, options.width, options.height
    )
    assert rgba.dtype == torch.uint8 and rgba.shape == (options.num_views, options.height, options.width, 4)
    total = 0
    for view in range(options.num_views):
        expected, expected_pixels = observe_points(
            points, cameras.world_to_cameras[view], cameras.intrinsics, alphas[view].numpy(), depths[view].numpy()
        )
        observed, pixels = observe_points(
            torch.from_numpy(points),
            torch.from_numpy(cameras.world_to_cameras[view]),
            torch.from_numpy(cameras.intrinsics),
            alphas[view],
            depths[view],
        )
        assert np.array_equal(observed, expected)
        assert np.allclose(pixels, expected_pixels, rtol=0, atol=1e-9)
        total += len(observed)
    assert total > 1000


def test_preset_large_is_the_benchmark_scene_and_flags_override_it():
    command = tyro.cli(DemoSceneCommand, args=["out", "--preset", "large"])
    assert command.options() == LARGER_DEMO_SCENE
    command = tyro.cli(DemoSceneCommand, args=["out", "--preset", "large", "--num-views", "12", "--device", "cpu"])
    assert command.options() == DemoSceneOptions(**{**vars(LARGER_DEMO_SCENE), "num_views": 12, "device": "cpu"})
    assert tyro.cli(DemoSceneCommand, args=["out"]).options() == DemoSceneOptions()


def test_large_preset_seeds_over_a_million_points_and_views_see_under_half_the_scene():
    """splatfacto starts with one Gaussian per COLMAP point; Odin's scoped exchange needs views to see < 50%.
    Strided Gaussians keep this fast; the fraction of a 1/64 sample is within a percent of the full one."""
    assert LARGER_DEMO_SCENE.num_points3d >= 1_200_000
    scene = build_scene_gaussians(LARGER_DEMO_SCENE)
    cameras = build_cameras(LARGER_DEMO_SCENE, scene.region_centers)
    width, height = LARGER_DEMO_SCENE.width, LARGER_DEMO_SCENE.height
    fractions = frustum_fractions(scene.means[::64], cameras.world_to_cameras, cameras.intrinsics, width, height)
    ring = cameras.target_regions >= 0
    assert fractions.mean() < 0.5
    assert fractions[ring].max() < 0.5 and fractions[~ring].min() > 0.9


def test_large_images_are_written_with_fast_compression(tmp_path, monkeypatch):
    saved = {}
    monkeypatch.setattr(demo_scene.Image.Image, "save", lambda image, path, **options: saved.update({path: options}))
    demo_scene._save_png(tmp_path / "small.png", np.zeros((96, 128, 4), np.uint8))
    demo_scene._save_png(tmp_path / "large.png", np.zeros((720, 1280, 4), np.uint8))
    assert saved == {tmp_path / "small.png": {}, tmp_path / "large.png": {"compress_level": 1}}
