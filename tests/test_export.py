"""odin-ns export: a trained run as the standard 3D Gaussian splatting PLY, without open3d.

The layout is checked against graphdeco-inria's ``save_ply`` written out here (property names, and the body as its
``np.concatenate`` of xyz, normals, f_dc, transposed f_rest, opacity, scale, rotation), independently of the
module's reader; the reader is checked by the round trip, and the round trip by rendering: the exported Gaussians
draw the checkpoint's image. plyfile, an outside reader, reads the file by property name as 3DGS loaders do. The
layout is checked on Gaussians with view-dependent colour: a short run's rest coefficients are zeros, on which a
layout that mixed coefficients and channels would pass (a deliberate mix made these tests fail).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import pytest
import torch
import yaml
from nerfstudio.models.splatfacto import get_viewmat

from odin_ns.export import ExportCommand, ExportError, export, read_ply
from odin_ns.rendering import scaled_intrinsics
from odin_ns.rendering import rasterize_fn
from training import train

pytestmark = pytest.mark.slow

STEPS = 30
PARAMS = ("means", "features_dc", "features_rest", "opacities", "scales", "quats")
REFERENCE_PROPERTIES_SH3 = ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2",
                            *(f"f_rest_{i}" for i in range(45)),
                            "opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
"""graphdeco-inria's ``construct_list_of_attributes`` for SH degree 3 (15 rest coefficients x 3 channels)."""
REFERENCE_PROPERTIES_SH0 = ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2",
                            "opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
SH_C0 = 0.28209479177387814


@pytest.fixture(scope="module")
def run_dir(tiny_scene: Path, tmp_path_factory) -> Path:
    """A real ns-train odin-splatfacto run (SH degree 3, the default) of STEPS steps on the CPU."""
    return train(tiny_scene, tmp_path_factory.mktemp("export_run"), STEPS)


def checkpoint_state(run: Path) -> dict:
    (checkpoint,) = (run / "nerfstudio_models").glob("step-*.ckpt")
    return torch.load(checkpoint, map_location="cpu", weights_only=True)


def checkpoint_gaussians(run: Path) -> Dict[str, torch.Tensor]:
    """The Gaussians as the checkpoint stores them, read here without the exporter's loader."""
    pipeline = checkpoint_state(run)["pipeline"]
    return {name: pipeline[f"_model.gauss_params.{name}"] for name in PARAMS}


def derived_run(run: Path, target: Path, edit: Callable[[Dict[str, torch.Tensor]], None]) -> Path:
    """A copy of ``run`` (config.yml and checkpoint) whose Gaussians ``edit`` changed in place; returns its config.
    The exporter finds the checkpoint beside the copied config before the directory the config records."""
    state = checkpoint_state(run)
    gaussians = {name: state["pipeline"][f"_model.gauss_params.{name}"] for name in PARAMS}
    edit(gaussians)
    state["pipeline"].update({f"_model.gauss_params.{name}": tensor for name, tensor in gaussians.items()})
    (target / "nerfstudio_models").mkdir(parents=True)
    shutil.copy(run / "config.yml", target / "config.yml")
    torch.save(state, target / "nerfstudio_models" / f"step-{state['step']:09d}.ckpt")
    return target / "config.yml"


def with_view_dependent_colour(gaussians: Dict[str, torch.Tensor]) -> None:
    """Rest coefficients as training past splatfacto's first SH degree increase leaves them: distinct, non-zero. A
    STEPS-step run still renders SH degree 0, so its rest coefficients are zeros, which any layout writes alike."""
    generator = torch.Generator().manual_seed(0)
    gaussians["features_rest"] = 0.1 * torch.randn(gaussians["features_rest"].shape, generator=generator)


@pytest.fixture(scope="module")
def coloured_run(run_dir: Path, tmp_path_factory) -> Path:
    """``run_dir`` with view-dependent colour (``with_view_dependent_colour``): the run the layout is checked on."""
    return derived_run(run_dir, tmp_path_factory.mktemp("coloured"), with_view_dependent_colour).parent


