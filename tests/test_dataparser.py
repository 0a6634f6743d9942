"""The dataparser detects the layout, never prompts, and rejects bad captures with one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from nerfstudio.data.utils import colmap_parsing_utils
from PIL import Image

from odin_ns.colmap.reader import read_images_binary_headers
from odin_ns.data.dataparser import CAMERA_MODELS_NERFSTUDIO_LOADS, DatasetError, OdinDataParserConfig


def parse(data: Path, **options):
    return OdinDataParserConfig(data=data, **options).setup().get_dataparser_outputs("train")


def parse_error(data: Path, named: Path | str, problem: str, **options) -> str:
    """The DatasetError message of parsing ``data``, checked to be one line naming the file and the problem."""
    with pytest.raises(DatasetError) as raised:
        parse(data, **options)
    message = str(raised.value)
    assert "\n" not in message
    assert str(named) in message, message
    assert problem in message, message
    return message


@pytest.fixture
def scene_copy(tiny_scene: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "scene"
    shutil.copytree(tiny_scene, copy)
    return copy


def first_image(scene: Path) -> Path:
    return sorted((scene / "images").iterdir())[0]


def model(scene: Path) -> Path:
    return scene / "sparse" / "0"


def write_transforms_scene(colmap_outputs, images: Path, scene: Path) -> Path:
    """A nerfstudio-layout scene (transforms.json and a copy of ``images``) of a parsed COLMAP scene's views."""
    shutil.copytree(images, scene / "images")
    cameras = colmap_outputs.cameras
    frames = []
    for path, c2w in zip(colmap_outputs.image_filenames, cameras.camera_to_worlds):
        frames.append({"file_path": f"images/{Path(path).name}", "transform_matrix": c2w.tolist() + [[0, 0, 0, 1]]})
    meta = {
        "fl_x": float(cameras.fx[0]), "fl_y": float(cameras.fy[0]), "cx": float(cameras.cx[0]), "cy": float(cameras.cy[0]),
        "w": int(cameras.width[0]), "h": int(cameras.height[0]), "frames": frames,
    }
    (scene / "transforms.json").write_text(json.dumps(meta, indent=1))
    return scene


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
    colmap_outputs = parse(tiny_scene, eval_mode="all")
    scene = write_transforms_scene(colmap_outputs, tiny_scene / "images", tmp_path / "ns")
    outputs = parse(scene, eval_mode="all")
    assert len(outputs.image_filenames) == len(colmap_outputs.image_filenames)


def test_missing_model_is_named_with_what_to_do(tmp_path: Path):
    (tmp_path / "images").mkdir()
    message = parse_error(tmp_path, tmp_path, "no COLMAP model (sparse/0, colmap/sparse/0, sparse with cameras and "
                                              "images) and no transforms.json")
    assert "ns-process-data images" in message and "odin-ns demo-scene" in message


def test_missing_data_directory_or_a_file_is_named(tmp_path: Path):
    parse_error(tmp_path / "nowhere", tmp_path / "nowhere", "data directory does not exist")
    (tmp_path / "transforms.json").write_text("{}")
    parse_error(tmp_path / "transforms.json", tmp_path / "transforms.json", "--data is a file, not a folder")


def test_a_model_whose_images_are_elsewhere_is_named_with_the_option(scene_copy: Path):
    """All images missing from images/: the model is fine, the folder is not the one the images are in."""
    (scene_copy / "images").rename(scene_copy / "photos")
    (scene_copy / "images").mkdir()
    message = parse_error(scene_copy, scene_copy / "images", "24 of the 24 images listed in ")
    assert "(the first: " in message and "--images-path" in message
    assert len(parse(scene_copy, images_path=Path("photos")).image_filenames) == 21


