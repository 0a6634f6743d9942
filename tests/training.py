"""Helpers for end-to-end tests: run ns-train / ns-eval in subprocesses (forked from one that has imported them:
preloaded.py) and read what they wrote."""

from __future__ import annotations

import json
import os
import atexit
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

from odin_ns.runtime.records import UnitRecord, read_unit_log, unit_log
from preloaded import PreloadedCommands

BIN = Path(sys.executable).parent
QUIET_TRAINING = [
    "--vis", "tensorboard",
    "--viewer.quit-on-train-completion", "True",
    "--logging.local-writer.enable", "False",
    "--steps-per-eval-image", "100000",
    "--steps-per-eval-all-images", "100000",
    "--steps-per-eval-batch", "0",
    "--pipeline.model.num-downscales", "0",
    "--pipeline.odin.bucket-mb", "0.05",
]
"""Train without viewer, periodic evaluation or resolution warm-up: tests look at the final model. The tiny scenes'
exchange (1,856 rows of 236 bytes to start, 0.42 MB) is cut into buckets of 192 rows (0.05 MB), ten of them at the
start and more once they densify, so quality-first has windows to overlap."""

DEMO_STEPS = 300
"""Single-process steps of the tiny demo scene's run that several tests share (``demo_run`` in conftest.py)."""

DENSIFY_EARLY = (
    "--pipeline.model.warmup-length", "20",
    "--pipeline.model.refine-every", "20",
    "--pipeline.model.reset-alpha-every", "3",
)
DENSIFY_STEPS = 40
STRUCTURE_CHANGES = [0, 20, 30]
"""Schedules count views: with 2 ranks (2 views per step) this refines every 10 steps after a warm-up of 10, resets
opacities every 30 steps and pauses refining for 10 + 10 steps after a reset (gsplat's rule, 21 training views), so a
40-step run resets opacities at step 0, densifies at step 20 and resets opacities again at step 30: the units after
which the Gaussians' structure changes (checked against the unit records)."""
EVALUATE_DURING_TRAINING = ("--steps-per-eval-image", "10", "--steps-per-eval-all-images", str(DENSIFY_STEPS - 1))
"""An evaluation image at steps 10, 20 and 30 of a 40-step run, and every held-out image at its last step (the final
model: the metrics ns-eval computes from the final checkpoint)."""
CAMERA_OPTIMIZER = ("--pipeline.model.camera-optimizer.mode", "SO3xR3")
"""A dense group beside the Gaussians, averaged over ranks and stepped every unit."""
MID_RUN_CHECKPOINT = 16
SAVE_MID_RUN = ("--steps-per-save", str(MID_RUN_CHECKPOINT), "--save-only-latest-checkpoint", "False")
"""Checkpoints at steps 16 and 32 besides the final one, all kept: a run resumed from step 16 carries 17 steps of
densification statistics into the refine at step 20, then crosses the reset at step 30."""
SCALE_REGULARIZATION = ("--pipeline.model.use-scale-regularization", "True", "--pipeline.model.max-gauss-ratio", "1.0")
"""Splatfacto's scale regularizer every tenth step, reaching every Gaussian (a ratio of 1 is reached by all): rows
no view of the step saw join its update scope, or quality-first's dense Adam would drift them without their
gradient and part from sync."""
DENSIFYING_RUN_OPTIONS = (*DENSIFY_EARLY, *EVALUATE_DURING_TRAINING, *CAMERA_OPTIMIZER, *SAVE_MID_RUN,
                          *SCALE_REGULARIZATION)
DENSIFYING_MODES = {
    "sync": ("--pipeline.odin.mode", "sync"),
    "quality-first": ("--pipeline.odin.mode", "quality-first"),
}
"""The 2-rank runs ``densifying_runs`` (conftest.py) trains on demand, each with ``DENSIFYING_RUN_OPTIONS``: the
multi-rank equality test compares both, the resume test resumes quality-first's from its step-16 checkpoint."""

TWO_NODE_STEPS = 20
"""Steps of the two-node quality-first run (``two_node_run`` in conftest.py)."""


