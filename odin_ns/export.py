"""``odin-ns export``: a trained splatfacto run as the standard 3D Gaussian splatting PLY, and a reader for it.

Why it exists: nerfstudio's ``ns-export gaussian-splat`` imports open3d, which fails on headless machines
(``ImportError: libusb-1.0.so.0``) before it reads anything. This exporter needs only the run's ``config.yml``, the
latest checkpoint beside it and numpy: it builds no pipeline, loads no images and imports no viewer code.

The file is the one graphdeco-inria's ``GaussianModel.save_ply`` writes, which their ``load_ply`` and the web
viewers read (gsplat's later exporter writes the same names without normals): ``binary_little_endian 1.0``, one
``vertex`` element of float32 properties ``x y z nx ny nz f_dc_0..2 f_rest_0..f_rest_{3(K-1)-1} opacity scale_0..2
rot_0..3`` with

- normals zero, as the reference writes them;
- ``f_dc`` the SH DC coefficients and ``f_rest`` the other K-1 coefficients channel-major (all red coefficients,
  then green, then blue: the reference stores its features [N, 3, K] and flattens them so); splatfacto keeps them
  coefficient-major ([N, K-1, 3]), hence the transpose;
- ``opacity`` the logit and ``scale_*`` the log-scales (splatfacto's parameters already are);
- ``rot_*`` the quaternion w, x, y, z as stored (unnormalised; renderers normalise it).

A splatfacto model trained with ``sh_degree 0`` keeps colour logits in ``features_dc`` (it renders
``sigmoid(features_dc)``), not SH coefficients; the PLY has no field for that, so the exporter writes the DC
coefficient of the same colour, ``RGB2SH(sigmoid(features_dc))`` (as nerfstudio's exporter does): viewers then show
the trained colours, and the file renders as the model does up to float rounding.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Dict, List, Tuple

import numpy as np
import torch
import tyro
import yaml

from odin_ns.run_config import read_run_config

GAUSSIAN_PARAMS = ("means", "features_dc", "features_rest", "opacities", "scales", "quats")
"""splatfacto's Gaussian parameters, as ``_model.gauss_params.<name>`` in a checkpoint's ``pipeline`` state."""
SH_C0 = 0.28209479177387814
"""The degree-0 SH basis constant (nerfstudio's and gsplat's RGB2SH / SH2RGB)."""
PLY_SCALAR_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1", "short": "<i2", "int16": "<i2", "ushort": "<u2",
    "uint16": "<u2", "int": "<i4", "int32": "<i4", "uint": "<u4", "uint32": "<u4", "float": "<f4",
    "float32": "<f4", "double": "<f8", "float64": "<f8",
}
"""PLY scalar type names (both spellings of the specification) -> little-endian numpy types, so the reader also
takes files from writers that add other properties (colours as uchar, say)."""


class ExportError(ValueError):
    """Bad input to the exporter: the message is the one line the command prints."""


def first_line(error: BaseException) -> str:
    """An exception's message cut to its first line (library messages can run to several), for a one-line error."""
    return (str(error).splitlines() or [type(error).__name__])[0]


def checkpoint_dirs(config_path: Path) -> List[Path]:
    """Where a run's checkpoints can be: beside its config.yml (where ns-train writes it, so this holds for a run
    directory that was moved or a relative output dir read from elsewhere), then the run directory the config
    records (nerfstudio's ``TrainerConfig.get_checkpoint_dir``)."""
    if not config_path.is_file():
        raise ExportError(f"config not found: {config_path}")
    try:
        config = read_run_config(config_path)
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ExportError(f"{config_path} is not a YAML run config: {first_line(error)}") from None
    fields = ("output_dir", "experiment_name", "method_name", "timestamp", "relative_model_dir")
    if not isinstance(config, dict) or any(config.get(name) is None for name in fields):
        raise ExportError(f"{config_path} is not a nerfstudio run config (needs {', '.join(fields)})")
    model_dir = Path(config["relative_model_dir"])
    recorded = Path(config["output_dir"], str(config["experiment_name"]), str(config["method_name"]),
                    str(config["timestamp"]), model_dir)
    beside = config_path.parent / model_dir
    return [beside] if recorded.resolve() == beside.resolve() else [beside, recorded]