def test_a_checked_model_is_not_read_again_unless_rewritten(scene_copy: Path, monkeypatch):
    """ns-train checks the capture before it prints the config, then parses it: the parser takes the model that the
    check validated (points included) when its files are unchanged, and validates it again when they changed."""
    from odin_ns.data import dataparser

    validations = []
    validate = dataparser.validate_colmap_capture
    monkeypatch.setattr(dataparser, "validate_colmap_capture", lambda *args: validations.append(args) or validate(*args))
    assert OdinDataParserConfig(data=scene_copy).setup().check() == f"COLMAP capture: {model(scene_copy)}"
    parser = OdinDataParserConfig(data=scene_copy).setup()
    seeded = parser.get_dataparser_outputs("train").metadata["points3D_xyz"]
    parser.get_dataparser_outputs("val")
    assert len(validations) == 1 and len(seeded) > 100, "the check's validation serves both splits"
    OdinDataParserConfig(data=scene_copy).setup().check()
    (model(scene_copy) / "points3D.bin").write_bytes(np.uint64(0).tobytes())
    with pytest.raises(DatasetError, match="zero 3D points"):
        parse(scene_copy)
    assert len(validations) == 3


def test_a_transforms_json_capture_is_checked(tiny_scene: Path, tmp_path: Path):
    scene = write_transforms_scene(parse(tiny_scene, eval_mode="all"), tiny_scene / "images", tmp_path / "ns")
    assert OdinDataParserConfig(data=scene).setup().check() == f"nerfstudio capture: {scene / 'transforms.json'}"
    first_image(scene).unlink()
    with pytest.raises(DatasetError, match="names a missing image"):
        OdinDataParserConfig(data=scene).setup().check()


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


def test_images_of_two_sizes_under_one_camera_are_named(scene_copy: Path):
    """Every image uses camera 1; the last one is resized, so the others pass and it is the one named."""
    image_path = sorted((scene_copy / "images").iterdir())[-1]
    with Image.open(image_path) as image:
        image.resize((image.width + 2, image.height)).save(image_path)
    parse_error(scene_copy, image_path, "image size 66x48 does not match its COLMAP camera 1 (64x48)")


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-5])


def append_garbage(path: Path) -> None:
    path.write_bytes(path.read_bytes() + bytes(5))


def announce_more_records(path: Path) -> None:
    path.write_bytes(np.uint64(10**6).tobytes() + path.read_bytes()[8:])


def set_unknown_camera_model_id(path: Path) -> None:
    """The first camera's model id (int32 after the 8-byte count and the int32 camera id) becomes 99."""
    raw = bytearray(path.read_bytes())
    raw[12:16] = np.int32(99).tobytes()
    path.write_bytes(bytes(raw))


def repeat_first_camera(path: Path) -> None:
    """The scene has one camera: its record written twice under a count of two."""
    raw = path.read_bytes()
    path.write_bytes(np.uint64(2).tobytes() + raw[8:] + raw[8:])


