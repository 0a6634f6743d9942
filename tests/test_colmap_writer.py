"""The vectorised COLMAP writer writes the same bytes as nerfstudio's per-point writers, and COLMAP readers
(pycolmap, nerfstudio) read it back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pycolmap
import pytest
from nerfstudio.data.utils import colmap_parsing_utils as colmap_utils

from odin_ns.colmap import writer as colmap_writer
from odin_ns.colmap.writer import SHARED_CAMERA_ID, write_colmap_model
from odin_ns.data.demo_scene import DemoSceneOptions, build_cameras, build_scene_gaussians, sample_surface_points


def _write_with_nerfstudio(model_dir: Path, *, intrinsics, width, height, world_to_cameras, image_names, points_xyz,
                           points_rgb, observation_views, observation_points, observation_xys) -> int:
    """The writer as it was: nerfstudio's Image / Point3D structures and binary writers."""
    num_views = len(world_to_cameras)
    track_lengths = np.bincount(observation_points, minlength=len(points_xyz))
    kept_points = track_lengths >= 2
    point3d_ids = np.cumsum(kept_points)
    kept = kept_points[observation_points]
    views, points, xys = observation_views[kept], observation_points[kept], observation_xys[kept]
    by_view = np.lexsort((points, views))
    views, points, xys = views[by_view], points[by_view], xys[by_view]
    per_view = np.bincount(views, minlength=num_views)
    view_starts = np.concatenate([[0], np.cumsum(per_view)[:-1]])
    point2d_indices = np.arange(len(views)) - view_starts[views]
    fx, fy, cx, cy = intrinsics[0, 0], intrinsics[1, 1], intrinsics[0, 2], intrinsics[1, 2]
    params = np.array([fx, fy, cx, cy])
    cameras = {1: colmap_utils.Camera(id=1, model="PINHOLE", width=width, height=height, params=params)}
    view_xys = np.split(xys, view_starts[1:])
    view_ids = np.split(point3d_ids[points], view_starts[1:])
    images = {
        v + 1: colmap_utils.Image(
            id=v + 1, qvec=colmap_utils.rotmat2qvec(world_to_cameras[v, :3, :3]),
            tvec=world_to_cameras[v, :3, 3].astype(np.float64), camera_id=SHARED_CAMERA_ID, name=image_names[v],
            xys=view_xys[v], point3D_ids=view_ids[v],
        )
        for v in range(num_views)
    }
    by_point = np.lexsort((views, points))
    splits = np.cumsum(np.bincount(points, minlength=len(points_xyz)))[:-1]
    image_ids = np.split(views[by_point] + 1, splits)
    point2d_idxs = np.split(point2d_indices[by_point], splits)
    points3d = {
        int(point3d_ids[p]): colmap_utils.Point3D(
            id=int(point3d_ids[p]), xyz=points_xyz[p].astype(np.float64), rgb=points_rgb[p], error=0.0,
            image_ids=image_ids[p], point2D_idxs=point2d_idxs[p],
        )
        for p in np.flatnonzero(kept_points)
    }
    model_dir.mkdir(parents=True)
    colmap_utils.write_cameras_binary(cameras, model_dir / "cameras.bin")
    colmap_utils.write_images_binary(images, model_dir / "images.bin")
    colmap_utils.write_points3D_binary(points3d, model_dir / "points3D.bin")
    return len(points3d)


@pytest.fixture(scope="module")
def model_inputs() -> dict:
    """The default scene's cameras and points with random (not rendered) observations: a mix of track lengths,
    including points seen once (dropped) and views seeing nothing."""
    options = DemoSceneOptions()
    scene = build_scene_gaussians(options)
    cameras = build_cameras(options, scene.region_centers)
    rng = np.random.default_rng(7)
    points, colors = sample_surface_points(scene, options.num_points3d, rng)
    views, point_ids = [], []
    for view in range(options.num_views - 2):  # the last two views observe nothing
        seen = np.flatnonzero(rng.uniform(size=len(points)) < rng.uniform(0.0, 0.3))
        views.append(np.full(len(seen), view))
        point_ids.append(seen)
    views, point_ids = np.concatenate(views), np.concatenate(point_ids)
    return dict(
        intrinsics=cameras.intrinsics, width=options.width, height=options.height,
        world_to_cameras=cameras.world_to_cameras,
        image_names=[f"frame_{view + 1:05d}.png" for view in range(options.num_views)],
        points_xyz=points, points_rgb=colors, observation_views=views, observation_points=point_ids,
        observation_xys=rng.uniform(0, options.width, (len(views), 2)),
    )


@pytest.mark.parametrize("chunk_bytes", [colmap_writer.CHUNK_BYTES, 4096])
def test_vectorised_writer_matches_nerfstudio_byte_for_byte(tmp_path, model_inputs, monkeypatch, chunk_bytes):
    monkeypatch.setattr(colmap_writer, "CHUNK_BYTES", chunk_bytes)  # small chunks: many padded chunks of points
    expected = _write_with_nerfstudio(tmp_path / "nerfstudio", **model_inputs)
    written = write_colmap_model(tmp_path / "vectorised", **model_inputs)
    assert written == expected and 1000 < written < len(model_inputs["points_xyz"])
    for name in ("cameras.bin", "images.bin", "points3D.bin"):
        assert (tmp_path / "vectorised" / name).read_bytes() == (tmp_path / "nerfstudio" / name).read_bytes(), name


def test_readers_read_the_vectorised_model_back(tmp_path, model_inputs):
    model_dir = tmp_path / "model"
    written = write_colmap_model(model_dir, **model_inputs)
    points3d = colmap_utils.read_points3D_binary(model_dir / "points3D.bin")
    images = colmap_utils.read_images_binary(model_dir / "images.bin")
    reconstruction = pycolmap.Reconstruction(str(model_dir))
    assert len(points3d) == reconstruction.num_points3D() == written
    assert len(images) == reconstruction.num_images() == len(model_inputs["image_names"])
    for point_id in (1, written // 2, written):
        point, track = points3d[point_id], reconstruction.points3D[point_id].track
        assert np.array_equal(point.xyz, reconstruction.points3D[point_id].xyz)
        assert [(e.image_id, e.point2D_idx) for e in track.elements] == list(zip(point.image_ids, point.point2D_idxs))
        for image_id, point2d_idx in zip(point.image_ids, point.point2D_idxs):
            assert images[image_id].point3D_ids[point2d_idx] == point_id
    assert images[len(images)].name == model_inputs["image_names"][-1] and len(images[len(images)].xys) == 0


def test_capped_tracks_keep_every_point_and_stay_consistent(tmp_path, model_inputs):
    full = write_colmap_model(tmp_path / "full", **model_inputs)
    capped = write_colmap_model(tmp_path / "capped", max_track_length=3, **model_inputs)
    assert capped == full
    full_points = colmap_utils.read_points3D_binary(tmp_path / "full" / "points3D.bin")
    reconstruction = pycolmap.Reconstruction(str(tmp_path / "capped"))
    images = colmap_utils.read_images_binary(tmp_path / "capped" / "images.bin")
    for point_id, point in reconstruction.points3D.items():
        full_views = list(full_points[point_id].image_ids)
        views = [element.image_id for element in point.track.elements]
        assert len(views) == min(3, len(full_views)) and set(views) <= set(full_views)
        for element in point.track.elements:
            assert images[element.image_id].point3D_ids[element.point2D_idx] == point_id
    with pytest.raises(ValueError, match="max_track_length 1 is below"):
        write_colmap_model(tmp_path / "bad", max_track_length=1, **model_inputs)
