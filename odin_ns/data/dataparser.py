"""A dataparser that takes ``--data DIR`` as it comes: a COLMAP capture or a nerfstudio ``transforms.json`` scene.

Stock splatfacto reads ``transforms.json`` only, needs an extra ``colmap`` subcommand and flags for COLMAP captures, and
asks an interactive question when images are over 1600 px (a headless or multi-rank run hangs on it). This parser
detects the layout, validates a COLMAP capture up front with one-line errors, never prompts, and seeds the Gaussians
from the SfM points.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Literal, Optional, Type

import numpy as np
import torch

from nerfstudio.data.dataparsers.base_dataparser import DataparserOutputs
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParser, ColmapDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
from nerfstudio.data.utils import colmap_parsing_utils as colmap_io
from nerfstudio.utils.rich_utils import CONSOLE
from PIL import Image, UnidentifiedImageError
from tqdm import tqdm

from odin_ns.colmap.reader import read_images_binary_headers, read_points3d_binary

COLMAP_MODEL_DIRS = (Path("sparse/0"), Path("colmap/sparse/0"), Path("sparse"))


class DatasetError(ValueError):
    """A dataset that cannot be trained on; the message names the problem and the file."""


def find_colmap_model(data: Path) -> Optional[Path]:
    """The first of the usual COLMAP model folders under ``data`` that holds cameras and images, or None."""
    for relative in COLMAP_MODEL_DIRS:
        model = data / relative
        if any((model / f"cameras{ext}").exists() and (model / f"images{ext}").exists() for ext in (".bin", ".txt")):
            return relative
    return None


def read_colmap_cameras_and_images(model_dir: Path):
    """COLMAP cameras and images (poses, cameras, names; 2D points only from text models) of a model folder."""
    if (model_dir / "cameras.bin").exists():
        return colmap_io.read_cameras_binary(model_dir / "cameras.bin"), read_images_binary_headers(model_dir / "images.bin")
    return colmap_io.read_cameras_text(model_dir / "cameras.txt"), colmap_io.read_images_text(model_dir / "images.txt")


def count_colmap_points(model_dir: Path) -> int:
    """Number of 3D points in a COLMAP model without parsing them all (the binary header holds the count)."""
    binary = model_dir / "points3D.bin"
    if binary.exists():
        with open(binary, "rb") as handle:
            return int.from_bytes(handle.read(8), "little")
    text = model_dir / "points3D.txt"
    if not text.exists():
        raise DatasetError(f"COLMAP model has no points3D.bin or points3D.txt: {model_dir}")
    with open(text) as handle:
        return sum(1 for line in handle if line.strip() and not line.startswith("#"))


def validate_colmap_capture(data: Path, model_relative: Path, images_relative: Path, need_points: bool) -> None:
    """Check a COLMAP capture before anything is written or loaded; raise DatasetError on the first problem."""
    model_dir = data / model_relative
    cameras, images = read_colmap_cameras_and_images(model_dir)
    if not images:
        raise DatasetError(f"COLMAP model lists no images: {model_dir}")
    for image in sorted(images.values(), key=lambda im: im.id):
        path = data / images_relative / image.name
        if not path.exists():
            raise DatasetError(f"image listed in the COLMAP model is missing: {path}")
        try:
            with Image.open(path) as handle:
                size = handle.size
        except (OSError, UnidentifiedImageError) as error:
            raise DatasetError(f"unreadable image: {path} ({error})") from error
        camera = cameras[image.camera_id]
        if size != (camera.width, camera.height):
            raise DatasetError(
                f"image size {size[0]}x{size[1]} does not match its COLMAP camera {camera.id} "
                f"({camera.width}x{camera.height}): {path}"
            )
    if need_points and count_colmap_points(model_dir) == 0:
        raise DatasetError(f"COLMAP model has zero 3D points (nothing to seed the Gaussians from): {model_dir}")


@dataclass
class OdinDataParserConfig(ColmapDataParserConfig):
    """COLMAP capture or nerfstudio transforms.json, detected from the folder; COLMAP options apply to COLMAP data."""

    _target: Type = field(default_factory=lambda: OdinDataParser)
    layout: Literal["auto", "colmap", "nerfstudio"] = "auto"
    """auto: transforms.json means nerfstudio layout, a COLMAP model (sparse/0, colmap/sparse/0, sparse) means COLMAP."""
    colmap_path: Optional[Path] = None  # type: ignore[assignment]
    """COLMAP model folder relative to the data; None searches sparse/0, colmap/sparse/0, sparse."""
    downscale_factor: Optional[int] = 1
    """Image downscale factor; images_<factor>/ is used and, when missing, written without asking."""


class OdinDataParser(ColmapDataParser):
    """Detects the dataset layout and delegates to nerfstudio's COLMAP or nerfstudio parser, without prompts."""

    config: OdinDataParserConfig

    def detect_layout(self) -> Literal["colmap", "nerfstudio"]:
        data = self.config.data
        if not data.exists():
            raise DatasetError(f"data directory does not exist: {data}")
        if self.config.layout != "auto":
            return self.config.layout
        if self.config.colmap_path is not None or find_colmap_model(data) is not None:
            return "colmap"
        if (data / "transforms.json").exists():
            return "nerfstudio"
        raise DatasetError(
            f"no COLMAP model ({', '.join(str(p) for p in COLMAP_MODEL_DIRS)} with cameras/images) "
            f"and no transforms.json in {data}"
        )

    def _generate_dataparser_outputs(self, split: str = "train", **kwargs: Optional[Dict]) -> DataparserOutputs:
        if self.detect_layout() == "nerfstudio":
            return self._nerfstudio_outputs(split)
        model_relative = self.config.colmap_path or find_colmap_model(self.config.data)
        if model_relative is None:
            raise DatasetError(f"no COLMAP model under {self.config.data} (looked for {COLMAP_MODEL_DIRS[0]})")
        validate_colmap_capture(self.config.data, model_relative, self.config.images_path, self.config.load_3D_points)
        self.config.colmap_path = model_relative
        self._write_missing_downscaled_images(model_relative)
        CONSOLE.log(f"COLMAP capture: {self.config.data / model_relative}")
        return super()._generate_dataparser_outputs(split, **kwargs)

    def _load_3D_points(self, colmap_path: Path, transform_matrix: torch.Tensor, scale_factor: float):
        """nerfstudio's seed points, read vectorised from points3D.bin (seconds saved per million points)."""
        if self.config.max_2D_matches_per_3D_point != 0 or not (colmap_path / "points3D.bin").exists():
            return super()._load_3D_points(colmap_path, transform_matrix, scale_factor)
        points = read_points3d_binary(colmap_path / "points3D.bin")
        xyz = torch.from_numpy(points.xyz.astype(np.float32))
        xyz = torch.cat((xyz, torch.ones_like(xyz[..., :1])), -1) @ transform_matrix.T
        return {
            "points3D_xyz": xyz * scale_factor,
            "points3D_rgb": torch.from_numpy(points.rgb.copy()),
            "points3D_error": torch.from_numpy(points.error.astype(np.float32)),
            "points3D_num_points2D": torch.from_numpy(points.track_lengths),
        }

    def _write_missing_downscaled_images(self, model_relative: Path) -> None:
        """Write images_<d>/ when a downscale factor asks for it, instead of nerfstudio's interactive question
        (which also needs ffmpeg); written to a temporary folder and renamed, so a failure leaves nothing behind."""
        factor = self.config.downscale_factor or 1
        self._downscale_factor = factor
        source = self.config.data / self.config.images_path
        target = source.parent / f"{source.name}_{factor}"
        if factor == 1 or target.exists():
            return
        _, images = read_colmap_cameras_and_images(self.config.data / model_relative)
        partial = target.parent / f".{target.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        for image in tqdm(list(images.values()), desc=f"writing {target.name}", unit="image"):
            destination = partial / image.name
            destination.parent.mkdir(parents=True, exist_ok=True)
            with Image.open(source / image.name) as original:
                size = (original.width // factor, original.height // factor)
                original.resize(size, Image.Resampling.LANCZOS).save(destination)
        partial.rename(target)

    def _nerfstudio_outputs(self, split: str) -> DataparserOutputs:
        """nerfstudio layout; loads seed points only when transforms.json names its point cloud (else it would ask)."""
        transforms = json.loads((self.config.data / "transforms.json").read_text())
        config = NerfstudioDataParserConfig(
            data=self.config.data,
            scale_factor=self.config.scale_factor,
            downscale_factor=self.config.downscale_factor,
            scene_scale=self.config.scene_scale,
            orientation_method=self.config.orientation_method,
            center_method=self.config.center_method,
            auto_scale_poses=self.config.auto_scale_poses,
            eval_mode=self.config.eval_mode,
            train_split_fraction=self.config.train_split_fraction,
            eval_interval=self.config.eval_interval,
            load_3D_points=self.config.load_3D_points and "ply_file_path" in transforms,
        )
        return config.setup().get_dataparser_outputs(split)


def _dataparser_specification():
    """Entry point for nerfstudio's dataparser registry, so ``odin-data`` is a selectable dataparser subcommand."""
    from nerfstudio.plugins.registry_dataparser import DataParserSpecification

    return DataParserSpecification(
        config=OdinDataParserConfig(), description="COLMAP capture or transforms.json, detected; never prompts"
    )


odin_dataparser = _dataparser_specification()
