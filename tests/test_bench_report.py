"""Bench summaries: quality deltas pair runs with sync by seed; bench-report merges separate invocations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odin_ns.benchmarks.bench import BenchReportCommand, summarize


def run(name: str, seed: int, psnr: float, ssim: float = 0.9, step_s: float = 0.02) -> dict:
    return {"name": name, "ranks": 2, "seed": seed, "step_s": step_s, "views_per_s": 2 / step_s,
            "quality": {"psnr": psnr, "ssim": ssim}, "exposed_wait_s": 0.001, "compute_s": 0.01, "publish_s": 0.001,
            "timeline": [{"unit_id": 0, "compute_s": 0.01, "exposed_wait_s": 0.001, "comm_s": 0.002,
                          "publish_s": 0.001}]}


def test_quality_deltas_pair_runs_with_sync_of_the_same_seed():
    runs = [run("sync", 0, 27.0), run("sync", 1, 26.0), run("quality-first", 1, 26.5), run("quality-first", 0, 26.8),
            run("quality-first", 2, 10.0)]  # seed 2 has no sync run: left out of the deltas
    rows = {row["config"]: row for row in summarize(runs)}
    first = rows["quality-first"]
    assert first["quality_seeds"] == 2
    assert first["psnr_delta_mean"] == pytest.approx((0.5 - 0.2) / 2)
    assert first["psnr_delta_worst"] == pytest.approx(-0.2)
    assert first["psnr_delta_pct_worst"] == pytest.approx(-0.2 / 27.0 * 100)
    assert rows["sync"]["psnr_delta_worst"] == 0.0


def write_results(path: Path, runs: list, steps: int = 600) -> Path:
    path.write_text(json.dumps({"data": "data/cup77", "steps": steps, "gpus": 2, "runs": runs,
                                "summary": summarize(runs), "environment": {"gpu": "test"}}))
    return path


def test_bench_report_merges_seeds_of_separate_invocations(tmp_path: Path):
    first = write_results(tmp_path / "a.json", [run("sync", 0, 27.0), run("throughput-first", 0, 26.9)])
    second = write_results(tmp_path / "b.json", [run("sync", 2, 26.5), run("throughput-first", 2, 26.0)])
    out = tmp_path / "merged"
    BenchReportCommand(results=(first, second), out=out).main()
    merged = json.loads((out / "results.json").read_text())
    assert len(merged["runs"]) == 4 and len(merged["environments"]) == 2
    rows = {row["config"]: row for row in merged["summary"]}
    assert rows["throughput-first"]["quality_seeds"] == 2
    assert rows["throughput-first"]["psnr_delta_worst"] == pytest.approx(-0.5)
    for plot in ("throughput.png", "timeline.png", "quality.png"):
        assert (out / plot).stat().st_size > 1000


def test_bench_report_refuses_mixed_benches_and_repeated_seeds(tmp_path: Path):
    first = write_results(tmp_path / "a.json", [run("sync", 0, 27.0)])
    other_steps = write_results(tmp_path / "b.json", [run("sync", 1, 27.0)], steps=200)
    with pytest.raises(SystemExit, match="differ in data or steps"):
        BenchReportCommand(results=(first, other_steps), out=tmp_path / "x").main()
    with pytest.raises(SystemExit, match="appears twice"):
        BenchReportCommand(results=(first, first), out=tmp_path / "y").main()
