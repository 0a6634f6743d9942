"""no-exchange (the benchmarks' compute floor) under torchrun on two CPU ranks: its replicas diverge, densification
included, and a checkpoint still holds one loadable model, rank 0's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from odin_ns.runtime.replicas import digests
from odin_ns.trainer import state_digest_path
from training import DENSIFY_EARLY, final_checkpoint, torchrun, train

NO_EXCHANGE = ("--pipeline.odin.mode", "no-exchange", *DENSIFY_EARLY)
REFINED_STEPS = 22
"""Past the refine at step 20 (``DENSIFY_EARLY`` on 2 ranks): the ranks refine on their own statistics and end with
different Gaussian counts (6,033 and 5,873 on the tiny scene, measured 2026-11-30)."""
INITIAL_GAUSSIANS = 1856
"""The tiny scene's seed points (tests/test_multirank_e2e.py)."""


@pytest.mark.slow
def test_no_exchange_checkpoints_rank0_model_after_ranks_refine_apart(tiny_scene: Path, tmp_path: Path):
    """The final checkpoint holds rank 0's Gaussians with rank 0's densification statistics alone (a gather over
    ranks of unequal counts would fail), loads with weights_only, and two no-exchange ranks resume from it."""
    run_dir = train(tiny_scene, tmp_path / "first", REFINED_STEPS, *NO_EXCHANGE, launcher=torchrun(2))
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

    resumed = train(tiny_scene, tmp_path / "resumed", 2, *NO_EXCHANGE, "--load-dir", str(run_dir / "nerfstudio_models"),
                    launcher=torchrun(2))
    assert torch.load(final_checkpoint(resumed), map_location="cpu", weights_only=True)["step"] == REFINED_STEPS + 1
