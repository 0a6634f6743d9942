"""The dataparser detects the layout, never prompts, and rejects bad captures with one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from odin_ns.data.dataparser import DatasetError, OdinDataParserConfig


def parse(data: Path, **options):
    return OdinDataParserConfig(data=data, **options).setup().get_dataparser_outputs("train")


@pytest.fixture
def scene_copy(tiny_scene: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "scene"
    shutil.copytree(tiny_scene, copy)
    return copy


def first_image(scene: Path) -> Path:
    return sorted((scene / "images").iterdir())[0]


def test_colmap_capture_is_detected_and_seeds_points(tiny_scene: Path):
    outputs = parse(tiny_scene)
    assert len(outputs.image_filenames) == 21  # 24 views, every 8th held out for evaluation
    assert outputs.metadata["points3D_xyz"].shape[0] > 100


def test_downscale_writes_images_without_asking(scene_copy: Path):
    outputs = parse(scene_copy, downscale_factor=2)
    assert (scene_copy / "images_2").is_dir()
    assert int(outputs.cameras.width[0]) == 32
    with Image.open(outputs.image_filenames[0]) as image:
        assert image.size == (32, 24)


def test_transforms_json_layout_is_detected(tiny_scene: Path, tmp_path: Path):
    """A nerfstudio-layout scene (transforms.json) built from the same views parses with the same number of images."""
    colmap_outputs = OdinDataParserConfig(data=tiny_scene, eval_mode="all").setup().get_dataparser_outputs("train")
    scene = tmp_path / "ns"
    shutil.copytree(tiny_scene / "images", scene / "images")
    cameras = colmap_outputs.cameras
    frames = []
    for path, c2w in zip(colmap_outputs.image_filenames, cameras.camera_to_worlds):
        frames.append({"file_path": f"images/{Path(path).name}", "transform_matrix": c2w.tolist() + [[0, 0, 0, 1]]})
    meta = {
        "fl_x": float(cameras.fx[0]), "fl_y": float(cameras.fy[0]), "cx": float(cameras.cx[0]), "cy": float(cameras.cy[0]),
        "w": int(cameras.width[0]), "h": int(cameras.height[0]), "frames": frames,
    }
    (scene / "transforms.json").write_text(json.dumps(meta))
    outputs = OdinDataParserConfig(data=scene, eval_mode="all").setup().get_dataparser_outputs("train")
    assert len(outputs.image_filenames) == len(colmap_outputs.image_filenames)


def test_missing_model_is_named(tmp_path: Path):
    (tmp_path / "images").mkdir()
    with pytest.raises(DatasetError, match="no COLMAP model .* and no transforms.json"):
        parse(tmp_path)


def test_missing_data_directory_is_named(tmp_path: Path):
    with pytest.raises(DatasetError, match="data directory does not exist"):
        parse(tmp_path / "nowhere")


def test_missing_image_is_named_and_nothing_is_written(scene_copy: Path):
    missing = first_image(scene_copy)
    missing.unlink()
    with pytest.raises(DatasetError, match=f"image listed in the COLMAP model is missing: .*{missing.name}"):
        parse(scene_copy, downscale_factor=2)
    assert not (scene_copy / "images_2").exists()


def test_unreadable_image_is_named(scene_copy: Path):
    broken = first_image(scene_copy)
    broken.write_bytes(b"this is not an image")
    with pytest.raises(DatasetError, match=f"unreadable image: .*{broken.name}"):
        parse(scene_copy)


def test_zero_points_is_named(scene_copy: Path):
    (scene_copy / "sparse" / "0" / "points3D.bin").write_bytes(np.uint64(0).tobytes())
    with pytest.raises(DatasetError, match="zero 3D points"):
        parse(scene_copy)


def test_camera_size_mismatch_is_named(scene_copy: Path):
    image_path = first_image(scene_copy)
    with Image.open(image_path) as image:
        image.resize((image.width + 2, image.height)).save(image_path)
    with pytest.raises(DatasetError, match=f"does not match its COLMAP camera.*{image_path.name}"):
        parse(scene_copy)


def test_vectorised_points_equal_nerfstudio_reader(tiny_scene):
    """Seed points read by odin-data's vectorised reader are nerfstudio's, value for value."""
    from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParser

    from odin_ns.data.dataparser import OdinDataParser, OdinDataParserConfig

    parser = OdinDataParser(OdinDataParserConfig(data=tiny_scene))
    transform = torch.eye(4)[:3] * 0.5
    ours = parser._load_3D_points(tiny_scene / "sparse" / "0", transform, 2.0)
    stock = ColmapDataParser._load_3D_points(parser, tiny_scene / "sparse" / "0", transform, 2.0)
    assert ours.keys() == stock.keys()
    for key in ours:
        assert ours[key].dtype == stock[key].dtype and torch.equal(ours[key], stock[key]), key
