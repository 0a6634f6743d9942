"""The numpy COLMAP readers give what nerfstudio's readers give, on a real and a generated model, binary and text."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import re

import numpy as np
import pytest

from odin_ns.colmap.reader import (
    IMAGE_HEADER_BYTES,
    POINT2D_BYTES,
    POINT_HEADER_BYTES,
    TRACK_ELEMENT_BYTES,
    ColmapFileError,
    has_tracks,
    read_images_binary_headers,
    read_points3d_binary,
    read_tracks,
)


@pytest.fixture(params=["tiny", "cup77"])
def model_dir(request, tiny_scene: Path) -> Path:
    if request.param == "tiny":
        return tiny_scene / "sparse" / "0"
    return request.getfixturevalue("cup77") / "sparse" / "0"


def test_image_headers_equal_nerfstudio_reader(model_dir: Path):
    from nerfstudio.data.utils import colmap_parsing_utils

    stock = colmap_parsing_utils.read_images_binary(model_dir / "images.bin")
    ours = read_images_binary_headers(model_dir / "images.bin")
    assert ours.keys() == stock.keys()
    for image_id, image in stock.items():
        mine = ours[image_id]
        assert (mine.name, mine.camera_id) == (image.name, image.camera_id)
        assert np.array_equal(mine.qvec, image.qvec) and np.array_equal(mine.tvec, image.tvec)


def tracks_by_point(names, image_of_obs, point_of_obs) -> Counter:
    """Each point's set of image names, as a multiset over points (independent of how points are numbered)."""
    per_point: dict[int, list[str]] = {}
    for image, point in zip(image_of_obs.tolist(), point_of_obs.tolist()):
        per_point.setdefault(point, []).append(names[image])
    return Counter(frozenset(Counter(images).items()) for images in per_point.values())


def nerfstudio_tracks(model_dir: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``read_tracks``'s answer from nerfstudio's per-object readers: each 3D point lists the images of its track."""
    from nerfstudio.data.utils import colmap_parsing_utils

    images = colmap_parsing_utils.read_images_binary(model_dir / "images.bin")
    points = colmap_parsing_utils.read_points3D_binary(model_dir / "points3D.bin")
    row_of_image_id = {image_id: row for row, image_id in enumerate(sorted(images))}
    image_of_obs = [row_of_image_id[image_id] for point in points.values() for image_id in point.image_ids]
    point_of_obs = [index for index, point in enumerate(points.values()) for _ in point.image_ids]
    return [images[image_id].name for image_id in sorted(images)], np.array(image_of_obs), np.array(point_of_obs)


def test_binary_and_text_tracks_equal_nerfstudio_reader(model_dir: Path, tmp_path: Path):
    from nerfstudio.data.utils import colmap_parsing_utils

    colmap_parsing_utils.write_model(*colmap_parsing_utils.read_model(model_dir, ext=".bin"), tmp_path, ext=".txt")
    reference = nerfstudio_tracks(model_dir)
    for source in (model_dir, tmp_path):
        assert has_tracks(source)
        names, image_of_obs, point_of_obs = read_tracks(source)
        assert names == reference[0], source
        assert tracks_by_point(names, image_of_obs, point_of_obs) == tracks_by_point(*reference), source
        assert sorted(set(point_of_obs.tolist())) == list(range(point_of_obs.max() + 1)), source


def test_a_folder_without_a_model_has_no_tracks(tmp_path: Path):
    assert not has_tracks(tmp_path)
    with pytest.raises(FileNotFoundError, match="no COLMAP model"):
        read_tracks(tmp_path)


BINARY_READERS = pytest.mark.parametrize(
    "file, read, record",
    [("images.bin", read_images_binary_headers, "image"), ("points3D.bin", read_points3d_binary, "point")],
)


@BINARY_READERS
@pytest.mark.parametrize(
    "corrupt, problem",
    [
        (lambda raw: raw[:5], "5 bytes, shorter than the 8-byte {record} count"),
        (lambda raw: np.uint64(10**9).tobytes() + raw[8:], "it announces 1000000000 {record}s"),
        (lambda raw: raw[:-3], "the file ends inside {record} {count} of {count}"),
        (lambda raw: raw + bytes(3), "3 bytes after the last of its {count} {record}s"),
    ],
    ids=["no-count", "count-too-large", "last-record-cut", "trailing-bytes"],
)
def test_corrupt_binary_is_named(tiny_scene: Path, tmp_path: Path, file: str, read, record: str, corrupt, problem):
    """A file whose bytes do not hold the records it announces fails with one line naming the file and the problem."""
    raw = (tiny_scene / "sparse" / "0" / file).read_bytes()
    count = int.from_bytes(raw[:8], "little")
    path = tmp_path / file
    path.write_bytes(corrupt(raw))
    with pytest.raises(ColmapFileError) as raised:
        read(path)
    message = str(raised.value)
    assert message.startswith(f"truncated or corrupt COLMAP {file} ({problem.format(record=record, count=count)}")
    assert message.endswith(f"): {path}") and "\n" not in message



def first_record_bytes(model_dir: Path, file: str) -> int:
    """Size of the first record of images.bin or points3D.bin, from nerfstudio's readers (dicts in file order)."""
    from nerfstudio.data.utils import colmap_parsing_utils

    if file == "images.bin":
        image = next(iter(colmap_parsing_utils.read_images_binary(model_dir / file).values()))
        return IMAGE_HEADER_BYTES + len(image.name.encode()) + 1 + 8 + POINT2D_BYTES * len(image.xys)
    point = next(iter(colmap_parsing_utils.read_points3D_binary(model_dir / file).values()))
    return POINT_HEADER_BYTES + TRACK_ELEMENT_BYTES * len(point.image_ids)


@BINARY_READERS
@pytest.mark.parametrize(
    "announced, cut_after_first_record, ends_inside",
    [(1, -5, 1), (2, 45, 2)],
    ids=["inside-first-track", "inside-second-header"],
)
def test_cut_binary_names_the_record_it_ends_in(
    tiny_scene: Path, tmp_path: Path, file: str, read, record: str, announced, cut_after_first_record, ends_inside
):
    model_dir = tiny_scene / "sparse" / "0"
    end = 8 + first_record_bytes(model_dir, file) + cut_after_first_record
    path = tmp_path / file
    path.write_bytes(np.uint64(announced).tobytes() + (model_dir / file).read_bytes()[8:end])
    expected = f"(the file ends inside {record} {ends_inside} of {announced}): {path}"
    with pytest.raises(ColmapFileError, match=re.escape(expected)):
        read(path)