def latest_checkpoint(config_path: Path) -> Path:
    """The checkpoint of the highest step (nerfstudio's ``step-<step>.ckpt``) of the run ``config_path`` describes."""
    candidates = checkpoint_dirs(config_path)
    for directory in candidates:
        steps = {int(match.group(1)): path for path in directory.glob("step-*.ckpt")
                 if (match := re.fullmatch(r"step-(\d+)\.ckpt", path.name))}
        if steps:
            return steps[max(steps)]
    raise ExportError(f"no checkpoint (step-*.ckpt) in {' or '.join(map(str, candidates))}")


def load_gaussians(checkpoint: Path) -> Tuple[Dict[str, torch.Tensor], int]:
    """splatfacto's Gaussian parameters (float32, CPU) and the step of a checkpoint, read from its ``pipeline``
    state with ``weights_only`` (no model is built); shapes are checked against splatfacto's layout."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, not a torch file, or holding objects weights_only refuses
        raise ExportError(f"cannot read checkpoint {checkpoint}: {first_line(error)}") from None
    pipeline = state.get("pipeline") if isinstance(state, dict) else None
    keys = {name: f"_model.gauss_params.{name}" for name in GAUSSIAN_PARAMS}
    if not isinstance(pipeline, dict) or not all(isinstance(pipeline.get(key), torch.Tensor) for key in keys.values()):
        raise ExportError(f"checkpoint {checkpoint} holds no splatfacto Gaussians (pipeline _model.gauss_params.*)")
    gaussians = {name: pipeline[key].detach().to("cpu", torch.float32) for name, key in keys.items()}
    check_layout(gaussians, source=str(checkpoint))
    return gaussians, int(state.get("step", -1))


def sh_degree_of(features_rest: torch.Tensor) -> int:
    """The SH degree d whose (d+1)^2 coefficients are the DC one plus ``features_rest``'s K-1."""
    return math.isqrt(features_rest.shape[1] + 1) - 1


def check_layout(gaussians: Dict[str, torch.Tensor], source: str) -> None:
    """Raise ExportError unless the tensors have splatfacto's shapes: means [N,3], features_dc [N,3],
    features_rest [N,K-1,3] with K a square, opacities [N,1], scales [N,3], quats [N,4]."""
    count = gaussians["means"].shape[0]
    expected = {"means": (count, 3), "features_dc": (count, 3), "opacities": (count, 1), "scales": (count, 3),
                "quats": (count, 4)}
    for name, shape in expected.items():
        if tuple(gaussians[name].shape) != shape:
            raise ExportError(f"{source}: {name} has shape {list(gaussians[name].shape)}, expected {list(shape)}")
    rest = gaussians["features_rest"]
    square = rest.dim() == 3 and (sh_degree_of(rest) + 1) ** 2 == rest.shape[1] + 1
    if not square or rest.shape[0] != count or rest.shape[2] != 3:
        raise ExportError(f"{source}: features_rest has shape {list(rest.shape)}, expected [{count}, (d+1)^2 - 1, 3]")


def non_finite_rows(gaussians: Dict[str, torch.Tensor]) -> torch.Tensor:
    """bool [N]: the Gaussians with a NaN or Inf in any parameter."""
    bad = torch.zeros(gaussians["means"].shape[0], dtype=torch.bool)
    for tensor in gaussians.values():
        bad |= ~torch.isfinite(tensor.reshape(tensor.shape[0], -1)).all(dim=1)
    return bad


def ply_property_names(sh_degree: int) -> List[str]:
    """The vertex properties, in order, of a PLY holding SH degree ``sh_degree`` (graphdeco-inria's
    ``construct_list_of_attributes``)."""
    rest = 3 * ((sh_degree + 1) ** 2 - 1)
    return ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", *(f"f_rest_{i}" for i in range(rest)),
            "opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]


