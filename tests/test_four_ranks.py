"""Four gloo ranks: quality-first (measured and predicted read scopes, dense Adam and selective) equals sync on every
rank, across a structural change; the 2-rank scenarios are in test_runtime_distributed.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from runtime_toy import cell_view, initial_params, spawn_ranks
from test_runtime_distributed import assert_same_state, records_of, train, train_predicted

WORLD_SIZE = 4
ROWS_APART = [[cell_view(cell) for cell in cells] for cells in [(0, 1, 2, 3), (12, 13, 14, 15)] * 12]
"""Four ranks, one cell each; units alternate between the first and the last row of the grid, whose predicted
scopes (a cell's bucket reaches its neighbours) miss each other."""


def worker(rank: int, out_dir: Path) -> None:
    results = {
        f"{name}/{mode}": train_predicted(rank, mode, ROWS_APART, densify=densify)
        for name, densify in (("train", False), ("densify", True))
        for mode in ("sync", "quality-first")
    }
    for adam in ("dense", "selective"):
        for mode in ("sync", "quality-first"):
            results[f"measured/{mode}/{adam}"] = train(rank, ROWS_APART, initial_params(), mode=mode, adam=adam)
    torch.save(results, out_dir / f"rank{rank}.pt")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict]:
    """Every rank's results of one spawn of four ranks."""
    out_dir = tmp_path_factory.mktemp("four-ranks")
    exit_codes = spawn_ranks(worker, out_dir, WORLD_SIZE, backend="gloo")
    assert exit_codes == [0] * WORLD_SIZE, [error.read_text() for error in sorted(out_dir.glob("rank*.error"))]
    return [torch.load(out_dir / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]


def test_four_ranks_predicted_read_scopes_equal_sync(results):
    for rank_results in results:
        for name in ("train", "densify"):
            assert_same_state(rank_results[f"{name}/quality-first"][0], rank_results[f"{name}/sync"][0])
        windows = [record.window for record in records_of(rank_results["train/quality-first"]) if record.window]
        assert windows and all(window.predicted and window.overlapped for window in windows)
    for rank_results in results[1:]:
        assert_same_state(rank_results["train/quality-first"][0], results[0]["train/quality-first"][0])


def test_four_ranks_measured_read_scopes_equal_sync_with_either_adam(results):
    """Dense Adam's drift of the rows outside each unit's update scope, ahead of its exchange, keeps quality-first
    bitwise sync on four ranks while windows overlap; selective Adam too; the two optimizers differ."""
    for rank_results in results:
        for adam in ("dense", "selective"):
            run = rank_results[f"measured/quality-first/{adam}"]
            assert_same_state(run[0], rank_results[f"measured/sync/{adam}"][0])
            windows = [record.window for record in records_of(run) if record.window]
            assert sum(window.overlapped for window in windows) == len(ROWS_APART) - 1
        assert not torch.equal(rank_results["measured/sync/dense"][0]["means"],
                               rank_results["measured/sync/selective"][0]["means"])
    for rank_results in results[1:]:
        assert_same_state(rank_results["measured/quality-first/dense"][0], results[0]["measured/quality-first/dense"][0])

