"""Startup cost at a million SfM points: nerfstudio's COLMAP readers and sklearn kNN against odin-ns' vectorised
readers and k-d tree, side by side on a synthetic model of the large preset's size (written once, no images).

Usage: ``python -m odin_bench.colmap_readers [--points 1290820] [--views 240] [--track-length 8]``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import tyro


@dataclass
class ColmapReadersCommand:
    """Time reading a COLMAP model and the initial kNN both ways."""

    model_dir: Path = Path("/tmp/odin_colmap_readers")
    """Where the synthetic model is written (reused when present)."""
    points: int = 1_290_820
    views: int = 240
    track_length: int = 8
    """Observations per point (the large preset caps tracks at 8)."""

    def main(self) -> None:
        import torch
        from nerfstudio.data.utils import colmap_parsing_utils
        from nerfstudio.models.splatfacto import SplatfactoModel
        from scipy.spatial import cKDTree

        from odin_ns.colmap.reader import read_images_binary_headers, read_points3d_binary, read_tracks

        if not (self.model_dir / "points3D.bin").exists():
            self._write_model()
        points_file, images_file = self.model_dir / "points3D.bin", self.model_dir / "images.bin"
        xyz = torch.from_numpy(read_points3d_binary(points_file).xyz.astype(np.float32))
        pairs: list[tuple[str, Callable, Callable]] = [
            ("seed points (points3D.bin)", lambda: colmap_parsing_utils.read_points3D_binary(points_file),
             lambda: read_points3d_binary(points_file)),
            ("image poses and names (images.bin)", lambda: colmap_parsing_utils.read_images_binary(images_file),
             lambda: read_images_binary_headers(images_file)),
            ("tracks for the AOT plan", lambda: _tracks_with_nerfstudio(colmap_parsing_utils, images_file),
             lambda: read_tracks(self.model_dir)),
            ("3-nearest-neighbour scales", lambda: SplatfactoModel.k_nearest_sklearn(None, xyz, 3),
             lambda: cKDTree(xyz.numpy()).query(xyz.numpy(), k=4, workers=-1)),
        ]
        print(f"{self.points} points, {self.views} views, {self.track_length} observations per point")
        print("| step | nerfstudio / sklearn (s) | odin-ns (s) |")
        print("|---|---|---|")
        for label, stock, ours in pairs:
            print(f"| {label} | {_seconds(stock):.1f} | {_seconds(ours):.1f} |")

    def _write_model(self) -> None:
        from odin_ns.colmap.writer import write_colmap_model

        rng = np.random.default_rng(0)
        views = np.concatenate([rng.choice(self.views, self.track_length, replace=False) for _ in range(self.points)])
        point_of_obs = np.repeat(np.arange(self.points), self.track_length)
        write_colmap_model(
            self.model_dir, intrinsics=np.array([[1400.0, 0, 640], [0, 1400, 360], [0, 0, 1]]), width=1280,
            height=720, world_to_cameras=np.tile(np.eye(4), (self.views, 1, 1)),
            image_names=[f"frame_{view:05d}.png" for view in range(self.views)], points_xyz=rng.random((self.points, 3)),
            points_rgb=rng.integers(0, 255, (self.points, 3), dtype=np.uint8), observation_views=views,
            observation_points=point_of_obs, observation_xys=rng.random((len(point_of_obs), 2)) * 700,
        )


def _tracks_with_nerfstudio(colmap_parsing_utils, images_file: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The tracks (image names, then each observation's image and point) through nerfstudio's per-image reader."""
    images = colmap_parsing_utils.read_images_binary(images_file)
    names, views, points = [], [], []
    for view, image in enumerate(images.values()):
        names.append(image.name)
        ids = image.point3D_ids[image.point3D_ids >= 0]
        views.append(np.full(len(ids), view))
        points.append(ids)
    return names, np.concatenate(views), np.concatenate(points)


def _seconds(function: Callable) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


if __name__ == "__main__":
    tyro.cli(ColmapReadersCommand).main()