def sh_dc_coefficients(gaussians: Dict[str, torch.Tensor]) -> torch.Tensor:
    """[N, 3] SH DC coefficients: ``features_dc`` itself, or for an SH-degree-0 splatfacto model (colour logits)
    the DC coefficient of its colour ``sigmoid(features_dc)`` (see the module docstring)."""
    if gaussians["features_rest"].shape[1] > 0:
        return gaussians["features_dc"]
    return (torch.sigmoid(gaussians["features_dc"]) - 0.5) / SH_C0


def ply_rows(gaussians: Dict[str, torch.Tensor]) -> np.ndarray:
    """[N, P] little-endian float32, one row per Gaussian in ``ply_property_names`` order: the bytes of the body."""
    count = gaussians["means"].shape[0]
    columns = [
        gaussians["means"],
        torch.zeros(count, 3),
        sh_dc_coefficients(gaussians),
        gaussians["features_rest"].transpose(1, 2).flatten(start_dim=1),  # [N, K-1, 3] -> channel-major [N, 3(K-1)]
        gaussians["opacities"],
        gaussians["scales"],
        gaussians["quats"],
    ]
    return torch.cat(columns, dim=1).numpy().astype("<f4", copy=False)


def ply_header(count: int, sh_degree: int) -> bytes:
    """The ASCII header of a ``count``-Gaussian PLY of SH degree ``sh_degree``."""
    lines = ["ply", "format binary_little_endian 1.0", f"element vertex {count}",
             *(f"property float {name}" for name in ply_property_names(sh_degree)), "end_header"]
    return ("\n".join(lines) + "\n").encode("ascii")


def write_ply(path: Path, gaussians: Dict[str, torch.Tensor]) -> None:
    """Write ``gaussians`` (splatfacto's layout) as the standard PLY, through a temporary file renamed into place:
    an interrupted or failed export leaves no half-written file at ``path``."""
    rows = ply_rows(gaussians)
    header = ply_header(rows.shape[0], sh_degree_of(gaussians["features_rest"]))
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(staging, "wb") as file:
            file.write(header)
            rows.tofile(file)
        os.replace(staging, path)
    except OSError as error:
        raise ExportError(f"cannot write {path}: {error}") from None
    finally:
        if staging.exists():  # an export that failed part-way
            staging.unlink()