def as_sh_degree_0(gaussians: Dict[str, torch.Tensor]) -> None:
    """A splatfacto ``sh_degree 0`` state: no rest coefficients, features_dc colour logits (any reals are)."""
    gaussians["features_rest"] = gaussians["features_rest"][:, :0, :].contiguous()


def training_camera(run: Path):
    """The run's first training camera, from its own dataparser (the frame its Gaussians live in)."""
    config = yaml.load((run / "config.yml").read_text(), Loader=yaml.Loader)
    dataparser = config.pipeline.datamanager.dataparser
    dataparser.data = config.data
    return dataparser.setup().get_dataparser_outputs("train").cameras[0:1]


def render(gaussians: Dict[str, torch.Tensor], camera, splatfacto_sh0: bool = False) -> torch.Tensor:
    """The CPU reference rasterizer's image of ``gaussians`` from ``camera``, with splatfacto's parameter mapping
    (odin_ns.model ``_rasterization_inputs``) at the full SH degree. ``splatfacto_sh0``: features_dc are colour
    logits (splatfacto's sh_degree 0 path, sigmoid colours) instead of SH coefficients."""
    colors = torch.cat((gaussians["features_dc"][:, None, :], gaussians["features_rest"]), dim=1)
    sh_degree = math.isqrt(colors.shape[1]) - 1
    if splatfacto_sh0:
        colors, sh_degree = torch.sigmoid(colors).squeeze(1), None
    width, height = int(camera.width[0, 0]), int(camera.height[0, 0])
    image, _, _ = rasterize_fn("reference")(
        means=gaussians["means"], quats=gaussians["quats"], scales=torch.exp(gaussians["scales"]),
        opacities=torch.sigmoid(gaussians["opacities"]).squeeze(-1), colors=colors,
        viewmats=get_viewmat(camera.camera_to_worlds), Ks=scaled_intrinsics(camera, 1.0), width=width,
        height=height, near_plane=0.01, far_plane=1e10, sh_degree=sh_degree, packed=False,
    )
    return image


def split_ply(path: Path):
    """(header lines, body bytes) of a PLY, parsed here without the module's reader."""
    data = path.read_bytes()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    return data[:end].decode("ascii").splitlines(), data[end:]


def reference_body(gaussians: Dict[str, torch.Tensor], f_dc: torch.Tensor) -> bytes:
    """graphdeco-inria ``save_ply``'s rows: its features are [N, K, 3] like splatfacto's and it writes
    ``features.transpose(1, 2).flatten(start_dim=1)``, so f_rest is channel-major."""
    xyz = gaussians["means"].numpy()
    f_rest = gaussians["features_rest"].transpose(1, 2).flatten(start_dim=1).contiguous().numpy()
    rows = np.concatenate((xyz, np.zeros_like(xyz), f_dc.numpy(), f_rest, gaussians["opacities"].numpy(),
                           gaussians["scales"].numpy(), gaussians["quats"].numpy()), axis=1)
    return rows.astype("<f4").tobytes()


def test_export_matches_the_reference_layout_and_renders_the_checkpoint(run_dir: Path, coloured_run: Path,
                                                                        tmp_path: Path):
    out = tmp_path / "scene.ply"
    summary = export(coloured_run / "config.yml", out)
    saved = checkpoint_gaussians(coloured_run)
    count = saved["means"].shape[0]
    assert f"Wrote {count} Gaussians (SH degree 3)" in summary and f"step {STEPS - 1}" in summary

    header, body = split_ply(out)
    assert header[:3] == ["ply", "format binary_little_endian 1.0", f"element vertex {count}"]
    assert header[-1] == "end_header"
    assert [line.split()[:2] for line in header[3:-1]] == [["property", "float"]] * len(REFERENCE_PROPERTIES_SH3)
    assert [line.split()[2] for line in header[3:-1]] == REFERENCE_PROPERTIES_SH3
    assert body == reference_body(saved, saved["features_dc"])
    # channel-major f_rest, read straight from the bytes: f_rest_1 is red's second coefficient, f_rest_15 green's first
    rows = np.frombuffer(body, dtype="<f4").reshape(count, len(REFERENCE_PROPERTIES_SH3))
    assert np.array_equal(rows[:, 10], saved["features_rest"][:, 1, 0].numpy())
    assert np.array_equal(rows[:, 24], saved["features_rest"][:, 0, 1].numpy())

    read = read_ply(out)
    for name in PARAMS:
        assert read[name].dtype == torch.float32 and torch.equal(read[name], saved[name]), name

    camera = training_camera(run_dir)
    expected = render(saved, camera)
    assert expected.amax() > 0.05, "the checkpoint's render is empty: the comparison would prove nothing"
    assert torch.equal(render(read, camera), expected)


