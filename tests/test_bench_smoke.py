"""odin-bench bench end to end on two CPU ranks for a few steps: results.json has the schema, the plots exist."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from training import BIN


@pytest.mark.slow
def test_bench_writes_results_and_plots(tiny_scene: Path, tmp_path: Path):
    out = tmp_path / "bench"
    subprocess.run(
        [str(BIN / "odin-bench"), "bench", "--data", str(tiny_scene), "--gpus", "2", "--steps", "6", "--no-stock",
         "--modes", "sync,quality-first-predicted,no-exchange", "--out", str(out)],
        check=True, capture_output=True, text=True, timeout=600,
    )
    results = json.loads((out / "results.json").read_text())
    assert {"data", "steps", "gpus", "runs", "summary", "environment"} <= results.keys()
    rows = {row["config"]: row for row in results["summary"]}
    assert rows.keys() == {"sync", "quality-first-predicted", "no-exchange"}
    for row in rows.values():
        assert row["ranks"] == 2 and row["views_per_s_min"] <= row["views_per_s_median"] <= row["views_per_s_max"]
        assert row["step_time_vs_no_exchange"] > 0
    assert rows["sync"]["ratio_to_sync"] == 1.0
    assert "wait_hidden" in rows["quality-first-predicted"]
    evaluated = [run for run in results["runs"] if run["name"] != "no-exchange"]
    assert all("psnr" in run["quality"] for run in evaluated), [run["quality"] for run in evaluated]  # ns-eval ran
    assert rows["quality-first-predicted"]["psnr"] == rows["sync"]["psnr"]  # decided ahead, still sync's result
    assert all(run["exposed_wait_s"] >= 0 and run["timeline"] for run in results["runs"])
    assert all(len(run["timelines_by_rank"]) == 2 and all(run["timelines_by_rank"]) for run in results["runs"])
    assert all(len(run["host_ms_by_rank"]) == 2 and min(run["host_ms_by_rank"]) > 0 for run in results["runs"])
    assert all(len(row["host_ms_by_rank"].split(" / ")) == 2 for row in rows.values())
    for plot in ("throughput.png", "timeline.png", "quality.png"):
        assert (out / plot).stat().st_size > 1000
