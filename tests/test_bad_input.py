"""Input that cannot be trained on stops ns-train at once, before the config is printed: one line naming the file, the
problem and what to do, a non-zero exit, no traceback and no run directory named or left behind. What each broken
file raises is tested where it is read (test_dataparser.py, test_colmap_reader.py); here, how a run ends on it, and
the checks the datamanager makes. The cases run forked from the suite's preloaded ns-train (preloaded.py); one runs
as a fresh process too, whose whole output a user sees."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from odin_ns.data.dataparser import DatasetError
from odin_ns.trainer import remove_untrained_run_directory
from training import BIN, PRELOADED, QUIET_TRAINING, run_command


def ns_train(scene: Path, output_dir: Path) -> subprocess.CompletedProcess:
    return run_command([str(BIN / "ns-train"), "odin-splatfacto", "--data", str(scene), "--output-dir", str(output_dir),
                        "--max-num-iterations", "5", *QUIET_TRAINING], timeout=300)


def scene_without_its_first_image(tiny_scene: Path, tmp_path: Path) -> tuple[Path, str]:
    scene = tmp_path / "scene"
    shutil.copytree(tiny_scene, scene)
    missing = sorted((scene / "images").iterdir())[0]
    missing.unlink()
    return scene, f"image listed in the COLMAP model is missing: {missing}"


CASES = ["folder without a model", "missing image", "unwritable output directory"]
MAX_LINES = 15
"""What a run that cannot train may print in all, its error included (in a fresh process the dependencies'
import-time warnings that come before odin_ns is imported are part of it)."""


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_bad_input_ends_the_run_in_one_line_before_the_config_and_leaves_nothing(case: str, tiny_scene: Path,
                                                                                  tmp_path: Path):
    """ns-train checks the settings, the capture (everything odin-data validates) and the output folder before it
    prints the config: the error comes within a few lines, as one line, and no run directory is named or made."""
    output_dir = tmp_path / "outputs"
    if case == "folder without a model":
        scene = tmp_path / "photos"
        shutil.copytree(tiny_scene / "images", scene / "images")
        expected = f"no COLMAP model (sparse/0, colmap/sparse/0, sparse with cameras and images) and no " \
                   f"transforms.json in {scene}: run COLMAP on the images first"
    elif case == "missing image":
        scene, expected = scene_without_its_first_image(tiny_scene, tmp_path)
    else:
        scene = tiny_scene
    if case == "unwritable output directory":
        blocker = tmp_path / "a_file"
        blocker.write_text("a file where the output folder should be")
        output_dir = blocker / "outputs"
        expected = f"cannot write the run directory {output_dir}"
    result = ns_train(scene, output_dir)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], output[-3000:]
    assert len(output.splitlines()) <= MAX_LINES, output[-3000:]
    assert "Traceback" not in output and "Saving" not in output, output[-3000:]
    assert not list(output_dir.rglob("*")), "nothing half-written"


@pytest.mark.slow
def test_a_fresh_ns_train_ends_as_the_forked_one_does_and_prints_no_more_than_its_imports_add(tmp_path: Path):
    """The cases above run forked; here the console script starts as a user starts it, on a folder that does not
    exist: the same exit status and error line, and its whole output within ``MAX_LINES``."""
    command = [str(BIN / "ns-train"), "odin-splatfacto", "--data", str(tmp_path / "missing"), "--output-dir",
               str(tmp_path / "out")]
    fresh = subprocess.run(command, capture_output=True, text=True, timeout=300)
    forked = PRELOADED.run(command, 300, dict(os.environ))
    assert forked is not None, "the preloaded process refused to fork"
    assert forked.returncode == fresh.returncode == 1

    def error_lines(result: subprocess.CompletedProcess) -> list[str]:
        return [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]

    assert error_lines(forked) == error_lines(fresh) != [], (fresh.stderr[-2000:], forked.stderr[-2000:])
    assert len((fresh.stdout + fresh.stderr).splitlines()) <= MAX_LINES, fresh.stdout + fresh.stderr


def test_an_untrained_run_directory_goes_with_its_empty_parents_and_a_checkpointed_one_stays(tmp_path: Path):
    outputs = tmp_path / "outputs"
    untrained = outputs / "scene" / "odin-splatfacto" / "2026-12-01_000000"
    untrained.mkdir(parents=True)
    (untrained / "config.yml").write_text("config")
    trained = outputs / "other" / "odin-splatfacto" / "2026-11-30_000000"
    (trained / "nerfstudio_models").mkdir(parents=True)
    remove_untrained_run_directory(untrained, outputs)
    remove_untrained_run_directory(trained, outputs)
    assert not (outputs / "scene").exists() and outputs.is_dir()
    assert (trained / "nerfstudio_models").is_dir()


def tiny_datamanager(scene: Path, context, **options):
    from odin_ns.data.dataparser import OdinDataParserConfig
    from odin_ns.data.datamanager import OdinDataManagerConfig

    config = OdinDataManagerConfig(dataparser=OdinDataParserConfig(data=scene), cache_images="cpu", **options)
    return config.setup(device="cpu", dist_context=context)


def single_rank() -> SimpleNamespace:
    return SimpleNamespace(rank=0, world_size=1, is_main=True, broadcast_object=lambda value, what: value)


def test_more_ranks_than_training_views_is_refused_on_every_rank(tiny_scene: Path):
    """Checked where every rank builds its datamanager, not only where rank 0 builds the plan (the others would wait
    for a broadcast that never comes)."""
    late_rank = SimpleNamespace(rank=29, world_size=30, is_main=False, broadcast_object=lambda value, what: value)
    with pytest.raises(DatasetError, match=f"{tiny_scene} has 21 training views, but 30 ranks x 1 views per rank"):
        tiny_datamanager(tiny_scene, late_rank)


def test_a_plan_file_of_another_capture_is_named_and_stops_every_rank(tiny_scene: Path, tmp_path: Path):
    from odin_ns.data.datamanager import PlanCommand
    from odin_ns.data.demo_scene import generate_demo_scene

    other = generate_demo_scene(tmp_path / "other", num_views=16, width=64, height=48, gaussians_per_region=50, seed=1)
    PlanCommand(data=other, out=tmp_path / "plan").main()
    plan_file = tmp_path / "plan" / "plan.npz"
    with pytest.raises(DatasetError) as refused:
        tiny_datamanager(tiny_scene, single_rank(), plan_path=plan_file).plan
    message = str(refused.value)
    assert f"plan file {plan_file} cannot drive this capture ({tiny_scene})" in message and "\n" not in message
    # the other ranks receive rank 0's error in place of the plan and raise it too
    other_rank = SimpleNamespace(rank=1, world_size=2, is_main=False, broadcast_object=lambda value, what: refused.value)
    with pytest.raises(DatasetError, match="cannot drive this capture"):
        tiny_datamanager(tiny_scene, other_rank, plan_path=plan_file).plan


@pytest.mark.slow
@pytest.mark.parametrize("option, value", [("--pipeline.odin.adam", "auto"), ("--pipeline.odin.mode", "hogwild")])
def test_an_unknown_choice_is_refused_in_one_line_naming_the_choices(tiny_scene: Path, tmp_path: Path, option: str,
                                                                      value: str):
    """An option with choices (``--pipeline.odin.adam``: dense or selective) refuses anything else while the command
    line is parsed, in one line naming the value, the option and the choices, before anything is set up; the
    output's other lines are torch's warning, raised before any plugin loads."""
    result = run_command([str(BIN / "ns-train"), "odin-splatfacto", "--data", str(tiny_scene), "--output-dir",
                          str(tmp_path / "out"), option, value], timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    said = [line for line in output.splitlines() if "warn" not in line.lower()]
    choices = {"--pipeline.odin.adam": "dense, selective", "--pipeline.odin.mode": "sync, quality-first, throughput-first"}
    assert said == [f"error: {option} does not take '{value}'; choose one of: {choices[option]}"], output[-3000:]
    assert not (tmp_path / "out").exists()


def test_the_one_line_refusal_is_installed_for_odin_splatfacto_commands_only():
    from odin_ns.parse_errors import refusal_line, say_invalid_choices_in_one_line

    assert not say_invalid_choices_in_one_line(["splatfacto", "--data", "x"])
    assert not say_invalid_choices_in_one_line([])
    assert refusal_line("auto", "--pipeline.odin.adam", ("dense", "selective")) == (
        "error: --pipeline.odin.adam does not take 'auto'; choose one of: dense, selective")