def torchrun(ranks: int) -> List[str]:
    """torchrun's command prefix for ``ranks`` local processes on a free port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--master-port", str(port)]


PRELOADED = PreloadedCommands(Path(tempfile.mkdtemp(prefix="preloaded-commands-")))
"""ns-train and ns-eval, started by fork from one process that imported them once (preloaded.py)."""
atexit.register(PRELOADED.close)


def run_command(command: Sequence[str], timeout: float = 600, env: Dict[str, str] | None = None
                ) -> subprocess.CompletedProcess:
    """Run ``command`` to its end, capturing its output: forked from ``PRELOADED`` where it serves the command, else
    as a new process."""
    environment = {**os.environ, **(env or {})}
    return PRELOADED.run(command, timeout, environment) or subprocess.run(
        list(command), capture_output=True, text=True, timeout=timeout, env=environment
    )


def run(command: Sequence[str], timeout: float = 600, env: Dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``run_command``; on failure raise with the tail of its output (the assertion message a reader needs)."""
    result = run_command(command, timeout, env)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command[:3])}... exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


TRAINING_OUTPUT = "training_output.txt"
"""What ``train`` keeps of the command's stdout and stderr, in the run directory."""


def train(
    data: Path, output_dir: Path, steps: int, *extra: str, launcher: Sequence[str] = (),
    trainer: Sequence[str] = (str(BIN / "ns-train"),),
) -> Path:
    """Train odin-splatfacto for ``steps`` steps with ``trainer`` (ns-train, or the lab's launcher: ``-m
    odin_bench.train ...`` under torchrun); returns the run directory (holding config.yml)."""
    result = run([*launcher, *trainer, "odin-splatfacto", "--data", str(data), "--output-dir", str(output_dir),
                  "--max-num-iterations", str(steps), *QUIET_TRAINING, *extra])
    (config,) = output_dir.glob("*/odin-splatfacto/*/config.yml")
    (config.parent / TRAINING_OUTPUT).write_text(result.stdout + result.stderr)
    return config.parent


def train_two_nodes(
    data: Path, output_dir: Path, steps: int, *extra: str, timeout: float = 400
) -> Tuple[Path, List[str]]:
    """Train under two torchrun "nodes" of two ranks each on this machine, joined by a c10d rendezvous: one job of four
    ranks. Returns the run directory and each node's output (stdout and stderr); raises if a node fails."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{sock.getsockname()[1]}"
    nodes = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
             "--node-rank", str(node), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "odin-test",
             str(BIN / "ns-train"), "odin-splatfacto", "--data", str(data), "--output-dir", str(output_dir),
             "--max-num-iterations", str(steps), *QUIET_TRAINING, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for node in range(2)
    ]
    try:
        outputs = [node.communicate(timeout=timeout)[0] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
    if [node.returncode for node in nodes] != [0, 0]:
        codes = [node.returncode for node in nodes]
        raise AssertionError(f"nodes exited {codes}:\n{outputs[0][-3000:]}\n{outputs[1][-3000:]}")
    (run_dir,) = {config.parent for config in output_dir.glob("*/odin-splatfacto/*/config.yml")}
    return run_dir, outputs


class TrainedRuns:
    """Runs trained on first use and kept for the session, so that tests asserting different things about the same
    configuration share one run. A run that failed raises the same error for every test that asks for it."""

    def __init__(self, train_one: Callable[[str], Path]) -> None:
        self._train_one = train_one
        self._done: Dict[str, Path | BaseException] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self._done:
            try:
                self._done[name] = self._train_one(name)
            except Exception as error:  # noqa: BLE001 - re-raised to every test that needs this run
                self._done[name] = error
        result = self._done[name]
        if isinstance(result, BaseException):
            raise result
        return result


def final_checkpoint(run_dir: Path) -> Path:
    """The checkpoint of a run's last step (a run saving mid-run keeps several, named by zero-padded step)."""
    checkpoints = sorted((run_dir / "nerfstudio_models").glob("step-*.ckpt"))
    assert checkpoints, f"no checkpoint in {run_dir / 'nerfstudio_models'}"
    return checkpoints[-1]


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


def structure_changes(run_dir: Path) -> List[int]:
    """Units after which the Gaussians' structure changed (densification or opacity reset), from rank 0's records."""
    records = unit_records(run_dir)
    return [before.unit_id for before, after in zip(records, records[1:])
            if after.structure_version != before.structure_version]
