"""Write a COLMAP sparse model from flat observation arrays.

COLMAP's binary model cross-references its parts (each image lists its 2D points and their 3D ids, each 3D point
lists its track as (image id, 2D point index)). This module builds both sides from one flat list of
(view, point, pixel) observations with array operations, so they are consistent by construction, and writes
images.bin and points3D.bin with numpy record arrays: nerfstudio's writers pack one struct per point and per
observation in Python, minutes for the benchmark scene's ~1M points and tens of millions of observations.
The bytes are the same as nerfstudio's writers produce (tested).
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import numpy as np

SHARED_CAMERA_ID = 1
PINHOLE_MODEL_ID = 1
"""COLMAP's id of the PINHOLE camera model (fx, fy, cx, cy)."""

CAMERA = np.dtype([("id", "<i4"), ("model_id", "<i4"), ("width", "<u8"), ("height", "<u8"), ("params", "<f8", 4)])
"""cameras.bin record of a PINHOLE camera (56 bytes)."""

POINT_HEADER = np.dtype(
    [("id", "<u8"), ("xyz", "<f8", 3), ("rgb", "u1", 3), ("error", "<f8"), ("track_length", "<u8")]
)
"""points3D.bin record before its track (51 bytes, unaligned as COLMAP packs it)."""
TRACK_ELEMENT = np.dtype([("image_id", "<i4"), ("point2d_idx", "<i4")])
IMAGE_HEADER = np.dtype(
    [("id", "<i4"), ("qvec", "<f8", 4), ("tvec", "<f8", 3), ("camera_id", "<i4")]
)
"""images.bin record before the image name (64 bytes)."""
POINT2D = np.dtype([("xy", "<f8", 2), ("point3d_id", "<i8")])
CHUNK_BYTES = 64 << 20
"""Padded bytes per chunk of points3D.bin records: bounds the writer's scratch memory."""


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
    max_track_length: int | None = None,
) -> int:
    """Write cameras.bin, images.bin and points3D.bin into `model_dir` and return the number of 3D points written.

    All images share one PINHOLE camera (`intrinsics` is its 3x3 K). `world_to_cameras` is [V,4,4] in COLMAP's
    (OpenCV) convention. Observation arrays are parallel: observation i says point `observation_points[i]` is seen in
    view `observation_views[i]` at pixel `observation_xys[i]` (COLMAP pixel coordinates, pixel centres at +0.5).
    Points with fewer than `min_track_length` observations are dropped, as COLMAP triangulation would; the kept
    points get consecutive ids starting at 1. `max_track_length` keeps that many evenly spread observations of a
    longer track: nerfstudio's readers parse every observation in Python (tens of seconds at ~50M observations).
    """
    num_views = len(world_to_cameras)
    if len(image_names) != num_views:
        raise ValueError(f"got {len(image_names)} image names for {num_views} views")
    if not len(observation_views) == len(observation_points) == len(observation_xys):
        raise ValueError("observation_views, observation_points and observation_xys must have the same length")
    if max_track_length is not None and max_track_length < min_track_length:
        raise ValueError(f"max_track_length {max_track_length} is below min_track_length {min_track_length}")

    track_lengths = np.bincount(observation_points, minlength=len(points_xyz))
    kept_points = track_lengths >= min_track_length
    point3d_ids = np.cumsum(kept_points)  # 1-based id of each kept point
    kept_observations = kept_points[observation_points]
    views = np.asarray(observation_views[kept_observations], dtype=np.int64)
    points = np.asarray(observation_points[kept_observations], dtype=np.int64)
    xys = observation_xys[kept_observations]

    # A point's 2D index in an image is its position among that image's observations, in (view, point) order.
    # One stable sort of a combined key equals np.lexsort((points, views)) and is linear on presorted input.
    by_view = np.argsort(views * len(points_xyz) + points, kind="stable")
    views, points, xys = views[by_view], points[by_view], xys[by_view]
    if max_track_length is not None:
        views, points, xys = _spread_tracks(views, points, xys, len(points_xyz), max_track_length)
    track_lengths = np.bincount(points, minlength=len(points_xyz))
    observations_per_view = np.bincount(views, minlength=num_views)
    view_starts = np.concatenate([[0], np.cumsum(observations_per_view)[:-1]])
    point2d_indices = np.arange(len(views)) - view_starts[views]

    camera = np.zeros(1, CAMERA)
    camera["id"], camera["model_id"], camera["width"], camera["height"] = SHARED_CAMERA_ID, PINHOLE_MODEL_ID, width, height
    camera["params"] = [intrinsics[0, 0], intrinsics[1, 1], intrinsics[0, 2], intrinsics[1, 2]]
    model_dir.mkdir(parents=True, exist_ok=True)
    with open(model_dir / "cameras.bin", "wb") as file:
        file.write(np.uint64(len(camera)).astype("<u8").tobytes())
        file.write(camera.tobytes())

    with open(model_dir / "images.bin", "wb") as file:
        file.write(np.uint64(num_views).astype("<u8").tobytes())
        for view in range(num_views):
            header = np.zeros(1, IMAGE_HEADER)
            header["id"] = view + 1
            header["qvec"] = rotation_to_qvec(world_to_cameras[view, :3, :3])
            header["tvec"] = world_to_cameras[view, :3, 3]
            header["camera_id"] = SHARED_CAMERA_ID
            observed = slice(view_starts[view], view_starts[view] + observations_per_view[view])
            points2d = np.empty(observations_per_view[view], POINT2D)
            points2d["xy"] = xys[observed]
            points2d["point3d_id"] = point3d_ids[points[observed]]
            file.write(header.tobytes())
            file.write(image_names[view].encode("utf-8") + b"\x00")
            file.write(np.uint64(len(points2d)).astype("<u8").tobytes())
            file.write(points2d.tobytes())

    # Tracks in (point, view) order: a stable sort by point of the (view, point)-ordered observations.
    by_point = np.argsort(points, kind="stable")
    track = np.empty(len(points), TRACK_ELEMENT)
    track["image_id"] = views[by_point] + 1
    track["point2d_idx"] = point2d_indices[by_point]
    kept = np.flatnonzero(kept_points)
    with open(model_dir / "points3D.bin", "wb") as file:
        file.write(np.uint64(len(kept)).astype("<u8").tobytes())
        _write_point_records(file, kept, point3d_ids, points_xyz, points_rgb, track_lengths, track)
    return len(kept)


