"""Which points each training view observes: the raw material of the Relative Locality Graph.

Three sources, best first:

* ``sfm-tracks``: the tracks of a COLMAP reconstruction (exact co-observation, occlusion included);
* ``seed-points``: the seed point cloud projected into every camera (inside the image, in front of it;
  no occlusion), for datasets such as nerfstudio ``transforms.json`` that ship points but no tracks;
* ``camera-frusta``: points sampled along each camera's frustum, projected into every camera (geometry only).

All three produce the same thing, a sparse view x point incidence matrix, so the graph code downstream is
source-agnostic. Views are the dataset's training views in dataset order, matched to reconstruction images by
file name, never by COLMAP image id.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from odin_ns.colmap.reader import has_tracks, read_tracks

logger = logging.getLogger(__name__)

SFM_TRACKS = "sfm-tracks"
SEED_POINTS = "seed-points"
CAMERA_FRUSTA = "camera-frusta"

MAX_PROJECTED_POINTS = 200_000
"""Seed points projected for co-visibility: projection costs views x points, and a random subset of this size
already gives every view hundreds of hits, which is all a Jaccard overlap needs."""

_PROJECTION_CHUNK = 1 << 22
"""Views x points projected per numpy batch: bounds the temporary arrays to a few tens of MB."""


@dataclass(frozen=True)
class Observations:
    """Which points each training view sees, and where that knowledge came from."""

    incidence: sp.csr_matrix
    """(views, points) matrix with a 1 where the view observes the point."""
    source: str
    """One of ``sfm-tracks``, ``seed-points``, ``camera-frusta``."""

    @property
    def num_views(self) -> int:
        return self.incidence.shape[0]


@dataclass(frozen=True)
class ViewCameras:
    """Pinhole cameras of the training views in nerfstudio's convention (OpenGL: looking down -z, y up)."""

    camera_to_world: np.ndarray
    """(views, 3, 4) rotation and position of each camera."""
    fx: np.ndarray
    fy: np.ndarray
    cx: np.ndarray
    cy: np.ndarray
    width: np.ndarray
    height: np.ndarray

    def __len__(self) -> int:
        return len(self.camera_to_world)

    @property
    def positions(self) -> np.ndarray:
        return self.camera_to_world[:, :, 3]

    @classmethod
    def from_nerfstudio(cls, cameras) -> ViewCameras:
        """Copy the fields the schedule needs out of a (flat) nerfstudio ``Cameras``."""

        def flat(values) -> np.ndarray:
            return values.detach().cpu().numpy().reshape(-1).astype(np.float64)

        return cls(
            camera_to_world=cameras.camera_to_worlds.detach().cpu().numpy().reshape(-1, 3, 4).astype(np.float64),
            fx=flat(cameras.fx),
            fy=flat(cameras.fy),
            cx=flat(cameras.cx),
            cy=flat(cameras.cy),
            width=flat(cameras.width),
            height=flat(cameras.height),
        )


def view_names(paths: Sequence[Path | str]) -> list[str]:
    """Stable names for views: paths relative to the folder the images share.

    ``images/a/1.jpg`` and ``images_4/a/1.jpg`` both become ``a/1.jpg``, so a plan made from full-resolution
    images validates against a downscaled dataset.
    """
    if not paths:
        return []
    root = os.path.commonpath([str(Path(p).parent) for p in paths])
    return [Path(os.path.relpath(p, root)).as_posix() for p in paths]


def match_views_to_images(view_paths: Sequence[Path | str], image_names: Sequence[str]) -> np.ndarray:
    """For each training view, the row of the reconstruction image of the same name.

    The longest matching path suffix wins, so ``.../images_4/cam0/1.jpg`` finds COLMAP's ``cam0/1.jpg``.
    """
    row_of_name = {name: row for row, name in enumerate(image_names)}
    rows = np.empty(len(view_paths), dtype=np.int64)
    for view, path in enumerate(view_paths):
        parts = Path(path).parts
        suffixes = ("/".join(parts[-length:]) for length in range(len(parts), 0, -1))
        row = next((row_of_name[s] for s in suffixes if s in row_of_name), None)
        if row is None:
            raise ValueError(f"training view {path} has no image of that name in the COLMAP reconstruction")
        rows[view] = row
    duplicated = np.flatnonzero(np.bincount(rows, minlength=len(image_names)) > 1)
    if len(duplicated):
        raise ValueError(f"several training views match the reconstruction image {image_names[duplicated[0]]}")
    return rows


def incidence_matrix(view_of_obs: np.ndarray, point_of_obs: np.ndarray, num_views: int) -> sp.csr_matrix:
    """Binary (views, points) matrix from parallel observation arrays; repeated observations count once."""
    num_points = int(point_of_obs.max()) + 1 if len(point_of_obs) else 0
    incidence = sp.csr_matrix(
        (np.ones(len(view_of_obs), dtype=np.int32), (view_of_obs, point_of_obs)), shape=(num_views, num_points)
    )
    incidence.sum_duplicates()
    incidence.data[:] = 1
    return incidence


