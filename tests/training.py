"""Helpers for end-to-end tests: run ns-train / ns-eval in subprocesses and read what they wrote."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Sequence

from odin_ns.runtime.records import UnitRecord, read_unit_log, unit_log

BIN = Path(sys.executable).parent
QUIET_TRAINING = [
    "--vis", "tensorboard",
    "--viewer.quit-on-train-completion", "True",
    "--logging.local-writer.enable", "False",
    "--steps-per-eval-image", "100000",
    "--steps-per-eval-all-images", "100000",
    "--steps-per-eval-batch", "0",
    "--pipeline.model.num-downscales", "0",
]
"""Train without viewer, periodic evaluation or resolution warm-up: tests look at the final model."""


def torchrun(ranks: int) -> List[str]:
    """torchrun's command prefix for ``ranks`` local processes on a free port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--master-port", str(port)]


def run(command: Sequence[str], timeout: float = 600, env: Dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``command``; on failure raise with the tail of its output (the assertion message a reader needs)."""
    result = subprocess.run(
        list(command), capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command[:3])}... exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def train(data: Path, output_dir: Path, steps: int, *extra: str, launcher: Sequence[str] = ()) -> Path:
    """Train odin-splatfacto for ``steps`` steps; returns the run directory (holding config.yml)."""
    ns_train = str(BIN / "ns-train")
    run([*launcher, ns_train, "odin-splatfacto", "--data", str(data), "--output-dir", str(output_dir),
         "--max-num-iterations", str(steps), *QUIET_TRAINING, *extra])
    (config,) = output_dir.glob("*/odin-splatfacto/*/config.yml")
    return config.parent


def evaluate(run_dir: Path) -> Dict[str, float]:
    """ns-eval on a run's config; returns the results dict (psnr, ssim, ...)."""
    output = run_dir / "eval.json"
    run([str(BIN / "ns-eval"), "--load-config", str(run_dir / "config.yml"), "--output-path", str(output)])
    return json.loads(output.read_text())["results"]


def scalar_series(run_dir: Path, tag: str) -> List[float]:
    """Values of a tensorboard scalar that nerfstudio's writer logged during training."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [event.value for event in events.Scalars(tag)]


def unit_records(run_dir: Path) -> List[UnitRecord]:
    """Per-unit Odin runtime records of rank 0."""
    return read_unit_log(unit_log(run_dir, 0))
