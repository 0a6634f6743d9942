"""Stopping and resuming as users do: Ctrl-C on one rank of a torchrun job, and a checkpoint cut short."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import torch

from odin_ns.trainer import checkpoint_name
from test_multirank_e2e import assert_bitwise_equal_runs, checkpoint_tensors
from training import (
    BIN,
    DENSIFY_STEPS,
    DENSIFYING_MODES,
    DENSIFYING_RUN_OPTIONS,
    MID_RUN_CHECKPOINT,
    QUIET_TRAINING,
    final_checkpoint,
    run_command,
    torchrun,
    train,
    unit_records,
)


def rank_processes(launcher: subprocess.Popen) -> dict[int, psutil.Process]:
    processes = [p for p in psutil.Process(launcher.pid).children(recursive=True) if "ns-train" in " ".join(p.cmdline())]
    return {int(process.environ()["RANK"]): process for process in processes}


@pytest.mark.slow
@pytest.mark.parametrize(("stop", "rank"), [(signal.SIGINT, 1), (signal.SIGTERM, 0)],
                         ids=["SIGINT-rank1", "SIGTERM-rank0"])
def test_a_stop_signal_on_one_rank_drains_saves_and_exits_non_zero(stop: signal.Signals, rank: int, tiny_scene: Path,
                                                                    tmp_path: Path):
    """Ctrl-C (SIGINT) or a scheduler's SIGTERM, to a rank that is not the one that saves and to the one that does."""
    command = [*torchrun(2), str(BIN / "ns-train"), "odin-splatfacto", "--data", str(tiny_scene), "--output-dir",
               str(tmp_path), "--max-num-iterations", "100000", *QUIET_TRAINING, "--pipeline.odin.mode", "quality-first"]
    launcher = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("*/odin-splatfacto/*/odin_units_rank1.jsonl")):  # both ranks are training
        assert launcher.poll() is None and time.monotonic() < deadline, "training did not start"
        time.sleep(0.5)
    rank_processes(launcher)[rank].send_signal(stop)
    output, _ = launcher.communicate(timeout=240)
    assert launcher.returncode != 0, output[-3000:]
    lines = [line for line in output.splitlines() if f"training stopped by {stop.name}" in line]
    assert len(lines) == 2, output[-3000:]  # one line per rank
    (checkpoint,) = tmp_path.glob("*/odin-splatfacto/*/nerfstudio_models/*.ckpt")
    assert all(line.rstrip().endswith(f"checkpoint: {checkpoint}") for line in lines), lines  # where, on that line
    state = torch.load(checkpoint, map_location="cpu")
    assert checkpoint.name == f"step-{state['step']:09d}.ckpt" and state["step"] > 0
    assert not list(checkpoint.parent.glob("*.partial"))


@pytest.mark.slow
def test_a_truncated_checkpoint_is_refused_in_one_line(tiny_scene: Path, tmp_path: Path, demo_run: Path):
    """Resuming from a checkpoint cut in half (a copy of the shared demo run's)."""
    checkpoint = tmp_path / "first" / "nerfstudio_models" / final_checkpoint(demo_run).name
    checkpoint.parent.mkdir(parents=True)
    shutil.copyfile(final_checkpoint(demo_run), checkpoint)
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    resumed = run_command([str(BIN / "ns-train"), "odin-splatfacto", "--data", str(tiny_scene), "--output-dir",
                           str(tmp_path / "again"), "--max-num-iterations", "5", *QUIET_TRAINING, "--load-dir",
                           str(checkpoint.parent)], timeout=300)
    assert resumed.returncode != 0
    assert f"error: checkpoint {checkpoint} is truncated" in resumed.stderr + resumed.stdout


@pytest.mark.slow
def test_resume_equals_uninterrupted_across_a_refine(tiny_scene: Path, tmp_path: Path, densifying_runs):
    """quality-first on 2 ranks (``DENSIFYING_RUN_OPTIONS``: refine at step 20, opacity resets at steps 0 and 30,
    evaluation during training, camera optimizer) resumed from the uninterrupted run's own step-16 checkpoint: it
    carries 17 steps of densification statistics into the refine and ends bitwise the uninterrupted run."""
    whole = densifying_runs["quality-first"]
    first = whole / "nerfstudio_models"
    assert (first / checkpoint_name(MID_RUN_CHECKPOINT)).exists()
    resumed = train(tiny_scene, tmp_path / "resumed", DENSIFY_STEPS - MID_RUN_CHECKPOINT - 1, *DENSIFYING_RUN_OPTIONS,
                    *DENSIFYING_MODES["quality-first"], "--load-dir", str(first),
                    "--load-step", str(MID_RUN_CHECKPOINT), launcher=torchrun(2))
    assert min(unit.unit_id for unit in unit_records(resumed)) == MID_RUN_CHECKPOINT + 1
    assert_bitwise_equal_runs(whole, resumed, ranks=2)
    assert checkpoint_tensors(whole)["pipeline._model.gauss_params.means"].shape[0] > 1856, "the runs must have refined"


@pytest.mark.slow
def test_a_nan_gradient_stops_training_at_the_next_checkpoint_and_leaves_the_last_one_intact(tiny_scene: Path,
                                                                                           tmp_path: Path):
    """The trainer's own path, in one process: a NaN loss at step 4 poisons every gradient; the steps after it make no
    host read (nothing raised yet), and the checkpoint due next stops the run, naming the step, before it is written."""
    from odin_ns.in_process import in_process_trainer, run_step
    from odin_ns.runtime.finite import NonFiniteGradientError

    trainer = in_process_trainer(tiny_scene, tmp_path, "cpu", warmup_length=10_000)
    for step in range(4):
        run_step(trainer, step)
    trainer.save_checkpoint(3)
    (checkpoint,) = trainer.checkpoint_dir.glob("*.ckpt")
    saved = checkpoint.read_bytes()
    model = trainer.pipeline.model
    clean_loss = model.get_loss_dict
    model.get_loss_dict = lambda *args: {name: loss * float("nan") for name, loss in clean_loss(*args).items()}
    run_step(trainer, 4)
    model.get_loss_dict = clean_loss
    run_step(trainer, 5)
    with pytest.raises(NonFiniteGradientError, match="on rank 0 at step 4") as stopped:
        trainer.save_checkpoint(5)
    assert all(f"'{group}'" in str(stopped.value) for group in ("means", "opacities", "features_dc"))
    assert sorted(path.name for path in trainer.checkpoint_dir.iterdir()) == [checkpoint.name]
    assert checkpoint.read_bytes() == saved
