"""Two "nodes" of two CPU ranks each, joined by torchrun's c10d rendezvous on this machine: one job of four ranks."""

from __future__ import annotations

import json

import pytest

from odin_ns.trainer import state_digest_path
from training import TWO_NODE_STEPS, unit_records


@pytest.mark.slow
def test_two_nodes_of_two_ranks_train_as_one_job(two_node_run):
    """The run (``two_node_run``, conftest.py: quality-first, both nodes exited 0) is also the quality-first side of
    test_multirank_e2e.py's four-rank equality with sync."""
    run_dir, outputs = two_node_run
    assert len(list((run_dir / "nerfstudio_models").glob("*.ckpt"))) == 1  # written by rank 0 alone
    digests = [json.loads(state_digest_path(run_dir, rank).read_text()) for rank in range(4)]
    assert all(digest == digests[0] for digest in digests), "the four ranks hold the same Gaussians and Adam state"
    assert len(unit_records(run_dir)) >= TWO_NODE_STEPS - 1
    plan_lines = [line for output in outputs for line in output.splitlines() if "Odin schedule:" in line]
    assert len(plan_lines) == 1 and "units of 4x1" in plan_lines[0], "rank 0 alone builds the plan"