def test_plyfile_reads_the_export_as_3dgs_loaders_do(coloured_run: Path, tmp_path: Path):
    """An outside reader: plyfile (what graphdeco-inria's loader and many viewers' converters read 3DGS files with),
    reading by property name. The rest coefficients are ordered by their number and, being channel-major, reshape to
    [N, 3, K]; splatfacto keeps them [N, K, 3]."""
    from plyfile import PlyData

    out = tmp_path / "scene.ply"
    export(coloured_run / "config.yml", out)
    saved = checkpoint_gaussians(coloured_run)
    (vertices,) = PlyData.read(str(out)).elements
    assert vertices.name == "vertex" and vertices.count == saved["means"].shape[0]

    def columns(names) -> torch.Tensor:
        return torch.from_numpy(np.stack([np.asarray(vertices[name]) for name in names], axis=1))

    names = [prop.name for prop in vertices.properties]
    rest = sorted((name for name in names if name.startswith("f_rest_")), key=lambda name: int(name.split("_")[-1]))
    coefficients = len(rest) // 3
    loaded = {
        "means": columns(["x", "y", "z"]),
        "features_dc": columns(["f_dc_0", "f_dc_1", "f_dc_2"]),
        "features_rest": columns(rest).reshape(-1, 3, coefficients).transpose(1, 2),
        "opacities": columns(["opacity"]),
        "scales": columns([f"scale_{i}" for i in range(3)]),
        "quats": columns([f"rot_{i}" for i in range(4)]),
    }
    for name in PARAMS:
        assert torch.equal(loaded[name], saved[name]), name


def test_sh_degree_0_exports_the_colour_as_its_dc_coefficient(run_dir: Path, tmp_path: Path):
    """splatfacto's sh_degree 0 keeps colour logits; the file holds the SH DC coefficient of that colour (what
    viewers read), so the read-back Gaussians render the model's image with sh_degree 0, up to float rounding."""
    config = derived_run(run_dir, tmp_path / "sh0", as_sh_degree_0)
    saved = checkpoint_gaussians(config.parent)
    out = tmp_path / "sh0.ply"
    assert "(SH degree 0)" in export(config, out)

    header, body = split_ply(out)
    assert [line.split()[2] for line in header[3:-1]] == REFERENCE_PROPERTIES_SH0
    dc = (torch.sigmoid(saved["features_dc"]) - 0.5) / SH_C0  # nerfstudio's RGB2SH(sigmoid(features_dc))
    assert body == reference_body(saved, dc)

    read = read_ply(out)
    assert read["features_rest"].shape == (saved["means"].shape[0], 0, 3)
    assert torch.equal(read["features_dc"], dc)
    for name in ("means", "opacities", "scales", "quats"):
        assert torch.equal(read[name], saved[name]), name

    camera = training_camera(run_dir)
    expected = render(saved, camera, splatfacto_sh0=True)
    difference = (render(read, camera) - expected).abs().max().item()
    assert difference <= 1e-6, f"sh_degree 0 render differs by {difference}"


