"""The lab's no-exchange (``python -m odin_bench.train --no-exchange``, the benchmarks' compute floor: every rank
trains alone through the pipeline's replica context) under torchrun on two CPU ranks: its replicas diverge,
densification included, and a checkpoint still holds one loadable model, rank 0's."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from odin_ns.pipeline import OdinPipeline
from odin_ns.runtime.replicas import digests
from odin_ns.trainer import state_digest_path
from training import DENSIFY_EARLY, final_checkpoint, torchrun, train

NO_EXCHANGE = ("--pipeline.odin.mode", "sync", *DENSIFY_EARLY)
NO_EXCHANGE_TRAINER = ("-m", "odin_bench.train", "--no-exchange")
"""torchrun's module to run on every rank: the lab's launcher, every rank training alone."""
REFINED_STEPS = 22
"""Past the refine at step 20 (``DENSIFY_EARLY`` on 2 ranks): the ranks refine on their own statistics and end with
different Gaussian counts (6,033 and 5,873 on the tiny scene, measured 2026-11-30)."""
INITIAL_GAUSSIANS = 1856
"""The tiny scene's seed points (tests/test_multirank_e2e.py)."""


@pytest.mark.slow
def test_no_exchange_checkpoints_rank0_model_after_ranks_refine_apart(tiny_scene: Path, tmp_path: Path):
    """The final checkpoint holds rank 0's Gaussians with rank 0's densification statistics alone (a gather over
    ranks of unequal counts would fail) and loads with weights_only (resuming from it: the test below)."""
    run_dir = train(tiny_scene, tmp_path / "first", REFINED_STEPS, *NO_EXCHANGE, launcher=torchrun(2),
                    trainer=NO_EXCHANGE_TRAINER)
    state = torch.load(final_checkpoint(run_dir), map_location="cpu", weights_only=True)
    assert state["step"] == REFINED_STEPS - 1
    means = state["pipeline"]["_model.gauss_params.means"]
    assert means.shape[0] > INITIAL_GAUSSIANS, "the run must have refined"
    statistics = state["densification_statistics"]
    assert statistics and all(value.shape[:2] == (1, means.shape[0]) for value in statistics.values()), {
        key: tuple(value.shape) for key, value in statistics.items()}
    rank_means = [json.loads(state_digest_path(run_dir, rank).read_text())["model.gauss_params.means"]
                  for rank in range(2)]
    saved = digests({"means": means})["means"]
    assert saved == rank_means[0] != rank_means[1], "the checkpoint is rank 0's model; rank 1's diverged"


def test_every_no_exchange_rank_resumes_from_the_checkpoints_one_row_of_statistics():
    """In no-exchange each rank is a replica of its own (``_replica_context``: a one-rank context that keeps its
    global rank): rank 1 resuming takes the checkpoint's single row, as rank 0 does, where indexing by its global
    rank would fail. With a replica shared by two ranks, each takes its own row."""
    statistics = {"grad2d": torch.tensor([[1.0, 2.0, 3.0]]), "count": torch.tensor([[4.0, 5.0, 6.0]])}
    for rank in (0, 1):
        alone = SimpleNamespace(model=SimpleNamespace(strategy_state={}), device="cpu",
                                replica_context=SimpleNamespace(rank=rank, world_size=1))
        OdinPipeline.restore_densification_statistics(alone, statistics)
        assert {key: value.tolist() for key, value in alone.model.strategy_state.items()} == {
            "grad2d": [1.0, 2.0, 3.0], "count": [4.0, 5.0, 6.0]}
    shared = SimpleNamespace(model=SimpleNamespace(strategy_state={}), device="cpu",
                             replica_context=SimpleNamespace(rank=1, world_size=2))
    OdinPipeline.restore_densification_statistics(shared, {"count": torch.tensor([[1.0, 1.0], [7.0, 8.0]])})
    assert shared.model.strategy_state["count"].tolist() == [7.0, 8.0]
