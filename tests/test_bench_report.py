"""Bench summaries: quality deltas pair runs with a reference by seed; window statistics come from the unit records;
bench-report merges separate invocations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from odin_bench import bench
from odin_bench.bench import BenchCommand, BenchReportCommand, paired_quality_deltas, summarize_configurations
from odin_bench.throughput_first_quality import window_statistics
from odin_ns.runtime.records import UnitRecord, WindowRecord, unit_log, write_unit_log
from odin_ns.sync.hazards import DelayBound


def run(name: str, seed: int, psnr: float, ssim: float = 0.9, step_s: float = 0.02) -> dict:
    return {"name": name, "ranks": 2, "seed": seed, "step_s": step_s, "views_per_s": 2 / step_s,
            "quality": {"psnr": psnr, "ssim": ssim}, "exposed_wait_s": 0.001, "compute_s": 0.01, "publish_s": 0.001,
            "timeline": [{"unit_id": 0, "compute_s": 0.01, "exposed_wait_s": 0.001, "comm_s": 0.002,
                          "publish_s": 0.001}]}


def test_quality_deltas_pair_runs_with_sync_of_the_same_seed():
    runs = [run("sync", 0, 27.0), run("sync", 1, 26.0), run("quality-first", 1, 26.5), run("quality-first", 0, 26.8),
            run("quality-first", 2, 10.0)]  # seed 2 has no sync run: left out of the deltas
    rows = {row["config"]: row for row in summarize_configurations(runs)}
    first = rows["quality-first"]
    assert first["quality_seeds"] == 2
    assert first["psnr_delta_mean"] == pytest.approx((0.5 - 0.2) / 2)
    assert first["psnr_delta_worst"] == pytest.approx(-0.2)
    assert first["psnr_delta_pct_worst"] == pytest.approx(-0.2 / 27.0 * 100)
    assert "psnr_delta_worst" not in rows["sync"]  # the reference itself


def test_paired_quality_deltas_take_the_worst_lpips_as_the_highest():
    runs = [{"seed": 0, "quality": {"psnr": 26.0, "ssim": 0.9, "lpips": 0.30}},
            {"seed": 1, "quality": {"psnr": 27.0, "ssim": 0.9, "lpips": 0.20}}]
    reference = [{"seed": 0, "quality": {"psnr": 26.5, "ssim": 0.9, "lpips": 0.25}},
                 {"seed": 1, "quality": {"psnr": 26.5, "ssim": 0.9, "lpips": 0.22}}]
    deltas = paired_quality_deltas(runs, reference)
    assert deltas["quality_seeds"] == 2
    assert deltas["psnr_delta_worst"] == pytest.approx(-0.5) and deltas["psnr_delta_mean"] == pytest.approx(0.0)
    assert deltas["lpips_delta_worst"] == pytest.approx(0.05) and deltas["lpips_delta_mean"] == pytest.approx(0.015)
    assert paired_quality_deltas(runs, []) == {}


def test_window_statistics_of_throughput_first_records():
    def unit(unit_id: int, window: WindowRecord | None) -> UnitRecord:
        return UnitRecord(unit_id=unit_id, mode="throughput-first", structure_version=0, window=window,
                          exposed_wait_s=0.001 * unit_id, reruns=unit_id % 2)

    admitted = WindowRecord(conflict_rows=10, buckets=8, buckets_with_updates=4, buckets_published_first=0,
                            delayed_rows=10, delayed_ratio=0.1, delay_bound=DelayBound(0.3, 0.002, 0.01))
    waited = WindowRecord(conflict_rows=50, buckets=8, buckets_with_updates=8, buckets_published_first=6,
                          delayed_rows=4, delayed_ratio=0.05, delay_bound=DelayBound(0.1, 0.008, 0.04))
    statistics = window_statistics([unit(0, None), unit(1, admitted), unit(2, waited)])
    assert statistics == pytest.approx({
        "windows": 2, "admission_rate": 0.5, "waited_bucket_fraction": 6 / 16, "delayed_windows": 2,
        "delayed_rows_per_window": 7.0, "delayed_ratio_max": 0.1, "bound_pixels_max": 0.3,
        "bound_opacity_max": 0.008, "reruns": 1, "exposed_wait_s": 0.001,
    })
    sync = window_statistics([UnitRecord(unit_id=0, mode="sync", structure_version=0)])
    assert (sync["admission_rate"], sync["waited_bucket_fraction"], sync["bound_pixels_max"]) == (0.0, 1.0, 0.0)


def test_bench_run_summarizes_the_steady_half_of_rank_0s_unit_log(tmp_path: Path, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    waited = WindowRecord(conflict_rows=5, buckets=8, buckets_with_updates=8, buckets_published_first=2)
    admitted = WindowRecord(conflict_rows=0, buckets=8, buckets_with_updates=8, buckets_published_first=0)
    for rank in range(2):
        write_unit_log(unit_log(run_dir, rank), [
            UnitRecord(unit_id=unit, mode="quality-first", structure_version=0, compute_s=0.01 * (rank + 1),
                       exposed_wait_s=(0.004 if unit < 4 else 0.001) * (1 + 2 * rank),
                       window=admitted if unit % 2 else waited, host_run_s=0.005 + 0.001 * unit,
                       host_between_s=0.002 * (1 - rank))
            for unit in range(8)])
    monkeypatch.setattr(bench, "training_command", lambda *arguments, **options: ["ns-train"])
    monkeypatch.setattr(bench, "run_training", lambda command, run_root, label: run_dir)
    monkeypatch.setattr(bench, "iteration_times", lambda run_dir: [1.0, 1.0, 0.02, 0.02])
    run = BenchCommand(data=tmp_path, out=tmp_path / "bench", quality=False)._run("quality-first", 2, 0)
    assert run["step_s"] == 0.02 and run["views_per_s"] == pytest.approx(100)
    assert run["units"] == 4 and run["exposed_wait_s"] == pytest.approx(0.001)  # units 4..7: warm-up left out
    assert run["windows"] == 4 and run["windows_admitted"] == 2
    assert run["buckets_overlapped_fraction"] == pytest.approx(1 - 4 / 32)
    assert [unit["unit_id"] for unit in run["timeline"]] == list(range(8))
    assert [timeline[0]["compute_s"] for timeline in run["timelines_by_rank"]] == [0.01, 0.02]
    # units 4..7 per rank: 9-12 ms in run_unit (median 10.5), and 2 ms before it on rank 0 only
    assert run["host_ms_by_rank"] == pytest.approx([12.5, 10.5]) and run["exposed_wait_ms_by_rank"] == pytest.approx([1, 3])
    rows = summarize_configurations([run, {**run, "seed": 1, "host_ms_by_rank": [14.5, 8.5]}])
    assert rows[0]["host_ms_by_rank"] == "13.50 / 9.50" and rows[0]["exposed_wait_ms_by_rank"] == "1.00 / 3.00"
    json.dumps(run)  # results.json holds it


def write_results(path: Path, runs: list, steps: int = 600, steps_per_log: int | None = 10,
                  alternating_cost: bool = False) -> Path:
    cadence = {} if steps_per_log is None else {"steps_per_log": steps_per_log}  # None: written before the option
    path.write_text(json.dumps({"data": "data/cup77", "steps": steps, **cadence, "alternating_cost": alternating_cost,
                                "gpus": 2, "runs": runs, "summary": summarize_configurations(runs),
                                "environment": {"gpu": "test"}}))
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
    with pytest.raises(SystemExit, match="differ in data, steps, logging cadence"):
        BenchReportCommand(results=(first, other_steps), out=tmp_path / "x").main()
    older = write_results(tmp_path / "c.json", [run("sync", 1, 27.0)], steps_per_log=None)
    with pytest.raises(SystemExit, match="differ in data, steps, logging cadence"):
        BenchReportCommand(results=(first, older), out=tmp_path / "z").main()
    uneven = write_results(tmp_path / "d.json", [run("sync", 1, 27.0)], alternating_cost=True)
    with pytest.raises(SystemExit, match="or workload"):
        BenchReportCommand(results=(first, uneven), out=tmp_path / "w").main()
    with pytest.raises(SystemExit, match="appears twice"):
        BenchReportCommand(results=(first, first), out=tmp_path / "y").main()


def test_views_per_rank_interleave_in_each_round_and_compare_with_one_view():
    command = BenchCommand(data=Path("."), gpus=2, views_per_rank=(1, 4))
    assert command.configurations(["sync", "gsplat-distributed"]) == [
        ("splatfacto", 1, 1), ("sync", 1, 1), ("sync", 2, 1), ("sync", 1, 4), ("sync", 2, 4),
        ("gsplat-distributed", 2, 1)]
    one_bucket = bench.training_command("sync-one-bucket", 2, Path("d"), Path("o"), 10, 0, ())
    assert "-m odin_bench.train --fewest-buckets odin-splatfacto" in " ".join(one_bucket)
    assert one_bucket[-2:] == ["--pipeline.odin.mode", "sync"]
    alone = bench.training_command("no-exchange", 2, Path("d"), Path("o"), 10, 0, (), alternating_cost=True)
    assert "-m odin_bench.train --alternating-cost --no-exchange odin-splatfacto" in " ".join(alone)
    assert alone[-2:] == ["--pipeline.odin.mode", "sync"]
    uneven = bench.training_command("sync", 2, Path("d"), Path("o"), 10, 0, (), alternating_cost=True)
    assert "-m odin_bench.train --alternating-cost odin-splatfacto" in " ".join(uneven)
    assert "-m odin_bench.train" not in " ".join(bench.training_command("splatfacto", 1, Path("d"), Path("o"), 10, 0, (),
                                                                          alternating_cost=True))
    one_gpu = BenchCommand(data=Path("."), gpus=1)  # odin's 1-GPU run beside stock is the sync mode itself: once
    assert one_gpu.configurations(["sync", "quality-first"]) == [
        ("splatfacto", 1, 1), ("sync", 1, 1), ("quality-first", 1, 1)]

    def run(batch: int, seed: int, views_per_s: float, psnr: float) -> dict:
        return {"name": "sync", "ranks": 2, "views_per_rank": batch, "seed": seed, "views_per_s": views_per_s,
                "quality": {"psnr": psnr, "ssim": 0.9}}

    rows = summarize_configurations([run(1, 0, 100.0, 30.0), run(4, 0, 300.0, 29.9), run(1, 1, 110.0, 31.0),
                                     run(4, 1, 330.0, 31.05)])
    four = next(row for row in rows if row["views_per_rank"] == 4)
    assert four["ratio_to_one_view"] == pytest.approx(315 / 105) and four["ratio_to_sync"] == 1.0
    assert four["quality_reference"] == "sync, 2 rank(s), 1 view(s) per rank"
    assert four["psnr_delta_mean"] == pytest.approx((-0.1 + 0.05) / 2) and four["psnr_delta_worst"] == pytest.approx(-0.1)


def test_a_run_folder_left_by_an_interrupted_bench_is_replaced_not_read(tmp_path: Path):
    run_root = tmp_path / "runs" / "sync-w1-b1-s0"
    stale = run_root / "scene" / "odin-splatfacto" / "old"
    stale.mkdir(parents=True)
    (stale / "config.yml").write_text("stale")
    fresh = run_root / "scene" / "odin-splatfacto" / "new"
    command = [sys.executable, "-c", f"import pathlib; p = pathlib.Path({str(fresh)!r}); p.mkdir(parents=True); "
               "(p / 'config.yml').write_text('fresh')"]
    assert bench.run_training(command, run_root, "sync-w1-b1-s0") == fresh
    assert not stale.exists()


def test_an_evaluated_run_scores_the_held_out_views_after_its_last_step_only(tmp_path: Path):
    def eval_all_every(command: list) -> str:
        return command[command.index("--steps-per-eval-all-images") + 1]

    arguments = ("sync", 2, tmp_path, tmp_path / "out", 300, 0, ())
    assert eval_all_every(bench.training_command(*arguments, evaluate=True)) == "299"
    assert int(eval_all_every(bench.training_command(*arguments))) > 300


def test_each_seed_also_seeds_the_view_sequence_of_stock_and_odin(tmp_path: Path):
    """Both datamanagers shuffle views with train_cameras_sampling_seed (42 unless told), not the machine seed: a
    bench's repetitions would otherwise all train on one view sequence per method, each method on its own."""
    def sampling_seed(command: list) -> str:
        return command[command.index("--pipeline.datamanager.train-cameras-sampling-seed") + 1]

    for name in ("splatfacto", "sync"):
        commands = [bench.training_command(name, 1, tmp_path, tmp_path / "out", 300, seed, ()) for seed in (0, 2)]
        assert [sampling_seed(command) for command in commands] == ["42", "44"]
        assert [command[command.index("--machine.seed") + 1] for command in commands] == ["42", "44"]
