"""Replica consistency at barriers: identical ranks pass the check, one changed value on one rank is caught."""

from __future__ import annotations

from pathlib import Path

import torch
from runtime_toy import ToyModel, initial_params, make_runtime, spawn_ranks

from odin_ns.runtime.replicas import ReplicaDivergenceError


def check_then_diverge(rank: int, out_dir: Path) -> None:
    model = ToyModel(initial_params())
    runtime = make_runtime(model, mode="quality-first")
    runtime.verify_replicas()
    if rank == 1:
        with torch.no_grad():
            model.params["opacities"][7] += 1e-6
    try:
        runtime.verify_replicas()
    except ReplicaDivergenceError as error:
        (out_dir / f"rank{rank}.caught").write_text(str(error))


def test_divergent_replica_is_caught_on_every_rank(tmp_path: Path):
    assert spawn_ranks(check_then_diverge, tmp_path, world_size=2, backend="gloo") == [0, 0]
    for rank in range(2):
        assert "['opacities'] differ between ranks" in (tmp_path / f"rank{rank}.caught").read_text()