def sfm_observations(recon_dir: Path, view_paths: Sequence[Path | str]) -> Observations:
    """Observations of the training views from the SfM tracks; images outside the training split are ignored."""
    image_names, image_of_obs, point_of_obs = read_tracks(recon_dir)
    view_of_image = np.full(len(image_names), -1, dtype=np.int64)
    view_of_image[match_views_to_images(view_paths, image_names)] = np.arange(len(view_paths))
    view_of_obs = view_of_image[image_of_obs]
    in_training = view_of_obs >= 0
    return Observations(
        incidence_matrix(view_of_obs[in_training], point_of_obs[in_training], len(view_paths)), SFM_TRACKS
    )


def projected_incidence(cameras: ViewCameras, points: np.ndarray) -> sp.csr_matrix:
    """(views, points) matrix of which points project inside each image, in front of the camera."""
    points = np.asarray(points, dtype=np.float32)
    views_per_chunk = max(1, _PROJECTION_CHUNK // max(len(points), 1))
    rows, cols = [], []
    for start in tqdm(
        range(0, len(cameras), views_per_chunk),
        desc="projecting points into views",
        disable=len(cameras) <= views_per_chunk,
    ):
        chunk = slice(start, start + views_per_chunk)
        rotation = cameras.camera_to_world[chunk, :, :3].astype(np.float32)
        position = cameras.camera_to_world[chunk, :, 3].astype(np.float32)
        # Camera coordinates R^T (p - t); nerfstudio cameras look down -z with y up.
        in_camera = np.einsum("cpk,ckj->cpj", points[None] - position[:, None], rotation)
        depth = -in_camera[..., 2]
        in_front = depth > 1e-6
        safe_depth = np.where(in_front, depth, 1.0)
        u = cameras.fx[chunk, None] * in_camera[..., 0] / safe_depth + cameras.cx[chunk, None]
        v = -cameras.fy[chunk, None] * in_camera[..., 1] / safe_depth + cameras.cy[chunk, None]
        visible = (
            in_front
            & (u >= 0)
            & (u < cameras.width[chunk, None])
            & (v >= 0)
            & (v < cameras.height[chunk, None])
        )
        view_rows, point_cols = np.nonzero(visible)
        rows.append(view_rows + start)
        cols.append(point_cols)
    return incidence_matrix(np.concatenate(rows), np.concatenate(cols), len(cameras))


def seeded_subset(points: np.ndarray, limit: int, seed: int) -> np.ndarray:
    """``points`` as an array, or a seeded random subset of ``limit`` of them when there are more."""
    points = np.asarray(points)
    if len(points) > limit:
        points = points[np.random.default_rng(seed).choice(len(points), limit, replace=False)]
    return points


def seed_point_observations(cameras: ViewCameras, points: np.ndarray, seed: int = 0) -> Observations:
    """Co-visibility of the seed points (at most MAX_PROJECTED_POINTS of them, a seeded random subset)."""
    return Observations(projected_incidence(cameras, seeded_subset(points, MAX_PROJECTED_POINTS, seed)), SEED_POINTS)


def frustum_samples(cameras: ViewCameras, grid: int = 4, depths: int = 8) -> np.ndarray:
    """Points on a grid x grid x depths lattice inside each camera's frustum.

    Depths reach out to twice the spread of the camera positions: for object-centric captures that is past the
    object, for forward-facing ones it still spans the near field, where views that share content meet.
    """
    positions = cameras.positions
    spread = float(np.linalg.norm(positions - positions.mean(axis=0), axis=1).max()) or 1.0
    depth_values = spread * np.linspace(0.1, 2.0, depths)
    cells = (np.arange(grid) + 0.5) / grid
    grid_u, grid_v, grid_depth = np.meshgrid(cells, cells, depth_values, indexing="ij")
    u = grid_u.reshape(1, -1) * cameras.width[:, None]
    v = grid_v.reshape(1, -1) * cameras.height[:, None]
    depth = np.broadcast_to(grid_depth.reshape(1, -1), u.shape)
    in_camera = np.stack(
        [
            (u - cameras.cx[:, None]) / cameras.fx[:, None] * depth,
            -(v - cameras.cy[:, None]) / cameras.fy[:, None] * depth,
            -depth,
        ],
        axis=-1,
    )
    world = np.einsum("vij,vsj->vsi", cameras.camera_to_world[:, :, :3], in_camera) + positions[:, None]
    return world.reshape(-1, 3)


def frustum_observations(cameras: ViewCameras) -> Observations:
    """Co-visibility of frustum samples: which cameras see the space in front of which. Cost: views^2 x samples."""
    return Observations(projected_incidence(cameras, frustum_samples(cameras)), CAMERA_FRUSTA)


def collect_observations(
    view_paths: Sequence[Path | str],
    cameras: ViewCameras,
    recon_dir: Optional[Path] = None,
    seed_points: Optional[np.ndarray] = None,
    seed: int = 0,
) -> Observations:
    """Observations from the best available source: SfM tracks, then seed points, then camera frusta."""
    if len(view_paths) != len(cameras):
        raise ValueError(f"{len(view_paths)} training views but {len(cameras)} cameras")
    if recon_dir is not None and has_tracks(recon_dir):
        observations = sfm_observations(recon_dir, view_paths)
    elif seed_points is not None and len(seed_points) > 0:
        observations = seed_point_observations(cameras, seed_points, seed)
    else:
        observations = frustum_observations(cameras)
    logger.info(
        "RLG source: %s (%d views, %d observations)",
        observations.source,
        observations.num_views,
        observations.incidence.nnz,
    )
    return observations
