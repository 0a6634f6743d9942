"""A dataparser that takes ``--data DIR`` as it comes: a COLMAP capture or a nerfstudio ``transforms.json`` scene.

Stock splatfacto reads ``transforms.json`` only, needs an extra ``colmap`` subcommand and flags for COLMAP captures, and
asks an interactive question when images are over 1600 px (a headless or multi-rank run hangs on it). This parser
detects the layout, validates the capture (COLMAP model or transforms.json, and the images they name) before anything
is written or loaded, with one-line errors that name the file and the problem, never prompts, and seeds the Gaussians
from the SfM points.
"""

from __future__ import annotations

import json
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Literal, Optional, Tuple, Type, TypeVar

import numpy as np
import torch

from nerfstudio.data.dataparsers.base_dataparser import DataparserOutputs
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParser, ColmapDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
from nerfstudio.data.utils import colmap_parsing_utils as colmap_io
from nerfstudio.process_data.colmap_utils import parse_colmap_camera_params
from PIL import Image, UnidentifiedImageError
from tqdm import tqdm

from odin_ns.colmap.reader import (
    ColmapFileError,
    ColmapPoints,
    check_nothing_after_records,
    corrupt_file,
    read_images_binary_headers,
    read_points3d_binary,
)
from odin_ns.dependency_warnings import filter_dependency_warnings

filter_dependency_warnings()  # the first odin_ns module ns-train imports: before nerfstudio's models warn

COLMAP_MODEL_DIRS = (Path("sparse/0"), Path("colmap/sparse/0"), Path("sparse"))
CAMERA_RECORD_HEADER_BYTES = 4 + 4 + 8 + 8
"""cameras.bin record before its parameters: camera_id (int32), model_id (int32), width, height (uint64)."""


class DatasetError(ValueError):
    """A dataset that cannot be trained on; the message names the problem and the file."""


def find_colmap_model(data: Path) -> Optional[Path]:
    """The first of the usual COLMAP model folders under ``data`` that holds cameras and images, or None."""
    for relative in COLMAP_MODEL_DIRS:
        model = data / relative
        if any((model / f"cameras{ext}").exists() and (model / f"images{ext}").exists() for ext in (".bin", ".txt")):
            return relative
    return None


def _camera_models_nerfstudio_loads() -> Tuple[str, ...]:
    """The COLMAP camera models that nerfstudio's COLMAP dataparser converts, found by asking its converter, so the
    list follows the installed nerfstudio (1.1.5 refuses FULL_OPENCV, FOV and THIN_PRISM_FISHEYE)."""
    supported = []
    for model in sorted(colmap_io.CAMERA_MODELS, key=lambda model: model.model_id):
        probe = colmap_io.Camera(id=0, model=model.model_name, width=1, height=1, params=np.zeros(model.num_params))
        try:
            parse_colmap_camera_params(probe)
        except NotImplementedError:
            continue
        supported.append(model.model_name)
    return tuple(supported)


CAMERA_MODELS_NERFSTUDIO_LOADS = _camera_models_nerfstudio_loads()

Parsed = TypeVar("Parsed")


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def _read_colmap_text(read: Callable[[Path], Parsed], path: Path) -> Parsed:
    """nerfstudio's text readers fail on a malformed line with a bare ValueError or IndexError that names no file."""
    try:
        return read(path)
    except (ValueError, IndexError) as error:
        raise DatasetError(f"malformed line in COLMAP {path.name} ({_one_line(error)}): {path}") from error


def _read_colmap_binary(read: Callable[[Path], Parsed], path: Path) -> Parsed:
    """The numpy readers' ColmapFileError names the file and the problem already; as a DatasetError it is reported as
    a bad dataset."""
    try:
        return read(path)
    except ColmapFileError as error:
        raise DatasetError(str(error)) from error


def _read_cameras_binary(path: Path) -> dict:
    """nerfstudio's cameras.bin reader, whose errors on a bad file (struct.error, KeyError) name neither the file nor
    the problem, checked to the file's last byte: it stops after the announced count, so a count too small would drop
    cameras without a word."""
    try:
        cameras = colmap_io.read_cameras_binary(path)
    except struct.error as error:
        raise corrupt_file(path, "the file ends inside a camera") from error
    except KeyError as error:
        raise corrupt_file(path, f"unknown camera model id {error.args[0]}") from error
    except AssertionError as error:
        raise corrupt_file(path, "a camera id appears twice") from error
    end = 8 + sum(CAMERA_RECORD_HEADER_BYTES + 8 * len(camera.params) for camera in cameras.values())
    check_nothing_after_records(path, "camera", len(cameras), end, path.stat().st_size)
    return cameras


