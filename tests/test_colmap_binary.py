"""Vectorised COLMAP binary readers give what pycolmap and nerfstudio's readers give, on a real and a generated model."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from odin_ns.schedule import tracks
from odin_ns.schedule.colmap_binary import read_images_binary_headers

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

def test_binary_tracks_equal_pycolmap_and_nerfstudio(model_dir: Path):
    pycolmap = pytest.importorskip("pycolmap")
    names, image_of_obs, point_of_obs = tracks._read_tracks_binary(model_dir)
    reference = tracks._read_tracks_pycolmap(pycolmap.Reconstruction(str(model_dir)))
    assert names == reference[0]
    assert tracks_by_point(names, image_of_obs, point_of_obs) == tracks_by_point(*reference)
    assert tracks_by_point(*tracks._read_tracks_nerfstudio(model_dir)) == tracks_by_point(*reference)
    assert sorted(set(point_of_obs.tolist())) == list(range(point_of_obs.max() + 1))