def test_non_finite_gaussians_are_refused_or_dropped_with_a_count(run_dir: Path, tmp_path: Path):
    def poison(gaussians: Dict[str, torch.Tensor]) -> None:
        gaussians["means"][5, 0] = float("nan")
        gaussians["quats"][7, 2] = float("inf")
        gaussians["features_rest"][5, 3, 1] = float("-inf")  # the same row twice counts once

    config = derived_run(run_dir, tmp_path / "poisoned", poison)
    saved = checkpoint_gaussians(config.parent)
    count = saved["means"].shape[0]
    out = tmp_path / "poisoned.ply"
    with pytest.raises(ExportError, match=f"2 of {count} Gaussians have NaN or Inf values; nothing written"):
        export(config, out)
    assert not out.exists()

    assert f"Wrote {count - 2} Gaussians (SH degree 3, dropped 2 with NaN or Inf values)" in export(config, out, True)
    keep = torch.ones(count, dtype=torch.bool)
    keep[[5, 7]] = False
    read = read_ply(out)
    for name in PARAMS:
        assert torch.equal(read[name], saved[name][keep]), name


def one_line_error(command: ExportCommand) -> str:
    """The message ``odin-ns export`` exits with (``error: ...``), checked to be one line."""
    with pytest.raises(SystemExit) as exit_info:
        command.main()
    message = str(exit_info.value.code)
    assert message.startswith("error: ") and "\n" not in message, message
    return message


def test_bad_input_gives_one_line_errors_and_writes_nothing(run_dir: Path, tmp_path: Path):
    out = tmp_path / "out.ply"
    assert "config not found" in one_line_error(ExportCommand(tmp_path / "missing.yml", out))

    not_a_config = tmp_path / "notes.yml"
    not_a_config.write_text("just: text\n")
    assert "is not a nerfstudio run config" in one_line_error(ExportCommand(not_a_config, out))

    elsewhere = tmp_path / "no_checkpoint"  # neither beside the config nor where it records: another timestamp
    elsewhere.mkdir()
    text = (run_dir / "config.yml").read_text()
    (elsewhere / "config.yml").write_text(text.replace(f"timestamp: {run_dir.name}", "timestamp: never-trained"))
    assert "no checkpoint (step-*.ckpt) in" in one_line_error(ExportCommand(elsewhere / "config.yml", out))

    truncated = derived_run(run_dir, tmp_path / "truncated", lambda gaussians: None)
    (checkpoint,) = (truncated.parent / "nerfstudio_models").glob("*.ckpt")
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    assert f"cannot read checkpoint {checkpoint}" in one_line_error(ExportCommand(truncated, out))

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    inside_a_file = blocker / "x.ply"
    assert f"cannot write {inside_a_file}" in one_line_error(ExportCommand(run_dir / "config.yml", inside_a_file))
    assert not out.exists()

    written = tmp_path / "good.ply"
    export(run_dir / "config.yml", written)
    cut = tmp_path / "cut.ply"
    cut.write_bytes(written.read_bytes()[:-4])
    with pytest.raises(ExportError, match="truncated"):
        read_ply(cut)


def test_cli_exports_where_open3d_cannot_import(run_dir: Path, tmp_path: Path):
    """A headless machine, imitated: an ``open3d`` that fails to import as it does without libusb. nerfstudio's
    exporter module then fails at import; ``odin-ns export`` writes the file, and exits non-zero with one line on
    bad input."""
    broken = tmp_path / "headless" / "open3d"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("libusb-1.0.so.0: cannot open shared object file")\n')
    python_path = [str(broken.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(python_path)}

    def odin_ns(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "odin_ns.cli", *args], capture_output=True, text=True,
                              env=env, timeout=120)

    stock = subprocess.run([sys.executable, "-c", "import nerfstudio.scripts.exporter"], capture_output=True,
                           text=True, env=env, timeout=120)
    assert stock.returncode != 0 and "libusb-1.0.so.0" in stock.stderr

    out = tmp_path / "scene.ply"
    result = odin_ns("export", str(run_dir / "config.yml"), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert torch.equal(read_ply(out)["means"], checkpoint_gaussians(run_dir)["means"])

    failed = odin_ns("export", str(tmp_path / "missing.yml"), "--out", str(out))
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    # the last line; library warnings may precede it (nerfstudio, imported by other subcommands' modules)
    assert failed.stderr.strip().splitlines()[-1] == f"error: config not found: {tmp_path / 'missing.yml'}"