def read_colmap_cameras(path: Path) -> dict:
    """COLMAP cameras by id from cameras.txt or cameras.bin."""
    if path.suffix == ".txt":
        return _read_colmap_text(colmap_io.read_cameras_text, path)
    return _read_colmap_binary(_read_cameras_binary, path)


def read_colmap_images(path: Path) -> dict:
    """COLMAP images by id (pose, camera, name; 2D points only from a text model) from images.txt or images.bin."""
    if path.suffix == ".txt":
        return _read_colmap_text(colmap_io.read_images_text, path)
    return _read_colmap_binary(read_images_binary_headers, path)


def colmap_model_files(model_dir: Path) -> Tuple[Path, Path]:
    """The cameras and images files that nerfstudio's COLMAP dataparser reads: the text pair when cameras.txt exists,
    else the binary pair; each must exist."""
    extension = ".txt" if (model_dir / "cameras.txt").exists() else ".bin"
    files = model_dir / f"cameras{extension}", model_dir / f"images{extension}"
    for path in files:
        if not path.exists():
            raise DatasetError(f"COLMAP model has no {path.name}: {model_dir}")
    return files


def check_camera_models(cameras: dict, path: Path) -> Dict[int, str]:
    """Each camera's nerfstudio camera model, by camera id; DatasetError for a COLMAP model that nerfstudio cannot
    convert or a parameter count that does not fit the model (nerfstudio would fail on it without naming the file)."""
    nerfstudio_models = {}
    for camera in sorted(cameras.values(), key=lambda camera: camera.id):
        if camera.model not in CAMERA_MODELS_NERFSTUDIO_LOADS:
            raise DatasetError(
                f"COLMAP camera {camera.id} uses model {camera.model}, which nerfstudio cannot load "
                f"(supported: {', '.join(CAMERA_MODELS_NERFSTUDIO_LOADS)}): {path}"
            )
        expected = colmap_io.CAMERA_MODEL_NAMES[camera.model].num_params
        if len(camera.params) != expected:
            raise DatasetError(
                f"COLMAP camera {camera.id} has {len(camera.params)} parameters, model {camera.model} has "
                f"{expected}: {path}"
            )
        nerfstudio_models[camera.id] = parse_colmap_camera_params(camera)["camera_model"]
    return nerfstudio_models


def read_colmap_points(model_dir: Path) -> Tuple[int, Optional[ColmapPoints]]:
    """Number of 3D points in a COLMAP model, the whole file read so that a bad one fails here, and the points when
    read from points3D.bin (kept for the seed points: the file is read once)."""
    binary = model_dir / "points3D.bin"
    if binary.exists():
        points = _read_colmap_binary(read_points3d_binary, binary)
        return len(points.ids), points
    text = model_dir / "points3D.txt"
    if not text.exists():
        raise DatasetError(f"COLMAP model has no points3D.bin or points3D.txt: {model_dir}")
    return len(_read_colmap_text(colmap_io.read_points3D_text, text)), None


@dataclass
class ColmapModel:
    """What later steps need of a validated COLMAP model, so that they do not read it again."""

    images: dict
    """COLMAP images by id."""
    points: Optional[ColmapPoints]
    """points3D.bin's points; None for a text model or when no seed points are loaded."""


def validate_colmap_capture(data: Path, model_relative: Path, images_relative: Path, need_points: bool) -> ColmapModel:
    """Check a COLMAP capture before anything is written or loaded, so that a bad one fails at once with one line
    naming the file and the problem, and leaves no images_<d>/ behind; raise DatasetError on the first problem."""
    model_dir = data / model_relative
    cameras_file, images_file = colmap_model_files(model_dir)
    cameras = read_colmap_cameras(cameras_file)
    nerfstudio_models = check_camera_models(cameras, cameras_file)
    images = read_colmap_images(images_file)
    if not images:
        raise DatasetError(f"COLMAP model lists no images: {images_file}")
    for image in sorted(images.values(), key=lambda im: im.id):
        camera = cameras.get(image.camera_id)
        if camera is None:
            raise DatasetError(
                f"COLMAP image {image.id} ({image.name}) uses camera {image.camera_id}, which {cameras_file.name} "
                f"does not define: {images_file}"
            )
        path = data / images_relative / image.name
        if not path.exists():
            raise missing_images_error(data / images_relative, images, images_file)
        try:
            with Image.open(path) as handle:
                size = handle.size
        except (OSError, UnidentifiedImageError) as error:
            raise DatasetError(f"unreadable image: {path} ({error})") from error
        if size != (camera.width, camera.height):
            raise DatasetError(
                f"image size {size[0]}x{size[1]} does not match its COLMAP camera {camera.id} "
                f"({camera.width}x{camera.height}): {path}"
            )
    models_in_use = sorted({nerfstudio_models[image.camera_id] for image in images.values()})
    if len(models_in_use) > 1:
        raise DatasetError(
            f"COLMAP cameras of the images convert to {len(models_in_use)} nerfstudio camera models "
            f"({', '.join(models_in_use)}), nerfstudio loads one per dataset: {cameras_file}"
        )
    if not need_points:
        return ColmapModel(images, None)
    count, points = read_colmap_points(model_dir)
    if count == 0:
        raise DatasetError(f"COLMAP model has zero 3D points (nothing to seed the Gaussians from): {model_dir}")
    return ColmapModel(images, points)


