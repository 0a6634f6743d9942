"""Write a COLMAP sparse model from flat observation arrays.

nerfstudio's `colmap_parsing_utils` writes COLMAP's binary files but expects COLMAP's cross-referenced structures
(each image lists its 2D points and their 3D ids, each 3D point lists its track as (image id, 2D point index)).
This module builds those structures from a flat list of (view, point, pixel) observations with array operations,
so the two sides are consistent by construction, and then reuses nerfstudio's writers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nerfstudio.data.utils import colmap_parsing_utils as colmap_utils

SHARED_CAMERA_ID = 1


def write_colmap_model(
    model_dir: Path,
    *,
    intrinsics: np.ndarray,
    width: int,
    height: int,
    world_to_cameras: np.ndarray,
    image_names: list[str],
    points_xyz: np.ndarray,
    points_rgb: np.ndarray,
    observation_views: np.ndarray,
    observation_points: np.ndarray,
    observation_xys: np.ndarray,
    min_track_length: int = 2,
) -> int:
    """Write cameras.bin, images.bin and points3D.bin into `model_dir` and return the number of 3D points written.

    All images share one PINHOLE camera (`intrinsics` is its 3x3 K). `world_to_cameras` is [V,4,4] in COLMAP's
    (OpenCV) convention. Observation arrays are parallel: observation i says point `observation_points[i]` is seen in
    view `observation_views[i]` at pixel `observation_xys[i]` (COLMAP pixel coordinates, pixel centres at +0.5).
    Points with fewer than `min_track_length` observations are dropped, as COLMAP triangulation would; the kept
    points get consecutive ids starting at 1.
    """
    num_views = len(world_to_cameras)
    if len(image_names) != num_views:
        raise ValueError(f"got {len(image_names)} image names for {num_views} views")
    if not len(observation_views) == len(observation_points) == len(observation_xys):
        raise ValueError("observation_views, observation_points and observation_xys must have the same length")

    track_lengths = np.bincount(observation_points, minlength=len(points_xyz))
    kept_points = track_lengths >= min_track_length
    point3d_ids = np.cumsum(kept_points)  # 1-based id of each kept point
    kept_observations = kept_points[observation_points]
    views = observation_views[kept_observations]
    points = observation_points[kept_observations]
    xys = observation_xys[kept_observations]

    # A point's 2D index in an image is its position among that image's observations, in (view, point) order.
    by_view = np.lexsort((points, views))
    views, points, xys = views[by_view], points[by_view], xys[by_view]
    observations_per_view = np.bincount(views, minlength=num_views)
    view_starts = np.concatenate([[0], np.cumsum(observations_per_view)[:-1]])
    point2d_indices = np.arange(len(views)) - view_starts[views]

    fx, fy, cx, cy = intrinsics[0, 0], intrinsics[1, 1], intrinsics[0, 2], intrinsics[1, 2]
    cameras = {
        SHARED_CAMERA_ID: colmap_utils.Camera(
            id=SHARED_CAMERA_ID, model="PINHOLE", width=width, height=height, params=np.array([fx, fy, cx, cy])
        )
    }
    view_xys = np.split(xys, view_starts[1:])
    view_point_ids = np.split(point3d_ids[points], view_starts[1:])
    images = {
        view + 1: colmap_utils.Image(
            id=view + 1,
            qvec=colmap_utils.rotmat2qvec(world_to_cameras[view, :3, :3]),
            tvec=world_to_cameras[view, :3, 3].astype(np.float64),
            camera_id=SHARED_CAMERA_ID,
            name=image_names[view],
            xys=view_xys[view],
            point3D_ids=view_point_ids[view],
        )
        for view in range(num_views)
    }

    by_point = np.lexsort((views, points))
    track_splits = np.cumsum(np.bincount(points, minlength=len(points_xyz)))[:-1]
    track_image_ids = np.split(views[by_point] + 1, track_splits)
    track_point2d_indices = np.split(point2d_indices[by_point], track_splits)
    points3d = {
        int(point3d_ids[point]): colmap_utils.Point3D(
            id=int(point3d_ids[point]),
            xyz=points_xyz[point].astype(np.float64),
            rgb=points_rgb[point],
            error=0.0,
            image_ids=track_image_ids[point],
            point2D_idxs=track_point2d_indices[point],
        )
        for point in np.flatnonzero(kept_points)
    }

    model_dir.mkdir(parents=True, exist_ok=True)
    colmap_utils.write_cameras_binary(cameras, model_dir / "cameras.bin")
    colmap_utils.write_images_binary(images, model_dir / "images.bin")
    colmap_utils.write_points3D_binary(points3d, model_dir / "points3D.bin")
    return len(points3d)
