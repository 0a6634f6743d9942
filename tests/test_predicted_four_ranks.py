"""Predicted read scopes on 4 ranks (gloo): quality-first decided ahead equals sync on every rank, across a
structural change; the 2-rank scenarios are in test_runtime_distributed.py."""

from __future__ import annotations

from pathlib import Path

import torch
from runtime_toy import cell_view, spawn_ranks
from test_runtime_distributed import assert_same_state, records_of, train_predicted

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
    torch.save(results, out_dir / f"rank{rank}.pt")


def test_four_ranks_predicted_read_scopes_equal_sync(tmp_path: Path):
    exit_codes = spawn_ranks(worker, tmp_path, WORLD_SIZE, backend="gloo")
    assert exit_codes == [0] * WORLD_SIZE, [error.read_text() for error in sorted(tmp_path.glob("rank*.error"))]
    results = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]
    for rank_results in results:
        for name in ("train", "densify"):
            assert_same_state(rank_results[f"{name}/quality-first"][0], rank_results[f"{name}/sync"][0])
        windows = [record.window for record in records_of(rank_results["train/quality-first"]) if record.window]
        assert windows and all(window.predicted and window.overlapped for window in windows)
    for rank_results in results[1:]:
        assert_same_state(rank_results["train/quality-first"][0], results[0]["train/quality-first"][0])