def missing_images_error(folder: Path, images: dict, images_file: Path) -> DatasetError:
    """The error for images of the model that are not in ``folder``: how many, the first one, and where else they
    may be (a model whose images are all missing usually points at the wrong folder)."""
    missing = sorted((image for image in images.values() if not (folder / image.name).exists()), key=lambda im: im.id)
    if len(missing) == 1:
        return DatasetError(f"image listed in the COLMAP model is missing: {folder / missing[0].name}")
    return DatasetError(
        f"{len(missing)} of the {len(images)} images listed in {images_file} are missing from {folder} (the first: "
        f"{missing[0].name}); if they are in another folder of the capture, add `odin-data --images-path FOLDER` at "
        f"the end of the command"
    )


def nerfstudio_image_path(data: Path, file_path: str, downscale_factor: Optional[int]) -> Path:
    """The image file that nerfstudio's transforms.json parser loads for a frame: the frame's file_path under the
    data, or its name under images_<d>/ when downscaled."""
    if downscale_factor is not None and downscale_factor > 1:
        return data / f"images_{downscale_factor}" / Path(file_path).name
    return data / file_path


def validate_transforms_json(data: Path, downscale_factor: Optional[int], need_points: bool) -> dict:
    """Check a nerfstudio-layout scene before nerfstudio's parser reads it (it fails on a bad transforms.json with a
    bare JSONDecodeError or KeyError, and on a missing image only when training loads it); return transforms.json."""
    path = data / "transforms.json"
    try:
        transforms = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DatasetError(
            f"invalid JSON in transforms.json at line {error.lineno}, column {error.colno} ({error.msg}): {path}"
        ) from error
    except UnicodeDecodeError as error:
        raise DatasetError(f"transforms.json is not UTF-8 text: {path}") from error
    frames = transforms.get("frames") if isinstance(transforms, dict) else None
    if not isinstance(frames, list) or not frames:
        raise DatasetError(f"transforms.json has no list of frames: {path}")
    for index, frame in enumerate(frames):
        if not isinstance(frame, dict):
            raise DatasetError(f"frames[{index}] of transforms.json is not an object: {path}")
        for key in ("file_path", "transform_matrix"):
            if key not in frame:
                raise DatasetError(f"frames[{index}] of transforms.json has no {key}: {path}")
        image = nerfstudio_image_path(data, frame["file_path"], downscale_factor)
        if not image.exists():
            raise DatasetError(f"frames[{index}] of {path} names a missing image: {image}")
    if need_points and "ply_file_path" in transforms and not (data / transforms["ply_file_path"]).exists():
        raise DatasetError(f"point cloud named by transforms.json is missing: {data / transforms['ply_file_path']}")
    return transforms


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


ValidationKey = Tuple[Path, Path, Path, bool, Tuple[Tuple[str, int, int], ...]]

_checked_models: Dict[ValidationKey, ColmapModel] = {}
"""The COLMAP model that ``OdinDataParser.check`` validated last, for the next parser of this process that loads the
same files: ns-train checks the capture before it prints the config, then builds the dataparser, which takes the
validated model instead of reading the model files again (points3D.bin takes seconds per million points)."""


def validation_key(data: Path, model_relative: Path, images_relative: Path, need_points: bool) -> ValidationKey:
    """What a validation of a COLMAP model checked: the folders, whether it read the points, and the size and
    modification time of each file of the model (a model rewritten in between is validated again; a missing model
    folder has no files, and its validation says so)."""
    model_dir = data / model_relative
    files = tuple((path.name, path.stat().st_size, path.stat().st_mtime_ns)
                  for path in (sorted(model_dir.iterdir()) if model_dir.is_dir() else ()) if path.is_file())
    return data.resolve(), Path(model_relative), Path(images_relative), need_points, files


