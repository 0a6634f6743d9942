"""The demo scene is a valid COLMAP dataset (nerfstudio and pycolmap agree on it) with real, occlusion-aware tracks
and view locality, generated deterministically and never over an existing directory by accident."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pycolmap
import pytest
import tyro
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig
from nerfstudio.data.utils import colmap_parsing_utils as colmap_utils
from PIL import Image
from scipy.spatial import cKDTree

from odin_ns.data import demo_scene
from odin_ns.data.demo_scene import (
    COLMAP_MODEL_DIR,
    LARGER_DEMO_SCENE,
    OBJECT_RADIUS,
    SCENE_GAUSSIANS_FILE,
    DemoSceneCommand,
    DemoSceneOptions,
    SceneGaussians,
    build_cameras,
    build_scene_gaussians,
    generate_demo_scene,
)

SMALL_SCENE = dict(num_views=16, width=64, height=48, gaussians_per_region=300, num_points3d=1500)
TINY_SCENE = dict(
    num_views=3, width=32, height=24, gaussians_per_region=40, ground_gaussians_per_region=8, num_points3d=200
)


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory) -> Path:
    return generate_demo_scene(tmp_path_factory.mktemp("demo") / "scene", **SMALL_SCENE)


@pytest.fixture(scope="module")
def reconstruction(scene_dir) -> pycolmap.Reconstruction:
    return pycolmap.Reconstruction(str(scene_dir / COLMAP_MODEL_DIR))


def _observations(reconstruction: pycolmap.Reconstruction):
    """(image, 3D point id, 2D xy) for every 2D point that has a 3D point."""
    return [
        (image, point2d.point3D_id, np.asarray(point2d.xy))
        for image in reconstruction.images.values()
        for point2d in image.points2D
        if point2d.has_point3D()
    ]


def test_nerfstudio_colmap_dataparser_loads_images_and_seed_points(scene_dir):
    config = ColmapDataParserConfig(
        data=scene_dir, colmap_path=COLMAP_MODEL_DIR, load_3D_points=True, eval_mode="all"
    )
    outputs = config.setup().get_dataparser_outputs(split="train")
    points3d = colmap_utils.read_points3D_binary(scene_dir / COLMAP_MODEL_DIR / "points3D.bin")

    assert len(outputs.image_filenames) == SMALL_SCENE["num_views"]
    assert all(path.is_file() and path.name.startswith("frame_") for path in outputs.image_filenames)
    assert outputs.cameras.width.unique().tolist() == [SMALL_SCENE["width"]]
    assert outputs.metadata["points3D_xyz"].shape == (len(points3d), 3)
    assert len(points3d) > 300
    assert (outputs.metadata["points3D_num_points2D"] >= 2).all()


def test_pycolmap_agrees_with_nerfstudio_on_points_and_tracks(scene_dir, reconstruction):
    points3d = colmap_utils.read_points3D_binary(scene_dir / COLMAP_MODEL_DIR / "points3D.bin")
    images = colmap_utils.read_images_binary(scene_dir / COLMAP_MODEL_DIR / "images.bin")

    assert reconstruction.num_images() == len(images) == SMALL_SCENE["num_views"]
    assert reconstruction.num_points3D() == len(points3d)
    for point_id, point in points3d.items():
        track = reconstruction.points3D[point_id].track
        assert track.length() == len(point.image_ids) >= 2
        for element in track.elements:  # each track element points back at a 2D point that names this 3D point
            assert images[element.image_id].point3D_ids[element.point2D_idx] == point_id
    assert sum(len(image.point3D_ids) for image in images.values()) == reconstruction.compute_num_observations()


def test_tracks_project_inside_their_images_at_their_2d_points(reconstruction):
    observations = _observations(reconstruction)
    assert len(observations) > 1000
    for image, point_id, xy in observations:
        projected = image.project_point(reconstruction.points3D[point_id].xyz)
        assert projected is not None  # in front of the camera
        assert np.allclose(projected, xy, atol=1e-6)
        assert 0 <= xy[0] < SMALL_SCENE["width"] and 0 <= xy[1] < SMALL_SCENE["height"]


def test_tracks_leave_out_occluded_points(scene_dir, reconstruction):
    """Region 0 is a sphere: points on its far side from a camera are hidden by its near side."""
    scene = SceneGaussians.load(scene_dir / SCENE_GAUSSIANS_FILE)
    centre = scene.region_centers[0].astype(np.float64)
    sphere_gaussians = scene.means[(scene.region_ids == 0) & ~scene.is_ground]
    assert np.allclose(np.linalg.norm(sphere_gaussians - centre, axis=1), OBJECT_RADIUS, atol=1e-4)

    facing = []
    for image, point_id, _ in _observations(reconstruction):
        point = reconstruction.points3D[point_id].xyz
        if abs(np.linalg.norm(point - centre) - OBJECT_RADIUS) < 0.05:
            to_camera = image.projection_center() - point
            facing.append(np.dot(point - centre, to_camera) / (OBJECT_RADIUS * np.linalg.norm(to_camera)))
    facing = np.array(facing)
    assert len(facing) > 200
    assert (facing < -0.2).mean() < 0.01


def test_most_views_see_the_region_they_circle_predominantly(scene_dir, reconstruction):
    scene = SceneGaussians.load(scene_dir / SCENE_GAUSSIANS_FILE)
    target_regions = build_cameras(DemoSceneOptions(**SMALL_SCENE), scene.region_centers).target_regions
    point_ids = np.array(list(reconstruction.points3D))
    _, nearest = cKDTree(scene.means).query([reconstruction.points3D[i].xyz for i in point_ids])
    region_of_point = dict(zip(point_ids.tolist(), scene.region_ids[nearest].tolist()))

    dominant_regions, dominant_shares, regions_seen = [], [], []
    for image_id in sorted(reconstruction.images):
        image = reconstruction.images[image_id]
        regions = [region_of_point[p.point3D_id] for p in image.points2D if p.has_point3D()]
        shares = np.bincount(regions, minlength=len(scene.region_centers)) / len(regions)
        dominant_regions.append(shares.argmax())
        dominant_shares.append(shares.max())
        regions_seen.append((shares > 0.1).sum())
    ring_views = target_regions >= 0
    assert ring_views.mean() >= 0.8
    assert (np.array(dominant_regions)[ring_views] == target_regions[ring_views]).mean() >= 0.9
    assert np.mean(np.array(dominant_shares)[ring_views] >= 0.6) >= 0.8
    assert np.mean(np.array(regions_seen) == len(scene.region_centers)) <= 0.25  # only the few wide views


def test_images_are_rgba_renders_with_content(scene_dir):
    paths = sorted((scene_dir / "images").glob("*.png"))
    assert [path.name for path in paths] == [f"frame_{i:05d}.png" for i in range(1, SMALL_SCENE["num_views"] + 1)]
    for path in paths:
        rgba = np.asarray(Image.open(path))
        assert rgba.shape == (SMALL_SCENE["height"], SMALL_SCENE["width"], 4)
        opaque = rgba[..., 3] > 128
        assert opaque.mean() > 0.3
        assert rgba[opaque][:, :3].astype(float).std() > 10


def test_scene_gaussians_are_exported(scene_dir):
    scene = SceneGaussians.load(scene_dir / SCENE_GAUSSIANS_FILE)
    objects = SMALL_SCENE["gaussians_per_region"] * 4
    assert len(scene.means) == objects + 64 * 4
    assert scene.is_ground.sum() == 64 * 4
    assert np.bincount(scene.region_ids[~scene.is_ground]).tolist() == [SMALL_SCENE["gaussians_per_region"]] * 4
    assert np.allclose(np.linalg.norm(scene.quats, axis=1), 1.0, atol=1e-5)
    assert ((scene.opacities > 0) & (scene.opacities < 1)).all() and (scene.scales > 0).all()
    assert ((scene.colors >= 0) & (scene.colors <= 1)).all()


def _file_contents(directory: Path) -> dict:
    return {path.relative_to(directory): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()}


def test_same_seed_gives_identical_files_and_another_seed_differs(tmp_path):
    first = _file_contents(generate_demo_scene(tmp_path / "a", seed=3, **TINY_SCENE))
    second = _file_contents(generate_demo_scene(tmp_path / "b", seed=3, **TINY_SCENE))
    other = _file_contents(generate_demo_scene(tmp_path / "c", seed=4, **TINY_SCENE))
    assert first == second
    assert first[Path(SCENE_GAUSSIANS_FILE)] != other[Path(SCENE_GAUSSIANS_FILE)]


def test_refuses_to_write_into_a_non_empty_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not empty; pass --overwrite"):
        generate_demo_scene(tmp_path, **TINY_SCENE)
    with pytest.raises(FileExistsError, match="is not a demo scene"):
        generate_demo_scene(tmp_path, overwrite=True, **TINY_SCENE)
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_overwrite_replaces_an_earlier_demo_scene(tmp_path):
    generate_demo_scene(tmp_path / "scene", seed=1, **TINY_SCENE)
    before = _file_contents(tmp_path / "scene")
    generate_demo_scene(tmp_path / "scene", seed=2, overwrite=True, **TINY_SCENE)
    assert _file_contents(tmp_path / "scene") != before
    assert [path.name for path in tmp_path.iterdir()] == ["scene"]


def test_failed_generation_leaves_nothing_behind(tmp_path, monkeypatch):
    def failing_render(*args, **kwargs):
        raise RuntimeError("renderer broke")

    monkeypatch.setattr(demo_scene, "render_views", failing_render)
    with pytest.raises(RuntimeError, match="renderer broke"):
        generate_demo_scene(tmp_path / "scene", **TINY_SCENE)
    assert list(tmp_path.iterdir()) == []


def test_command_line_writes_scene_and_refuses_a_second_time(tmp_path):
    args = [str(tmp_path / "scene")] + [f"--{name.replace('_', '-')}={value}" for name, value in TINY_SCENE.items()]
    tyro.cli(DemoSceneCommand, args=args).main()
    assert (tmp_path / "scene" / COLMAP_MODEL_DIR / "points3D.bin").is_file()
    with pytest.raises(SystemExit, match="^error: .* is not empty; pass --overwrite"):
        tyro.cli(DemoSceneCommand, args=args).main()
    tyro.cli(DemoSceneCommand, args=args + ["--overwrite"]).main()


def test_invalid_options_are_rejected_with_the_option_name():
    with pytest.raises(ValueError, match="num_views must be at least 1"):
        generate_demo_scene("unused", num_views=0)


def test_larger_preset_builds_a_million_gaussians_and_hundreds_of_views():
    scene = build_scene_gaussians(LARGER_DEMO_SCENE)
    cameras = build_cameras(LARGER_DEMO_SCENE, scene.region_centers)
    assert len(scene.means) >= 1_000_000
    assert len(np.unique(scene.region_ids)) == LARGER_DEMO_SCENE.num_regions >= 4
    assert cameras.world_to_cameras.shape == (LARGER_DEMO_SCENE.num_views, 4, 4) and LARGER_DEMO_SCENE.num_views >= 200
    assert (LARGER_DEMO_SCENE.width, LARGER_DEMO_SCENE.height) == (1280, 720)
    assert cameras.intrinsics[0, 2] == 640 and cameras.intrinsics[1, 2] == 360


def test_dense_regions_hold_factor_times_the_gaussians_and_the_rest_is_unchanged():
    base = DemoSceneOptions(num_regions=4, gaussians_per_region=100, ground_gaussians_per_region=10)
    uneven = build_scene_gaussians(dataclasses.replace(base, dense_region_factor=3))
    per_region = np.bincount(uneven.region_ids[~uneven.is_ground], minlength=4)
    assert per_region.tolist() == [300, 100, 300, 100]
    assert len(uneven.means) == 800 + 40 and uneven.is_ground.sum() == 40
    even = build_scene_gaussians(base)
    assert np.bincount(even.region_ids[~even.is_ground]).tolist() == [100] * 4
    with pytest.raises(ValueError, match="dense_region_factor must be at least 1"):
        DemoSceneOptions(dense_region_factor=0)