@pytest.mark.parametrize(
    "file, corrupt, problem",
    [
        ("cameras.bin", repeat_first_camera, "a camera id appears twice"),
        ("cameras.bin", truncate, "the file ends inside a camera"),
        ("cameras.bin", append_garbage, "5 bytes after the last of its 1 cameras"),
        ("cameras.bin", set_unknown_camera_model_id, "unknown camera model id 99"),
        ("images.bin", truncate, "the file ends inside image 24 of 24"),
        ("images.bin", append_garbage, "5 bytes after the last of its 24 images"),
        ("images.bin", announce_more_records, "it announces 1000000 images"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_corrupt_camera_and_image_binaries_are_named(scene_copy: Path, file: str, corrupt, problem: str):
    corrupt(model(scene_copy) / file)
    parse_error(scene_copy, model(scene_copy) / file, f"truncated or corrupt COLMAP {file} ({problem}")


@pytest.mark.parametrize(
    "corrupt, problem",
    [
        (truncate, "the file ends inside point"),
        (append_garbage, "5 bytes after the last of its"),
        (announce_more_records, "it announces 1000000 points"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_corrupt_points_binary_is_named_before_images_are_written(scene_copy: Path, corrupt, problem: str):
    points = model(scene_copy) / "points3D.bin"
    corrupt(points)
    parse_error(scene_copy, points, f"truncated or corrupt COLMAP points3D.bin ({problem}", downscale_factor=2)
    assert not (scene_copy / "images_2").exists()
    assert not (scene_copy / ".images_2.partial").exists()


def convert_model_to_text(model_dir: Path, keep_binaries: bool = False) -> None:
    colmap_parsing_utils.write_model(*colmap_parsing_utils.read_model(model_dir, ext=".bin"), model_dir, ext=".txt")
    if not keep_binaries:
        for name in ("cameras.bin", "images.bin", "points3D.bin"):
            (model_dir / name).unlink()


def non_numeric_width(fields: list[str]) -> str:
    return " ".join(fields[:2] + ["wide"] + fields[3:])


def replace_first_data_line(path: Path, edit) -> None:
    lines = path.read_text().splitlines()
    first = next(index for index, line in enumerate(lines) if line and not line.startswith("#"))
    lines[first] = edit(lines[first].split())
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "file, edit, problem",
    [
        ("cameras.txt", non_numeric_width, "ValueError"),
        ("images.txt", lambda fields: " ".join(["first"] + fields[1:]), "ValueError"),
        ("points3D.txt", lambda fields: " ".join(fields[:5]), "IndexError"),
    ],
)
def test_malformed_text_model_line_is_named(scene_copy: Path, file: str, edit, problem: str):
    convert_model_to_text(model(scene_copy))
    parse(scene_copy)  # the text model itself is good
    replace_first_data_line(model(scene_copy) / file, edit)
    parse_error(scene_copy, model(scene_copy) / file, f"malformed line in COLMAP {file} ({problem}")


def test_text_cameras_beside_binaries_are_the_ones_checked(scene_copy: Path):
    """nerfstudio reads cameras.txt and images.txt when cameras.txt exists, so those are the files validated."""
    convert_model_to_text(model(scene_copy), keep_binaries=True)
    replace_first_data_line(model(scene_copy) / "cameras.txt", non_numeric_width)
    parse_error(scene_copy, model(scene_copy) / "cameras.txt", "malformed line in COLMAP cameras.txt (ValueError")


def write_cameras(model_dir: Path, *cameras) -> None:
    colmap_parsing_utils.write_cameras_binary({camera.id: camera for camera in cameras}, model_dir / "cameras.bin")


def colmap_camera(camera_id: int, model_name: str):
    """A 64x48 camera of a COLMAP model with at least four parameters (fx, fy, cx, cy, then zero distortion)."""
    num_params = colmap_parsing_utils.CAMERA_MODEL_NAMES[model_name].num_params
    params = np.array([70.0, 70.0, 32.0, 24.0] + [0.0] * (num_params - 4))
    return colmap_parsing_utils.Camera(id=camera_id, model=model_name, width=64, height=48, params=params)


def set_image_cameras(model_dir: Path, camera_id_of) -> None:
    """Rewrite images.bin with each image's camera id replaced by ``camera_id_of(image_id)``."""
    images = colmap_parsing_utils.read_images_binary(model_dir / "images.bin")
    images = {image_id: image._replace(camera_id=camera_id_of(image_id)) for image_id, image in images.items()}
    colmap_parsing_utils.write_images_binary(images, model_dir / "images.bin")


@pytest.mark.parametrize("model_name", ["FULL_OPENCV", "FOV", "THIN_PRISM_FISHEYE"])
def test_camera_model_nerfstudio_cannot_load_is_named(scene_copy: Path, model_name: str):
    cameras_file = model(scene_copy) / "cameras.bin"
    write_cameras(model(scene_copy), colmap_camera(1, model_name))
    message = parse_error(scene_copy, cameras_file, f"COLMAP camera 1 uses model {model_name}")
    assert message == (
        f"COLMAP camera 1 uses model {model_name}, which nerfstudio cannot load (supported: SIMPLE_PINHOLE, PINHOLE, "
        f"SIMPLE_RADIAL, RADIAL, OPENCV, OPENCV_FISHEYE, SIMPLE_RADIAL_FISHEYE, RADIAL_FISHEYE): {cameras_file}"
    )
    assert model_name not in CAMERA_MODELS_NERFSTUDIO_LOADS


def test_camera_parameter_count_is_checked(scene_copy: Path):
    convert_model_to_text(model(scene_copy))
    replace_first_data_line(model(scene_copy) / "cameras.txt", lambda fields: " ".join(fields[:-1]))
    parse_error(scene_copy, model(scene_copy) / "cameras.txt", "COLMAP camera 1 has 3 parameters, model PINHOLE has 4")


def test_two_nerfstudio_camera_models_are_named(scene_copy: Path):
    write_cameras(model(scene_copy), colmap_camera(1, "PINHOLE"), colmap_camera(2, "OPENCV_FISHEYE"))
    set_image_cameras(model(scene_copy), lambda image_id: 1 + image_id % 2)
    parse_error(
        scene_copy, model(scene_copy) / "cameras.bin", "convert to 2 nerfstudio camera models (OPENCV, OPENCV_FISHEYE)"
    )


def test_image_of_an_undefined_camera_is_named(scene_copy: Path):
    set_image_cameras(model(scene_copy), lambda image_id: 7 if image_id == 3 else 1)
    name = read_images_binary_headers(model(scene_copy) / "images.bin")[3].name
    parse_error(
        scene_copy, model(scene_copy) / "images.bin", f"COLMAP image 3 ({name}) uses camera 7, which cameras.bin"
    )


@pytest.fixture
def transforms_scene(tiny_scene: Path, tmp_path: Path) -> Path:
    return write_transforms_scene(parse(tiny_scene, eval_mode="all"), tiny_scene / "images", tmp_path / "ns")


def edit_transforms(scene: Path, edit) -> None:
    transforms = json.loads((scene / "transforms.json").read_text())
    edit(transforms)
    (scene / "transforms.json").write_text(json.dumps(transforms, indent=1))


def test_missing_frame_image_is_named(transforms_scene: Path):
    frames = json.loads((transforms_scene / "transforms.json").read_text())["frames"]
    missing = transforms_scene / frames[2]["file_path"]
    missing.unlink()
    message = parse_error(transforms_scene, missing, "frames[2] of")
    assert message == f"frames[2] of {transforms_scene / 'transforms.json'} names a missing image: {missing}"


def test_transforms_json_that_is_not_json_is_named(transforms_scene: Path):
    transforms = transforms_scene / "transforms.json"
    lines = transforms.read_text().splitlines()
    lines[2] += " oops"
    transforms.write_text("\n".join(lines))
    parse_error(transforms_scene, transforms, "invalid JSON in transforms.json at line 3, column")


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda transforms: transforms["frames"][1].pop("file_path"), "frames[1] of transforms.json has no file_path"),
        (lambda transforms: transforms["frames"][1].pop("transform_matrix"),
         "frames[1] of transforms.json has no transform_matrix"),
        (lambda transforms: transforms["frames"].__setitem__(1, "images/frame_00002.png"),
         "frames[1] of transforms.json is not an object"),
        (lambda transforms: transforms.pop("frames"), "transforms.json has no list of frames"),
    ],
    ids=["no-file_path", "no-transform_matrix", "frame-not-an-object", "no-frames"],
)
def test_malformed_frames_are_named(transforms_scene: Path, edit, problem: str):
    edit_transforms(transforms_scene, edit)
    parse_error(transforms_scene, transforms_scene / "transforms.json", problem)


def test_missing_point_cloud_of_transforms_json_is_named(transforms_scene: Path):
    edit_transforms(transforms_scene, lambda transforms: transforms.update(ply_file_path="sparse_pc.ply"))
    parse_error(transforms_scene, transforms_scene / "sparse_pc.ply", "point cloud named by transforms.json is missing")


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