class OdinDataParser(ColmapDataParser):
    """Detects the dataset layout and delegates to nerfstudio's COLMAP or nerfstudio parser, without prompts."""

    config: OdinDataParserConfig

    def __init__(self, config: OdinDataParserConfig):
        super().__init__(config)
        self._model: Optional[ColmapModel] = None
        """The COLMAP model as validated, for the train and the eval split alike; its points until they seed."""

    def detect_layout(self) -> Literal["colmap", "nerfstudio"]:
        data = self.config.data
        if not data.exists():
            raise DatasetError(f"data directory does not exist: {data} (--data takes the folder of a COLMAP capture "
                               f"or of a nerfstudio transforms.json)")
        if not data.is_dir():
            raise DatasetError(f"--data is a file, not a folder: {data} (--data takes the folder of a COLMAP capture "
                               f"or of a nerfstudio transforms.json)")
        if self.config.layout != "auto":
            return self.config.layout
        if self.config.colmap_path is not None or find_colmap_model(data) is not None:
            return "colmap"
        if (data / "transforms.json").exists():
            return "nerfstudio"
        raise DatasetError(
            f"no COLMAP model ({', '.join(str(p) for p in COLMAP_MODEL_DIRS)} with cameras and images) "
            f"and no transforms.json in {data}: run COLMAP on the images first (e.g. ns-process-data images), "
            f"or try the demo capture of `odin-ns demo-scene DIR`"
        )

    def check(self) -> str:
        """Validate the capture as parsing it would, without loading it (ns-train's check before anything is printed
        or written: a capture that cannot be trained on stops the run in one line); returns what was found."""
        if self.detect_layout() == "nerfstudio":
            validate_transforms_json(self.config.data, self.config.downscale_factor, self.config.load_3D_points)
            return f"nerfstudio capture: {self.config.data / 'transforms.json'}"
        model_relative = self._model_relative()
        model = validate_colmap_capture(
            self.config.data, model_relative, self.config.images_path, self.config.load_3D_points
        )
        _checked_models.clear()
        _checked_models[self._validation_key(model_relative)] = model
        return f"COLMAP capture: {self.config.data / model_relative}"

    def _model_relative(self) -> Path:
        model_relative = self.config.colmap_path or find_colmap_model(self.config.data)
        if model_relative is None:
            raise DatasetError(f"no COLMAP model under {self.config.data} (looked for {COLMAP_MODEL_DIRS[0]})")
        return model_relative

    def _validation_key(self, model_relative: Path) -> ValidationKey:
        return validation_key(self.config.data, model_relative, self.config.images_path, self.config.load_3D_points)

    def _generate_dataparser_outputs(self, split: str = "train", **kwargs: Optional[Dict]) -> DataparserOutputs:
        if self.detect_layout() == "nerfstudio":
            return self._nerfstudio_outputs(split)
        model_relative = self._model_relative()
        if self._model is None:
            self._model = _checked_models.pop(self._validation_key(model_relative), None) or validate_colmap_capture(
                self.config.data, model_relative, self.config.images_path, self.config.load_3D_points
            )
        self.config.colmap_path = model_relative
        self._write_missing_downscaled_images(self._model.images)
        return super()._generate_dataparser_outputs(split, **kwargs)

    def _load_3D_points(self, colmap_path: Path, transform_matrix: torch.Tensor, scale_factor: float):
        """nerfstudio's seed points, read vectorised from points3D.bin (seconds saved per million points), or taken
        from the validation, which read the whole file already (once: they are not kept after seeding)."""
        points = None
        if self._model is not None:
            points, self._model.points = self._model.points, None
        if self.config.max_2D_matches_per_3D_point != 0 or not (colmap_path / "points3D.bin").exists():
            return super()._load_3D_points(colmap_path, transform_matrix, scale_factor)
        if points is None:
            points = read_points3d_binary(colmap_path / "points3D.bin")
        xyz = torch.from_numpy(points.xyz.astype(np.float32))
        xyz = torch.cat((xyz, torch.ones_like(xyz[..., :1])), -1) @ transform_matrix.T
        return {
            "points3D_xyz": xyz * scale_factor,
            "points3D_rgb": torch.from_numpy(points.rgb.copy()),
            "points3D_error": torch.from_numpy(points.error.astype(np.float32)),
            "points3D_num_points2D": torch.from_numpy(points.track_lengths),
        }

    def _write_missing_downscaled_images(self, images: dict) -> None:
        """Write images_<d>/ of the model's ``images`` when a downscale factor asks for it, instead of nerfstudio's
        interactive question (which also needs ffmpeg); written to a temporary folder and renamed, so a failure leaves
        nothing behind."""
        factor = self.config.downscale_factor or 1
        self._downscale_factor = factor
        source = self.config.data / self.config.images_path
        target = source.parent / f"{source.name}_{factor}"
        if factor == 1 or target.exists():
            return
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
        transforms = validate_transforms_json(
            self.config.data, self.config.downscale_factor, self.config.load_3D_points
        )
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
