"""Reading COLMAP models: seed points and image headers from binaries, tracks from binary or text models.

nerfstudio's readers build Python objects per point and per observation, seconds to tens of seconds at a million
points, and every rank and ns-eval reads the model; these read the same values with array operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

POINT_HEADER_BYTES = 8 + 3 * 8 + 3 + 8 + 8
"""point3D_id (uint64), xyz (3 float64), rgb (3 uint8), error (float64), track length (uint64)."""
TRACK_ELEMENT_BYTES = 8
"""image_id (int32), point2D_idx (int32)."""


@dataclass
class ColmapPoints:
    """All points of a points3D.bin as parallel arrays, in file order."""

    ids: np.ndarray  # [P] int64
    xyz: np.ndarray  # [P, 3] float64
    rgb: np.ndarray  # [P, 3] uint8
    error: np.ndarray  # [P] float64
    track_lengths: np.ndarray  # [P] int64
    track_image_ids: np.ndarray  # [sum(track_lengths)] int32, point after point


def _field(data: np.ndarray, offsets: np.ndarray, start: int, size: int, dtype: str) -> np.ndarray:
    """The ``size``-byte field at ``start`` of every record beginning at ``offsets``, as ``dtype``."""
    rows = data[offsets[:, None] + np.arange(start, start + size)]
    return np.ascontiguousarray(rows).view(dtype)


def read_points3d_binary(path: Path) -> ColmapPoints:
    """Read points3D.bin; raises ValueError when the file ends inside a record."""
    data = np.fromfile(path, dtype=np.uint8)
    if len(data) < 8:
        raise ValueError(f"truncated COLMAP points file: {path}")
    count = int(data[:8].view("<u8")[0])
    offsets = np.empty(count, dtype=np.int64)
    raw = data.tobytes()
    offset = 8
    length_at = POINT_HEADER_BYTES - 8
    for index in range(count):  # records have variable length: only the offsets need a sequential pass
        offsets[index] = offset
        track_length = int.from_bytes(raw[offset + length_at : offset + POINT_HEADER_BYTES], "little")
        offset += POINT_HEADER_BYTES + TRACK_ELEMENT_BYTES * track_length
    if offset != len(data):
        raise ValueError(f"COLMAP points file {path} has {len(data)} bytes, its records need {offset}")
    track_lengths = _field(data, offsets, length_at, 8, "<u8")[:, 0].astype(np.int64)
    track_starts = np.repeat(offsets + POINT_HEADER_BYTES, track_lengths)
    element = np.arange(int(track_lengths.sum())) - np.repeat(np.cumsum(track_lengths) - track_lengths, track_lengths)
    image_id_offsets = track_starts + TRACK_ELEMENT_BYTES * element
    return ColmapPoints(
        ids=_field(data, offsets, 0, 8, "<u8")[:, 0].astype(np.int64),
        xyz=_field(data, offsets, 8, 24, "<f8"),
        rgb=_field(data, offsets, 32, 3, "u1"),
        error=_field(data, offsets, 35, 8, "<f8")[:, 0],
        track_lengths=track_lengths,
        track_image_ids=_field(data, image_id_offsets, 0, 4, "<i4")[:, 0],
    )


IMAGE_HEADER_BYTES = 4 + 7 * 8 + 4
"""image_id (int32), qvec (4 float64), tvec (3 float64), camera_id (int32); then the name, NUL-terminated."""
POINT2D_BYTES = 8 + 8 + 8
"""x, y (float64), point3D_id (int64)."""


@dataclass
class ColmapImage:
    """One image of images.bin without its 2D points (they are skipped, not parsed)."""

    id: int
    qvec: np.ndarray  # [4] float64
    tvec: np.ndarray  # [3] float64
    camera_id: int
    name: str


def read_images_binary_headers(path: Path) -> dict[int, ColmapImage]:
    """Every image of images.bin by id: pose, camera and name; its 2D points are skipped."""
    raw = Path(path).read_bytes()
    count = int.from_bytes(raw[:8], "little")
    images, offset = {}, 8
    for _ in range(count):
        header = np.frombuffer(raw, dtype="<f8", count=7, offset=offset + 4)
        image_id = int.from_bytes(raw[offset : offset + 4], "little", signed=True)
        camera_id = int.from_bytes(raw[offset + 60 : offset + 64], "little", signed=True)
        name_end = raw.index(b"\x00", offset + IMAGE_HEADER_BYTES)
        name = raw[offset + IMAGE_HEADER_BYTES : name_end].decode("utf-8")
        num_points2d = int.from_bytes(raw[name_end + 1 : name_end + 9], "little")
        offset = name_end + 9 + POINT2D_BYTES * num_points2d
        images[image_id] = ColmapImage(image_id, header[:4].copy(), header[4:].copy(), camera_id, name)
    if offset != len(raw):
        raise ValueError(f"COLMAP images file {path} has {len(raw)} bytes, its records need {offset}")
    return images


def read_tracks(model_dir: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Image names (by ascending image id) and the observations of a COLMAP model as parallel arrays: the image row
    (an index into the names) and the point index (0 .. points - 1, ordered by point id) of every observation.

    Binary models are read from images.bin and points3D.bin; text models from the 2D points of images.txt, the side
    of the cross-reference that names each observation's image.
    """
    if _is_binary_model(model_dir):
        return _read_tracks_binary(model_dir)
    if (model_dir / "images.txt").exists():
        return _read_tracks_text(model_dir / "images.txt")
    raise FileNotFoundError(f"no COLMAP model (images.bin and points3D.bin, or images.txt) in {model_dir}")


def has_tracks(model_dir: Path) -> bool:
    """Whether ``read_tracks`` finds a model in ``model_dir``."""
    return _is_binary_model(model_dir) or (model_dir / "images.txt").exists()


def _is_binary_model(model_dir: Path) -> bool:
    return (model_dir / "images.bin").exists() and (model_dir / "points3D.bin").exists()


def _read_tracks_binary(model_dir: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    images = read_images_binary_headers(model_dir / "images.bin")
    points = read_points3d_binary(model_dir / "points3D.bin")
    image_ids = np.array(sorted(images), dtype=np.int64)
    row_of_image_id = np.full(int(image_ids.max()) + 1 if len(image_ids) else 1, -1, dtype=np.int64)
    row_of_image_id[image_ids] = np.arange(len(image_ids))
    point_of_obs = np.repeat(np.argsort(np.argsort(points.ids)), points.track_lengths)  # index = rank of the point id
    return [images[int(i)].name for i in image_ids], row_of_image_id[points.track_image_ids], point_of_obs


def _read_tracks_text(images_file: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """images.txt holds two lines per image: ``IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME``, then its 2D points
    as ``X Y POINT3D_ID`` triples (-1: not triangulated; the line is empty for an image without points)."""
    names, point_ids = {}, {}
    lines = iter(images_file.read_text().splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        header = line.split()
        image_id = int(header[0])
        ids = np.array(next(lines, "").split()[2::3], dtype=np.int64)
        names[image_id], point_ids[image_id] = header[9], ids[ids != -1]
    ordered = sorted(names)
    counts = [len(point_ids[image_id]) for image_id in ordered]
    all_ids = np.concatenate([point_ids[image_id] for image_id in ordered]) if ordered else np.zeros(0, np.int64)
    point_of_obs = np.unique(all_ids, return_inverse=True)[1].reshape(-1)
    return [names[image_id] for image_id in ordered], np.repeat(np.arange(len(ordered)), counts), point_of_obs
