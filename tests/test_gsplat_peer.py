"""The gsplat-distributed benchmark peer: its driver learns on one CPU rank; on 2+ GPUs it trains sharded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from training import run, torchrun

PEER = [sys.executable, "-m", "odin_bench.gsplat_distributed"]


def train_peer(data: Path, out: Path, steps: int, *extra: str, launcher=()) -> dict:
    run([*launcher, *PEER, "--data", str(data), "--output-dir", str(out), "--steps", str(steps), *extra])
    peer = json.loads((out / "peer.json").read_text())
    peer["quality"] = json.loads((out / "eval.json").read_text())["results"]
    return peer


def test_peer_driver_learns_on_one_cpu_rank(tiny_scene: Path, tmp_path: Path):
    before = train_peer(tiny_scene, tmp_path / "zero", 0, "--renderer", "reference")
    after = train_peer(tiny_scene, tmp_path / "trained", 60, "--renderer", "reference")
    assert len(after["step_s"]) == 60 and after["ranks"] == 1 and after["densification"] is False
    assert after["num_gaussians"] == before["num_gaussians"] > 0
    assert after["quality"]["psnr"] > before["quality"]["psnr"] + 2.0


def test_peer_refuses_reference_renderer_on_several_ranks(tiny_scene: Path, tmp_path: Path):
    with pytest.raises(AssertionError, match="single rank only"):
        run([*torchrun(2), "-m", "odin_bench.gsplat_distributed", "--data", str(tiny_scene),
             "--output-dir", str(tmp_path), "--steps", "1", "--renderer", "reference"])


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="gsplat's distributed rasterization needs 2 CUDA GPUs")
def test_peer_trains_sharded_on_two_gpus(tiny_scene: Path, tmp_path: Path):
    single = train_peer(tiny_scene, tmp_path / "one", 0)
    sharded = train_peer(tiny_scene, tmp_path / "two", 100, launcher=torchrun(2))
    assert sharded["ranks"] == 2 and sharded["num_gaussians"] == single["num_gaussians"]
    assert sharded["quality"]["psnr"] > single["quality"]["psnr"] + 2.0
