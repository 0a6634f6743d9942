"""Two "nodes" of two CPU ranks each, joined by torchrun's c10d rendezvous on this machine: one job of four ranks."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from odin_ns.trainer import state_digest_path
from training import BIN, QUIET_TRAINING, unit_records


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_of_two_ranks_train_as_one_job(tiny_scene: Path, tmp_path: Path):
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
             "--node-rank", str(node), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "odin-test",
             str(BIN / "ns-train"), "odin-splatfacto", "--data", str(tiny_scene), "--output-dir", str(tmp_path),
             "--max-num-iterations", "12", *QUIET_TRAINING, "--pipeline.odin.mode", "quality-first"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for node in range(2)
    ]
    outputs = [node.communicate(timeout=400)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    (run_dir,) = {config.parent for config in tmp_path.glob("*/odin-splatfacto/*/config.yml")}
    assert len(list((run_dir / "nerfstudio_models").glob("*.ckpt"))) == 1  # written by rank 0 alone
    digests = [json.loads(state_digest_path(run_dir, rank).read_text()) for rank in range(4)]
    assert all(digest == digests[0] for digest in digests), "the four ranks hold the same Gaussians and Adam state"
    assert len(unit_records(run_dir)) >= 11
    plan_lines = [line for output in outputs for line in output.splitlines() if "Odin schedule:" in line]
    assert len(plan_lines) == 1 and "units of 4x1" in plan_lines[0], "rank 0 alone builds the plan"