def rotation_to_qvec(rotation: np.ndarray) -> np.ndarray:
    """COLMAP's (w, x, y, z) quaternion of a 3x3 rotation, w >= 0, computed as COLMAP's read_write_model.py does
    (the eigenvector of Bar-Itzhack's symmetric matrix), so the written poses are the bytes COLMAP's scripts write."""
    rxx, ryx, rzx, rxy, ryy, rzy, rxz, ryz, rzz = rotation.flat
    symmetric = np.array(
        [
            [rxx - ryy - rzz, 0, 0, 0],
            [ryx + rxy, ryy - rxx - rzz, 0, 0],
            [rzx + rxz, rzy + ryz, rzz - rxx - ryy, 0],
            [ryz - rzy, rzx - rxz, rxy - ryx, rxx + ryy + rzz],
        ]
    ) / 3.0
    eigenvalues, eigenvectors = np.linalg.eigh(symmetric)
    qvec = eigenvectors[[3, 0, 1, 2], np.argmax(eigenvalues)]
    return -qvec if qvec[0] < 0 else qvec


def _spread_tracks(
    views: np.ndarray, points: np.ndarray, xys: np.ndarray, num_points: int, max_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep at most `max_length` observations per point, evenly spread over its track; order is preserved."""
    by_point = np.argsort(points, kind="stable")
    lengths = np.bincount(points, minlength=num_points)
    sorted_points = points[by_point]
    rank = np.arange(len(points)) - (np.cumsum(lengths) - lengths)[sorted_points]
    length = lengths[sorted_points]
    # Ranks where floor(rank * max_length / length) steps up: exactly max_length of them, evenly spaced.
    chosen = (length <= max_length) | ((rank + 1) * max_length // length > rank * max_length // length)
    keep = np.zeros(len(points), dtype=bool)
    keep[by_point[chosen]] = True
    return views[keep], points[keep], xys[keep]


def _write_point_records(
    file: BinaryIO,
    kept: np.ndarray,
    point3d_ids: np.ndarray,
    points_xyz: np.ndarray,
    points_rgb: np.ndarray,
    track_lengths: np.ndarray,
    track: np.ndarray,
) -> None:
    """points3D.bin records are variable-length (header + track), so each chunk of points is laid out as padded
    rows [header | longest track] and the valid bytes read out row-major with a mask."""
    lengths = track_lengths[kept]
    track_starts = np.concatenate([[0], np.cumsum(lengths)])
    first = 0
    while first < len(kept):
        # Grow the chunk while its padded size stays under CHUNK_BYTES (at least one point per chunk).
        window = lengths[first : first + CHUNK_BYTES // POINT_HEADER.itemsize]
        running_max = np.maximum.accumulate(window)
        row_bytes = POINT_HEADER.itemsize + TRACK_ELEMENT.itemsize * running_max
        padded = row_bytes * np.arange(1, len(running_max) + 1)
        last = first + max(1, int(np.searchsorted(padded, CHUNK_BYTES, side="right")))
        chunk = kept[first:last]
        chunk_lengths = lengths[first:last]
        longest = int(chunk_lengths.max())

        header = np.zeros(len(chunk), POINT_HEADER)
        header["id"] = point3d_ids[chunk]
        header["xyz"] = points_xyz[chunk]
        header["rgb"] = points_rgb[chunk]
        header["track_length"] = chunk_lengths
        tracks = np.zeros((len(chunk), longest), TRACK_ELEMENT)
        tracks[np.arange(longest) < chunk_lengths[:, None]] = track[track_starts[first] : track_starts[last]]
        rows = np.concatenate(
            [header.view(np.uint8).reshape(len(chunk), -1), tracks.view(np.uint8).reshape(len(chunk), -1)], axis=1
        )
        valid = np.arange(rows.shape[1]) < POINT_HEADER.itemsize + TRACK_ELEMENT.itemsize * chunk_lengths[:, None]
        file.write(rows[valid].tobytes())
        first = last
