"""Stopping and resuming as users do: Ctrl-C on one rank of a torchrun job, and a checkpoint cut short."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import torch

from test_multirank_e2e import assert_bitwise_equal_runs
from training import BIN, QUIET_TRAINING, torchrun, train


def rank_processes(launcher: subprocess.Popen) -> dict[int, psutil.Process]:
    processes = [p for p in psutil.Process(launcher.pid).children(recursive=True) if "ns-train" in " ".join(p.cmdline())]
    return {int(process.environ()["RANK"]): process for process in processes}


@pytest.mark.slow
def test_ctrl_c_on_one_rank_drains_saves_and_exits_non_zero(tiny_scene: Path, tmp_path: Path):
    command = [*torchrun(2), str(BIN / "ns-train"), "odin-splatfacto", "--data", str(tiny_scene), "--output-dir",
               str(tmp_path), "--max-num-iterations", "100000", *QUIET_TRAINING, "--pipeline.odin.mode", "quality-first"]
    launcher = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("*/odin-splatfacto/*/odin_units_rank1.jsonl")):  # both ranks are training
        assert launcher.poll() is None and time.monotonic() < deadline, "training did not start"
        time.sleep(0.5)
    rank_processes(launcher)[1].send_signal(signal.SIGINT)
    output, _ = launcher.communicate(timeout=240)
    assert launcher.returncode != 0, output[-3000:]
    lines = [line for line in output.splitlines() if "training stopped by SIGINT" in line]
    assert len(lines) == 2, output[-3000:]  # one line per rank
    (checkpoint,) = tmp_path.glob("*/odin-splatfacto/*/nerfstudio_models/*.ckpt")
    assert str(checkpoint) in "".join(output.split()), "the line says where the checkpoint is"
    state = torch.load(checkpoint, map_location="cpu")
    assert checkpoint.name == f"step-{state['step']:09d}.ckpt" and state["step"] > 0
    assert not list(checkpoint.parent.glob("*.partial"))


@pytest.mark.slow
def test_a_truncated_checkpoint_is_refused_in_one_line(tiny_scene: Path, tmp_path: Path):
    run_dir = train(tiny_scene, tmp_path / "first", 5)
    (checkpoint,) = (run_dir / "nerfstudio_models").glob("*.ckpt")
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    resumed = subprocess.run(
        [str(BIN / "ns-train"), "odin-splatfacto", "--data", str(tiny_scene), "--output-dir", str(tmp_path / "again"),
         "--max-num-iterations", "5", *QUIET_TRAINING, "--load-dir", str(checkpoint.parent)],
        capture_output=True, text=True, timeout=300, env=os.environ,
    )
    assert resumed.returncode != 0
    assert f"error: checkpoint {checkpoint} is truncated" in resumed.stderr + resumed.stdout


REFINE_OFTEN = ("--pipeline.model.warmup-length", "40", "--pipeline.model.refine-every", "40",
                "--pipeline.model.reset-alpha-every", "30", "--pipeline.odin.mode", "quality-first")
"""Counted in views, 2 ranks: refines at steps 40, 60 and 80 (an opacity reset at step 0), so a run stopped at step 50
carries ten steps of densification statistics into the refine at step 60."""


@pytest.mark.slow
def test_resume_equals_uninterrupted_across_a_refine(tiny_scene: Path, tmp_path: Path):
    whole = train(tiny_scene, tmp_path / "whole", 71, *REFINE_OFTEN, launcher=torchrun(2))
    first = train(tiny_scene, tmp_path / "first", 51, *REFINE_OFTEN, launcher=torchrun(2))
    resumed = train(tiny_scene, tmp_path / "resumed", 20, *REFINE_OFTEN, "--load-dir",
                    str(first / "nerfstudio_models"), launcher=torchrun(2))
    assert_bitwise_equal_runs(whole, resumed, ranks=2)
    means = torch.load(next((whole / "nerfstudio_models").glob("*.ckpt")), map_location="cpu")["pipeline"]
    assert means["_model.gauss_params.means"].shape[0] > 1856, "the runs must have refined"
