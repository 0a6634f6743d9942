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
TRACK_LENGTH_AT = POINT_HEADER_BYTES - 8
"""Offset of the track length in a point record."""


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


class ColmapFileError(ValueError):
    """A COLMAP binary whose bytes do not hold the records it announces; the message names the problem and the file."""


def corrupt_file(path: Path, detail: str) -> ColmapFileError:
    """The error for a COLMAP binary whose bytes do not hold its records, in the one wording every reader uses."""
    return ColmapFileError(f"truncated or corrupt COLMAP {Path(path).name} ({detail}): {path}")


def check_nothing_after_records(path: Path, record: str, count: int, end: int, size: int) -> None:
    """Raise when bytes follow the ``count`` records that end at byte ``end`` (a count too small, or garbage)."""
    if end < size:
        raise corrupt_file(path, f"{size - end} bytes after the last of its {count} {record}s")


def _point_record_offsets(raw: bytes, path: Path) -> np.ndarray:
    """Where each record of points3D.bin starts, every record checked to lie inside the file; records have variable
    length (a track follows each header), so this is the one sequential pass of reading the file."""
    if len(raw) < 8:
        raise corrupt_file(path, f"{len(raw)} bytes, shorter than the 8-byte point count")
    count = int.from_bytes(raw[:8], "little")
    if count > (len(raw) - 8) // POINT_HEADER_BYTES:
        raise corrupt_file(path, f"it announces {count} points, its {len(raw)} bytes hold at most "
                             f"{(len(raw) - 8) // POINT_HEADER_BYTES}")
    offsets = np.empty(count, dtype=np.int64)
    offset = 8
    for index in range(count):
        offsets[index] = offset
        track_length = int.from_bytes(raw[offset + TRACK_LENGTH_AT : offset + POINT_HEADER_BYTES], "little")
        offset += POINT_HEADER_BYTES + TRACK_ELEMENT_BYTES * track_length
        if offset > len(raw):
            raise corrupt_file(path, f"the file ends inside point {index + 1} of {count}")
    check_nothing_after_records(path, "point", count, offset, len(raw))
    return offsets


def read_points3d_binary(path: Path) -> ColmapPoints:
    """Read points3D.bin; raises ColmapFileError when its bytes do not hold the points it announces."""
    data = np.fromfile(path, dtype=np.uint8)
    offsets = _point_record_offsets(data.tobytes(), path)
    track_lengths = _field(data, offsets, TRACK_LENGTH_AT, 8, "<u8")[:, 0].astype(np.int64)
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
    """Every image of images.bin by id: pose, camera and name; its 2D points are skipped, their extent checked.
    Raises ColmapFileError when the bytes do not hold the images the file announces."""
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise corrupt_file(path, f"{len(raw)} bytes, shorter than the 8-byte image count")
    count = int.from_bytes(raw[:8], "little")
    smallest_record = IMAGE_HEADER_BYTES + 1 + 8  # an empty name and no 2D points
    if count > (len(raw) - 8) // smallest_record:
        raise corrupt_file(path, f"it announces {count} images, its {len(raw)} bytes hold at most "
                             f"{(len(raw) - 8) // smallest_record}")
    images, offset = {}, 8
    for index in range(count):
        name_end = raw.find(b"\x00", offset + IMAGE_HEADER_BYTES)
        if name_end < 0 or name_end + 9 > len(raw):
            raise corrupt_file(path, f"the file ends inside image {index + 1} of {count}")
        try:
            name = raw[offset + IMAGE_HEADER_BYTES : name_end].decode("utf-8")
        except UnicodeDecodeError as error:
            raise corrupt_file(path, f"the name of image {index + 1} of {count} is not UTF-8") from error
        header = np.frombuffer(raw, dtype="<f8", count=7, offset=offset + 4)
        image_id = int.from_bytes(raw[offset : offset + 4], "little", signed=True)
        camera_id = int.from_bytes(raw[offset + 60 : offset + 64], "little", signed=True)
        num_points2d = int.from_bytes(raw[name_end + 1 : name_end + 9], "little")
        offset = name_end + 9 + POINT2D_BYTES * num_points2d
        if offset > len(raw):
            raise corrupt_file(path, f"the file ends inside image {index + 1} of {count}")
        images[image_id] = ColmapImage(image_id, header[:4].copy(), header[4:].copy(), camera_id, name)
    check_nothing_after_records(path, "image", count, offset, len(raw))
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