def read_ply(path: Path | str) -> Dict[str, torch.Tensor]:
    """A 3D Gaussian splatting PLY as splatfacto's tensors: means [N,3], features_dc [N,3], features_rest
    [N,K-1,3], opacities [N,1] (logits), scales [N,3] (log), quats [N,4] (wxyz), all float32. Properties are
    found by name, so files that add (colours) or omit (normals) properties read too. ``features_dc`` holds SH DC
    coefficients whatever the degree: render a degree-0 file with ``sh_degree=0``, not splatfacto's sigmoid."""
    path = Path(path)
    data = path.read_bytes()
    end = data.find(b"end_header\n")
    if not data.startswith(b"ply\n") or end < 0:
        raise ExportError(f"{path}: not a PLY file (no 'ply' ... 'end_header' header)")
    lines = data[:end].decode("ascii", errors="replace").splitlines()
    if "format binary_little_endian 1.0" not in lines:
        raise ExportError(f"{path}: only binary_little_endian 1.0 PLY files are read")
    elements: List[Tuple[str, int, List[Tuple[str, str]]]] = []
    for line in lines:
        words = line.split()
        if words[:1] == ["element"] and len(words) == 3 and words[2].isdigit():
            elements.append((words[1], int(words[2]), []))
        elif words[:1] == ["property"] and elements:
            if len(words) != 3 or words[1] not in PLY_SCALAR_TYPES:
                raise ExportError(f"{path}: unsupported property '{line}' (scalar properties only)")
            elements[-1][2].append((words[2], PLY_SCALAR_TYPES[words[1]]))
    if [name for name, _, _ in elements] != ["vertex"]:
        raise ExportError(f"{path}: expected one 'vertex' element, found {[name for name, _, _ in elements]}")
    _, count, properties = elements[0]
    dtype = np.dtype(properties)
    body = data[end + len(b"end_header\n"):]
    if len(body) != count * dtype.itemsize:
        raise ExportError(f"{path}: body has {len(body)} bytes, {count} vertices of {dtype.itemsize} need "
                          f"{count * dtype.itemsize} (truncated or not this layout)")
    vertices = np.frombuffer(body, dtype=dtype, count=count)
    names = set(dtype.names)
    rest_names = sorted((name for name in names if re.fullmatch(r"f_rest_\d+", name)), key=lambda n: int(n[7:]))
    required = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
                "rot_0", "rot_1", "rot_2", "rot_3"]
    missing = [name for name in required if name not in names]
    if missing or rest_names != [f"f_rest_{i}" for i in range(len(rest_names))] or len(rest_names) % 3:
        raise ExportError(f"{path}: not a 3D Gaussian splatting PLY (missing {missing or 'f_rest_* in threes'})")

    def columns(*wanted: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([vertices[name] for name in wanted], axis=1).astype(np.float32))

    rest = columns(*rest_names) if rest_names else torch.zeros(count, 0)
    gaussians = {
        "means": columns("x", "y", "z"),
        "features_dc": columns("f_dc_0", "f_dc_1", "f_dc_2"),
        "features_rest": rest.reshape(count, 3, len(rest_names) // 3).transpose(1, 2).contiguous(),
        "opacities": columns("opacity"),
        "scales": columns("scale_0", "scale_1", "scale_2"),
        "quats": columns("rot_0", "rot_1", "rot_2", "rot_3"),
    }
    check_layout(gaussians, source=str(path))
    return gaussians


def export(config: Path, out: Path, drop_non_finite: bool = False) -> str:
    """Write the latest checkpoint of the run ``config`` describes to ``out`` as the standard PLY; returns the
    summary line. Gaussians with NaN/Inf are refused (nothing written) unless ``drop_non_finite``, which drops them
    and says how many."""
    checkpoint = latest_checkpoint(Path(config))
    gaussians, step = load_gaussians(checkpoint)
    count = gaussians["means"].shape[0]
    bad = non_finite_rows(gaussians)
    dropped = int(bad.sum())
    if dropped and not drop_non_finite:
        raise ExportError(f"checkpoint {checkpoint}: {dropped} of {count} Gaussians have NaN or Inf values; nothing "
                          f"written (--drop-non-finite exports the other {count - dropped})")
    if dropped:
        gaussians = {name: tensor[~bad] for name, tensor in gaussians.items()}
    if dropped == count:
        raise ExportError(f"checkpoint {checkpoint} holds no finite Gaussians ({count} in all); nothing written")
    write_ply(Path(out), gaussians)
    degree = sh_degree_of(gaussians["features_rest"])
    note = f", dropped {dropped} with NaN or Inf values" if dropped else ""
    return f"Wrote {count - dropped} Gaussians (SH degree {degree}{note}) from {checkpoint} (step {step}) to {out}"


@dataclass(frozen=True)
class ExportCommand:
    """Export a trained run's Gaussians as a standard 3D Gaussian splatting .ply (no open3d needed)."""

    config: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="CONFIG")]
    """The run's config.yml (written by ns-train odin-splatfacto); the latest checkpoint of that run is read."""
    out: Path
    """The .ply file to write (replaced if it exists)."""
    drop_non_finite: bool = False
    """Drop Gaussians with NaN or Inf values (and report how many) instead of refusing to export."""

    def main(self) -> None:
        try:
            print(export(self.config, self.out, self.drop_non_finite))
        except ExportError as error:
            raise SystemExit(f"error: {error}") from None
