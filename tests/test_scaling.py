"""odin-bench simulate: the alpha-beta collectives, step times a hand can check, the runtime's admission at W ranks,
plan dealing, and the command on unit logs written with ``write_unit_log``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import tyro

from odin_ns.runtime.config import RuntimeConfig
from odin_ns.runtime.records import UnitRecord, WindowRecord, unit_log, write_unit_log
from odin_bench.scaling.command import SimulateCommand
from odin_bench.scaling.links import PRESETS, Link, all_reduce, all_to_all, ring_all_reduce, tree_all_reduce
from odin_bench.scaling.measured import (
    H200_COLLECTIVE_LAUNCH_S,
    HostBound,
    ScalingInputError,
    calibrate,
    expected_max,
    expected_slowest,
    load_bench,
    load_run,
    logging_units,
)
from odin_bench.scaling.replay import MODES, Wire, WorldDraw, draw_world, predict, run_collectives, step_seconds
from odin_bench.scaling.windows import RecordedPath, WindowStatistics, recorded_paths
from test_plan import strip_plan

LINK = Link("test", bandwidth=1e9, latency=1e-5)
GAUSSIANS = 2048
"""The toy runtime cuts 2048 rows into 8 buckets of 256 (at least 8 buckets, 32-row words): 256 x 236 B = 60,416 B
each (59 float32 per row at SH degree 3); a rank's scope bitmaps are 2 x 64 words = 512 B."""
TOY_BUCKET_MB = 60_416 / 2**20
TOY_RUNTIME = RuntimeConfig(bucket_mb=TOY_BUCKET_MB)
"""The runtime cutting the toy's small exchange into 8 buckets of 256 rows (the default would make it one)."""
TOY_ARGS = ["--runtime.bucket-mb", str(TOY_BUCKET_MB)]
"""The same runtime for odin-bench simulate."""
TOY_WIRE = Wire(GAUSSIANS, runtime=TOY_RUNTIME)
COMPUTE, PUBLISH = 0.010, 0.001
BUCKET_ALL_REDUCE_W2 = 2 * 1e-5 + 60_416 / 1e9  # ring at W=2: 2(W-1) latency + 2(W-1)/W bytes / bandwidth
SCOPE_GATHER_W2 = 1e-5 + 512 / 1e9  # (W-1) latency + (W-1) piece / bandwidth


def write_run(run_dir: Path, world_size: int, mode: str = "sync", units: int = 40, compute=COMPUTE,
              window=None, step_s: float | None = None, wait: float = 0.0,
              exchanged: int = 0, sync_path=lambda unit: False, host=None) -> Path:
    """A run directory with one unit log per rank (constant spans; ``compute`` may depend on the unit, and on the
    rank too; ``window`` a WindowRecord, or one per (unit, rank); ``host``, the same way, each unit's host time H,
    1 ms of it between units, or None: no host times) and, with ``step_s``, tensorboard scalars."""
    run_dir.mkdir(parents=True)
    for rank in range(world_size):
        def seconds(unit: int, value=compute) -> float:
            if not callable(value):
                return value
            return value(unit, rank) if value.__code__.co_argcount == 2 else value(unit)

        host_times = {} if host is None else {"host_run_s": lambda unit: seconds(unit, host) - 0.001,
                                              "host_between_s": lambda unit: 0.001}
        records = [UnitRecord(unit, mode, 0, exchange="dense" if exchanged else "local", bytes_exchanged=exchanged,
                              update_rows=GAUSSIANS // 2, window=window(unit, rank) if callable(window) else window,
                              sync_path=sync_path(unit), compute_s=seconds(unit), exposed_wait_s=wait,
                              publish_s=PUBLISH, **{name: time(unit) for name, time in host_times.items()})
                   for unit in range(units)]
        write_unit_log(unit_log(run_dir, rank), records)
    if step_s is not None:
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(str(run_dir)) as writer:
            for step in range(units):
                writer.add_scalar("Train Iter (time)", step_s, step)
                writer.add_scalar("Train Metrics Dict/gaussian_count", GAUSSIANS, step)
    return run_dir


def calibrated(tmp_path: Path, **options):
    return calibrate([load_run(write_run(tmp_path / "w1", 1, **options), 1)], None, GAUSSIANS, MODES)


def test_ring_all_reduce_is_two_reduce_steps_per_rank_and_the_tree_wins_small_buffers():
    assert ring_all_reduce(LINK, 8e6, 2) == pytest.approx(8e6 / 1e9 + 2 * 1e-5, rel=1e-12)
    assert ring_all_reduce(LINK, 8e6, 4) == pytest.approx(2 * 3 / 4 * 8e6 / 1e9 + 6 * 1e-5, rel=1e-12)
    assert tree_all_reduce(LINK, 8e6, 4) == pytest.approx(4 * (1e-5 + 8e6 / 1e9), rel=1e-12)
    assert all_reduce(LINK, 8e6, 4) == ring_all_reduce(LINK, 8e6, 4)
    assert all_reduce(LINK, 8, 64) == pytest.approx(12 * (1e-5 + 8e-9), rel=1e-12)  # 126 ring steps vs 12
    assert all_to_all(LINK, 64e6, 64) == pytest.approx(63 * 1e-5 + 63 / 64 * 0.064, rel=1e-12)
    assert all_reduce(LINK, 8e6, 1) == all_to_all(LINK, 8e6, 1) == 0.0


def test_two_ranks_of_constant_compute_step_as_compute_plus_the_exchange_plus_publication(tmp_path):
    calibration = calibrated(tmp_path)
    assert TOY_WIRE.bucket_bytes() == [60_416] * 8
    predictions, dealings = predict(calibration, None, None, [LINK], [1, 2], ["sync"], steps=20, seed=0,
                                    runtime=TOY_RUNTIME)
    one, two = predictions
    assert one.step_s == pytest.approx(COMPUTE + PUBLISH, rel=1e-12)
    assert two.step_s == pytest.approx(COMPUTE + SCOPE_GATHER_W2 + 8 * BUCKET_ALL_REDUCE_W2 + PUBLISH, rel=1e-12)
    assert two.step_s == pytest.approx(0.01165384, rel=1e-12)
    assert two.views_per_s == pytest.approx(2 / 0.01165384, rel=1e-12)
    assert dealings == {1: "drawn", 2: "drawn"}


def test_a_sync_step_waits_for_the_slowest_rank(tmp_path):
    calibration = calibrated(tmp_path)
    balanced = WorldDraw(2, np.array([[0.02, 0.02]]), np.zeros((1, 2), bool), {}, "drawn")
    skewed = WorldDraw(2, np.array([[0.01, 0.03]]), np.zeros((1, 2), bool), {}, "drawn")
    wire = TOY_WIRE
    exchange = SCOPE_GATHER_W2 + 8 * BUCKET_ALL_REDUCE_W2
    for draw, slowest in ((balanced, 0.02), (skewed, 0.03)):
        step = step_seconds("sync", LINK, calibration, wire, draw, "visible")[0]
        assert step == pytest.approx(slowest + exchange + PUBLISH, rel=1e-12)


def windows(reread: float, bounds=()) -> WindowStatistics:
    """Every view touches every bucket and sees half of its rows; the next unit re-reads updated buckets with
    chance ``reread``."""
    return WindowStatistics(bucket_touch=1.0, reread=reread, row_share=0.5, rerun_rate=0.0,
                            delay_bounds=tuple(bounds), windows=1)


def overlapped_step(tmp_path, mode: str, fitted: WindowStatistics) -> tuple[float, float]:
    calibration = calibrated(tmp_path)
    predictions, _ = predict(calibration, fitted, None, [LINK], [2], ["sync", mode], steps=100, seed=0,
                             runtime=TOY_RUNTIME)
    return predictions[0].step_s, predictions[1].step_s


def test_quality_first_hides_an_exchange_nothing_reads_and_equals_sync_when_everything_conflicts(tmp_path):
    sync, hidden = overlapped_step(tmp_path / "a", "quality-first", windows(reread=0.0))
    assert hidden == pytest.approx(SCOPE_GATHER_W2 + COMPUTE + PUBLISH, rel=1e-12)  # the buckets arrive meanwhile
    sync, blocked = overlapped_step(tmp_path / "b", "quality-first", windows(reread=1.0))
    assert blocked == pytest.approx(sync, rel=1e-12)


def test_after_16_windows_that_hide_nothing_64_units_run_on_syncs_path_without_the_windows_host_time(tmp_path):
    calibration = calibrated(tmp_path)
    calibration = replace(calibration, overhead_s={**calibration.overhead_s, "sync": 0.001, "quality-first": 0.005})
    draw = draw_world(calibration, windows(reread=1.0), None, TOY_WIRE, 2, ["quality-first"], 100, seed=0)
    on_sync_path = [decision is None for decision in draw.decisions["quality-first"]]
    assert on_sync_path == ([False] * 16 + [True] * 64) + [False] * 16 + [True] * 4
    sync = step_seconds("sync", LINK, calibration, TOY_WIRE, draw, "visible")
    overlapped = step_seconds("quality-first", LINK, calibration, TOY_WIRE, draw, "visible")
    assert overlapped.mean() == pytest.approx(sync.mean() + 32 / 100 * (0.005 - 0.001), rel=1e-12)


def test_throughput_first_delays_what_tau_admits_and_waits_for_the_rest(tmp_path):
    from odin_ns.sync.hazards import DelayBound

    # Each rank reads 128 rows of every bucket, 96 of them updated: delaying 2 of 8 buckets is 0.1875 of its
    # reads (<= tau 0.2), 3 would be 0.28, so the unit waits for buckets 0-5 only.
    _, step = overlapped_step(tmp_path, "throughput-first", windows(1.0, [DelayBound(0.0, 0.0, 0.0)]))
    gather = 1e-5 + 4 * 64 * (2 + 8) / 1e9  # bitmaps and the delay bound's maxima of 6 tensors + 2
    ready = gather + 6 * BUCKET_ALL_REDUCE_W2 + PUBLISH * 6 / 8
    assert step == pytest.approx(ready + COMPUTE + PUBLISH * 2 / 8, rel=1e-12)
    assert step == pytest.approx(0.011495056, rel=1e-12)


@pytest.mark.parametrize("link", sorted(PRESETS))
def test_quality_first_is_never_predicted_slower_than_sync(tmp_path, link):
    calibration = calibrate([load_run(write_run(tmp_path / "w1", 1, compute=lambda unit: 0.001 * (unit % 7 + 1)),
                                      1)], None, GAUSSIANS, MODES)
    wire = TOY_WIRE
    means = {}
    for world_size in (2, 8, 64):
        draw = draw_world(calibration, windows(reread=0.3), None, wire, world_size, ["quality-first"], 200, seed=1)
        sync = step_seconds("sync", PRESETS[link], calibration, wire, draw, "visible")
        overlapped = step_seconds("quality-first", PRESETS[link], calibration, wire, draw, "visible")
        assert np.all(overlapped <= sync + 1e-15)
        means[world_size] = overlapped.mean(), sync.mean()
    assert means[2][0] < means[2][1]
    assert means[64][0] == pytest.approx(means[64][1], rel=1e-12)  # 64 readers touch every updated bucket


def test_window_chances_are_fitted_from_the_logged_windows(tmp_path):
    window = WindowRecord(conflict_rows=300, buckets=8, buckets_with_updates=4, buckets_published_first=2)
    run = load_run(write_run(tmp_path / "qf", 2, "quality-first", window=window), 1)
    fitted = WindowStatistics.fit([run], visible_share=0.25)
    per_view = 1 - 0.5**0.5  # two views per unit update half of the buckets, and re-read half of those
    assert fitted.bucket_touch == pytest.approx(per_view, rel=1e-12)
    assert fitted.reread == pytest.approx(per_view, rel=1e-12)
    assert fitted.row_share == pytest.approx(0.25 / per_view, rel=1e-12)
    assert fitted.windows == 20 and fitted.rerun_rate == 0.0 and fitted.delay_bounds == ()


def predicted_window(unit: int, rank: int) -> WindowRecord | None:
    """Units 4k+1 and 4k+2 open a window decided from predicted scopes: rank 0 waits for 2 buckets then 8, rank 1
    for 5 then 8, of 8 updated; units 4k+2 and 4k+3 publish at once (sync's path), so units 4k+3 and 4k open none."""
    waited = {1: (2, 5), 2: (8, 8)}.get(unit % 4)
    if waited is None:
        return None
    return WindowRecord(conflict_rows=0, buckets=8, buckets_with_updates=8, buckets_published_first=waited[rank],
                        predicted=True)


def test_predicted_windows_are_replayed_as_recorded_at_the_measured_world_size(tmp_path, capsys):
    single = write_run(tmp_path / "w1", 1, step_s=0.015)  # 4 ms of host time beyond compute and publication
    pair = write_run(tmp_path / "w2", 2, "quality-first", step_s=0.020, window=predicted_window,
                     sync_path=lambda unit: unit % 4 in (2, 3))
    run = load_run(pair, 1)
    assert WindowStatistics.fit([run], visible_share=0.25) is None  # nothing to fit: the windows are geometry's
    assert recorded_paths(run)[:4] == [RecordedPath(None, 0, False), RecordedPath((2, 5), 8, False),
                                       RecordedPath((8, 8), 8, True), RecordedPath(None, 0, True)]
    arguments = [str(single), str(pair), "--validate", "--links", "nvswitch", "--steps", "20"]
    tyro.cli(SimulateCommand, args=[*arguments, *TOY_ARGS]).main()
    out = capsys.readouterr().out
    assert "20 units, 10 windows (the slowest-waiting rank waited for 6.5 of 8.0 updated buckets on average), " \
           "10 published at once" in out
    gather, bucket = 2e-6 + 512 / 370e9, 2 * 2e-6 + 60_416 / 370e9
    exchange = gather + 8 * bucket
    steps = [COMPUTE,  # nothing in flight, its exchange left to the next unit's window
             gather + 5 * bucket + COMPUTE + PUBLISH,  # rank 1 waits for 5 buckets, the rest arrives meanwhile
             gather + 8 * bucket + COMPUTE + PUBLISH + exchange + PUBLISH,  # waits for all, then its own at once
             COMPUTE + exchange + PUBLISH]  # sync's step
    predicted = 0.004 + np.mean(steps)
    error = 100 * (predicted / 0.020 - 1)
    assert f"| {pair} | quality-first | 2 | nvswitch | {1e3 * predicted:.2f} (= 10.00 + 4.00 + " in out
    assert f"{error:+.1f}% |" in out
    tyro.cli(SimulateCommand, args=[*TOY_ARGS, str(single), str(pair), "--world-sizes", "2", "4", "--links", "nvswitch",
                                    "--steps", "20"]).main()
    out = capsys.readouterr().out  # at other world sizes the windows would follow the geometry: not predicted
    assert "not predicted: quality-first, throughput-first" in out and "are not extrapolated" in out


def test_a_recorded_window_waits_for_the_last_bucket_where_the_exchange_outlasts_compute(tmp_path):
    calibration = calibrated(tmp_path)  # no step time: no host time
    path = RecordedPath((1, 0), 8, sync_path=False)
    draw = WorldDraw(2, np.array([[1e-5, 1e-5]]), np.zeros((1, 2), bool), {"quality-first": [path]}, "drawn")
    step = step_seconds("quality-first", LINK, calibration, TOY_WIRE, draw, "visible")[0]
    # rank 0 publishes 1/8 of P before and 7/8 after the last bucket; rank 1 all of P after it
    assert step == pytest.approx(SCOPE_GATHER_W2 + 8 * BUCKET_ALL_REDUCE_W2 + PUBLISH, rel=1e-12)


def test_views_reach_ranks_as_the_plan_deals_them(tmp_path):
    plan = strip_plan(30)
    cost = 1e-3 * (np.arange(30) + 1)  # view v renders in (v + 1) ms
    measured = plan.with_batch(1)

    def view_cost(unit: int) -> float:
        return cost[measured.views_for(unit, 0)[0]]

    run = load_run(write_run(tmp_path / "w1", 1, units=400, compute=view_cost), 1)
    calibration = calibrate([run], plan, GAUSSIANS, MODES)
    draw = draw_world(calibration, None, plan, TOY_WIRE, 2, ["sync"], 50, seed=0)
    dealt = plan.with_batch(2)
    expected = [max(cost[dealt.views_for(step, rank)[0]] for rank in range(2)) for step in range(50)]
    assert draw.dealing == "plan"
    assert draw.compute.max(1) == pytest.approx(expected, rel=1e-12)
    assert draw_world(calibration, None, plan, TOY_WIRE, 64, ["sync"], 5, seed=0).dealing == "round-robin"


def test_simulate_is_an_odin_bench_subcommand():
    from odin_bench.cli import subcommands

    assert subcommands()["simulate"] is SimulateCommand


def test_simulate_prints_a_table_per_link_and_plots(tmp_path, capsys):
    run = write_run(tmp_path / "w1", 1)
    plot = tmp_path / "scaling.png"
    tyro.cli(SimulateCommand, args=[*TOY_ARGS, str(run), "--gaussians", "2048", "--world-sizes", "1", "2", "--links",
                                    "pcie", "--steps", "20", "--plot", str(plot)]).main()
    out = capsys.readouterr().out
    assert "link pcie: 20 GB/s, 3 us per step" in out
    assert "not predicted: quality-first, throughput-first" in out
    # W=2 over PCIe: 10 ms compute + 1 ms publication + 512 B gather + 8 ring all-reduces of 60,416 B
    sync = COMPUTE + PUBLISH + (3e-6 + 512 / 20e9) + 8 * (2 * 3e-6 + 60_416 / 20e9)
    assert f"| 2 | drawn | 10.00 | {1e3 * sync:.2f} / {2 / sync:.1f} |" in out
    assert plot.stat().st_size > 0


def test_validate_prints_predicted_against_measured_step_time(tmp_path, capsys):
    single = write_run(tmp_path / "w1", 1, step_s=0.015)  # 4 ms of host time beyond compute and publication
    pair = write_run(tmp_path / "w2", 2, step_s=0.017)
    arguments = [str(single), str(pair), "--validate", "--links", "nvswitch", "--steps", "20"]
    tyro.cli(SimulateCommand, args=[*arguments, *TOY_ARGS]).main()
    out = capsys.readouterr().out
    exchange = (2e-6 + 512 / 370e9) + 8 * (2 * 2e-6 + 60_416 / 370e9)
    predicted = 0.015 + exchange
    error = 100 * (predicted / 0.017 - 1)
    # parts: the slowest rank's compute + host time outside the spans + exchange and publication
    parts = f"{1e3 * predicted:.2f} (= 10.00 + 4.00 + {1e3 * (exchange + PUBLISH):.2f})"
    assert f"| {pair} | sync | 2 | nvswitch | {parts} | 17.00 (= 10.00 + 6.00 + 1.00) | {error:+.1f}% |" in out


def test_a_missing_or_broken_unit_log_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match=f"^error: no unit log odin_units.jsonl in {tmp_path}$"):
        SimulateCommand(runs=(tmp_path,)).main()
    (tmp_path / "odin_units.jsonl").write_text("{not json\n")
    with pytest.raises(SystemExit, match=f"^error: {tmp_path}/odin_units.jsonl is not a unit log: [^\n]*$"):
        SimulateCommand(runs=(tmp_path,)).main()


def write_bench(path: Path, *runs: tuple[str, float, int, int], steps_per_log: int | None = None) -> Path:
    """A bench results.json whose runs (run_dir on the machine that ran them, step_s, ranks, views per rank) ran
    elsewhere (with ``steps_per_log``, the bench's logging cadence; without, written before it had one)."""
    import json

    cadence = {} if steps_per_log is None else {"steps_per_log": steps_per_log}
    path.write_text(json.dumps({**cadence, "runs": [{"name": "sync", "run_dir": run_dir, "step_s": step_s,
                                                     "ranks": ranks, "views_per_rank": views}
                                                    for run_dir, step_s, ranks, views in runs]}))
    return path


def bench_runs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A 1-rank and a 2-rank run as bench lays them out (<label>/<scene>/<method>/<timestamp>) without event
    files, and the bench's results.json naming them by the GPU machine's paths."""
    single = write_run(tmp_path / "runs" / "sync-w1-b1-s0" / "scene" / "odin-splatfacto" / "2026-11-30_150035", 1)
    pair = write_run(tmp_path / "runs" / "sync-w2-b1-s0" / "scene" / "odin-splatfacto" / "2026-11-30_150115", 2)
    results = write_bench(
        tmp_path / "results.json",
        ("/tmp/bc/runs/sync-w1-b1-s0/scene/odin-splatfacto/2026-11-30_150035", 0.015, 1, 1),
        ("/tmp/bc/runs/sync-w2-b1-s0/scene/odin-splatfacto/2026-11-30_150115", 0.020, 2, 1),
        ("/tmp/bc/runs/sync-w2-b1-s1/scene/odin-splatfacto/2026-11-30_150439", 0.030, 2, 1),
    )
    return single, pair, results


def test_bench_results_give_the_step_times_of_runs_without_event_files(tmp_path, capsys):
    single, pair, results = bench_runs(tmp_path)
    arguments = [str(single), str(pair), "--step-time", "bench", "--bench", str(results), "--gaussians", "2048",
                 "--validate", "--links", "nvswitch", "--steps", "20"]
    tyro.cli(SimulateCommand, args=[*arguments, *TOY_ARGS]).main()
    out = capsys.readouterr().out
    exchange = (2e-6 + 512 / 370e9) + 8 * (2 * 2e-6 + 60_416 / 370e9)
    predicted = 0.015 + exchange  # the 1-rank run's 4 ms of host time, as nothing measured it on 2 ranks
    error = 100 * (predicted / 0.020 - 1)
    parts = f"{1e3 * predicted:.2f} (= 10.00 + 4.00 + {1e3 * (exchange + PUBLISH):.2f})"
    assert f"| {pair} | sync | 2 | nvswitch | {parts} | 20.00 (= 10.00 + 9.00 + 1.00) | {error:+.1f}% |" in out
    host = "host time per step outside the runtime's spans: 1 rank 4.00 ms, sync on 2+ ranks 4.00 ms (not measured"
    assert host in out
    assert "Measured step time: bench." in out


def test_a_bench_run_must_match_one_run_and_agree_on_ranks_and_views(tmp_path):
    single, pair, results = bench_runs(tmp_path)
    with pytest.raises(SystemExit, match="needs --bench"):
        SimulateCommand(runs=(single,), step_time="bench").main()
    other = write_run(tmp_path / "elsewhere" / "2026-12-01_000000", 1)
    with pytest.raises(SystemExit, match=f"^error: no bench run in .* for {other} "):
        SimulateCommand(runs=(other,), step_time="bench", bench=(results,)).main()
    with pytest.raises(SystemExit, match="the bench ran .* on 2 rank.s. x 1 view.s., the unit logs and "
                                         "--views-per-rank say 2 x 4"):
        SimulateCommand(runs=(pair,), step_time="bench", bench=(results,), views_per_rank=4).main()


def test_the_unit_logs_own_step_time_is_the_slowest_ranks_spans_without_host_time(tmp_path, capsys):
    single = write_run(tmp_path / "w1", 1)
    # rank 1 computes 4 ms longer on odd units; rank 0 waits for it then (2 ms of exposed wait on every unit)
    pair = write_run(tmp_path / "w2", 2, wait=0.002, compute=lambda unit, rank: COMPUTE + 0.004 * (rank * unit % 2))
    run = load_run(pair, 1, "units")
    slowest = [COMPUTE + 0.004 * (unit % 2) + 0.002 + PUBLISH for unit in range(20, 40)]
    assert run.step_s == pytest.approx(np.mean(slowest), rel=1e-12) and run.overhead_s == 0.0
    arguments = [str(single), str(pair), "--step-time", "units", "--gaussians", "2048", "--validate", "--links",
                 "nvswitch", "--steps", "20"]
    tyro.cli(SimulateCommand, args=[*arguments, *TOY_ARGS]).main()
    out = capsys.readouterr().out
    exchange = (2e-6 + 512 / 370e9) + 8 * (2 * 2e-6 + 60_416 / 370e9)
    predicted = COMPUTE + exchange + PUBLISH  # no host time: the 1-rank run's units step in compute + publication
    assert f"| {pair} | sync | 2 | nvswitch | {1e3 * predicted:.2f} (= 10.00 + 0.00 + " in out
    assert f"| {1e3 * run.step_s:.2f} (= 12.00 + 0.00 + 3.00) |" in out


def test_the_gaussian_count_follows_from_the_bytes_a_dense_exchange_moved(tmp_path, capsys):
    from odin_bench.scaling.replay import gaussians_from_exchange

    for count, mode in ((2048, "sync"), (9262, "sync"), (1_290_820, "sync"), (5000, "throughput-first")):
        run = load_run(write_run(tmp_path / f"{count}-{mode}", 2, mode, exchanged=Wire(count).dense_unit_bytes(mode)),
                       1)
        assert gaussians_from_exchange([run]) == count
    assert Wire(9262).dense_unit_bytes("sync") == 2_188_152  # cup77's units on 2 H200s
    single = write_run(tmp_path / "w1", 1, step_s=0.015)
    pair = write_run(tmp_path / "w2", 2, step_s=0.017, exchanged=Wire(2048).dense_unit_bytes("sync"))
    for path in (single, pair):  # no gaussian_count scalars: only the exchange says how many
        for events in path.glob("events.out.tfevents.*"):
            events.unlink()
    tyro.cli(SimulateCommand, args=[*TOY_ARGS, str(single), str(pair), "--step-time", "units", "--validate"]).main()
    assert "Gaussian count from the dense exchanges' bytes: 2048" in capsys.readouterr().out


def test_runs_on_two_ranks_set_host_time_and_compute_at_every_world_size_past_one(tmp_path):
    single = load_run(write_run(tmp_path / "w1", 1, step_s=0.015), 1)  # 4 ms of host time on one rank
    pair = load_run(write_run(tmp_path / "w2", 2, step_s=0.022, compute=0.012), 1)  # 9 ms on two
    calibration = calibrate([single, pair], None, GAUSSIANS, MODES)
    assert calibration.host_s("sync", 1) == pytest.approx(0.004, rel=1e-6)
    assert calibration.host_s("sync", 8) == calibration.host_s("quality-first", 8) == pytest.approx(0.009, rel=1e-6)
    assert calibration.measured_overheads == ("sync",)
    predictions, _ = predict(calibration, None, None, [LINK], [1, 2], ["sync"], steps=20, seed=0, runtime=TOY_RUNTIME)
    one, two = predictions
    assert one.step_s == pytest.approx(0.015, rel=1e-6)
    assert two.step_s == pytest.approx(0.012 + 0.009 + SCOPE_GATHER_W2 + 8 * BUCKET_ALL_REDUCE_W2 + PUBLISH,
                                       rel=1e-6)


def test_leave_one_out_predicts_every_run_from_the_others(tmp_path, capsys):
    runs = [write_run(tmp_path / "w1-s0", 1, step_s=0.015), write_run(tmp_path / "w1-s1", 1, step_s=0.017),
            write_run(tmp_path / "w2-s0", 2, step_s=0.022), write_run(tmp_path / "w2-s1", 2, step_s=0.024)]
    arguments = [*map(str, runs), "--validate", "--validate-fit", "leave-one-out", "--links", "nvswitch", "--steps",
                 "20"]
    tyro.cli(SimulateCommand, args=[*arguments, *TOY_ARGS]).main()
    out = capsys.readouterr().out
    exchange = (2e-6 + 512 / 370e9) + 8 * (2 * 2e-6 + 60_416 / 370e9)
    expected = {runs[0]: (0.017, 0.015), runs[1]: (0.015, 0.017),  # the other seed's step
                runs[2]: (0.024 + exchange, 0.022), runs[3]: (0.022 + exchange, 0.024)}  # its host time, 13 / 11 ms
    for run, (predicted, measured) in expected.items():
        world_size = 2 if "w2" in run.name else 1
        assert f"| {run} | sync | {world_size} | nvswitch | {1e3 * predicted:.2f} (= 10.00 + " in out
        assert f"{100 * (predicted / measured - 1):+.1f}% |" in out


def test_the_plot_marks_the_measured_runs(tmp_path, monkeypatch):
    from odin_bench.scaling import command

    drawn = {}
    original = command.plot_scaling

    def spy(predictions, links, out, measured=()):
        drawn["measured"] = list(measured)
        return original(predictions, links, out, measured)

    monkeypatch.setattr(command, "plot_scaling", spy)
    runs = [write_run(tmp_path / "w1", 1, step_s=0.015), write_run(tmp_path / "w2", 2, step_s=0.020)]
    plot = tmp_path / "scaling.png"
    tyro.cli(SimulateCommand, args=[*map(str, runs), "--world-sizes", "2", "4", "--links", "pcie", "--steps", "20",
                                    "--plot", str(plot)]).main()
    assert drawn["measured"] == [("sync", 2, pytest.approx(100.0))] and plot.stat().st_size > 0


def test_the_expected_slowest_of_w_draws_is_exact_and_one_draw_is_the_mean():
    samples = np.array([3.0, 1.0, 4.0, 2.0])  # sorted 1..4: x_(i) is the max of W draws with (i/4)^W - ((i-1)/4)^W
    assert expected_max(samples, 2) == pytest.approx((1 * 1 + 2 * 3 + 3 * 5 + 4 * 7) / 16, rel=1e-12)  # 3.125
    assert expected_max(samples, 3) == pytest.approx((1 * 1 + 2 * 7 + 3 * 19 + 4 * 37) / 64, rel=1e-12)
    assert expected_max(samples, 1) == pytest.approx(2.5, rel=1e-12)
    assert expected_max(samples, 1000) == pytest.approx(4.0, rel=1e-12)


def test_what_peers_add_to_a_host_bound_step_is_nothing_on_one_rank(tmp_path):
    bound = HostBound(host=np.array([1.0, 2.0, 3.0, 4.0]) * 1e-3, compute=np.array([1.0, 1.0, 3.0, 3.0]) * 1e-3,
                      collective_launch_s=0.3e-3, launch_source="given")
    assert bound.added_s(1, 10) == bound.compute_spread_s(1) == 0.0
    assert bound.host_per_unit_s(1, 10) == pytest.approx(2.5e-3, rel=1e-12)  # one rank launches nothing
    assert bound.host_per_unit_s(2, 10) == pytest.approx(3.125e-3 + 10 * 0.3e-3, rel=1e-12)
    assert bound.added_s(2, 10) == pytest.approx(0.625e-3 + 3e-3, rel=1e-12)
    assert bound.compute_spread_s(2) == pytest.approx((1 * 1 + 3 * 3) / 4 * 1e-3 - 2e-3, rel=1e-12)  # 0.5 ms
    calibration = replace(calibrated(tmp_path), host_bound=bound)  # no step time: no host time on one rank
    assert calibration.host_s("sync", 1, 10) == 0.0
    # the replay waits for the slowest rank's compute already: its 0.5 ms of spread is not charged twice
    assert calibration.host_s("sync", 2, 10) == pytest.approx(3.625e-3 - 0.5e-3, rel=1e-12)


def test_collectives_per_unit_follow_the_runtimes_bucket_plan():
    cup77, large = 9262, 1_290_820  # 2.19 MB and 305 MB of gradient rows
    default = RuntimeConfig()
    rows = torch.empty((cup77, Wire(cup77).gradient_row_bytes // 4), device="meta")
    assert Wire(cup77).collectives(2) == 1 + len(default.buckets_for([rows]).ranges)
    assert Wire(cup77).collectives(2) == Wire(cup77).collectives(64) == 2  # 2.19 MB: one bucket
    eighth = 1158 * Wire(cup77).gradient_row_bytes / 2**20  # an eighth of the rows
    assert Wire(cup77, runtime=RuntimeConfig(bucket_mb=eighth)).collectives(2) == 10  # 8 buckets of 1,152 rows, and 2
    assert Wire(large).collectives(8) == 13  # 12 buckets of at most 25 MB
    assert Wire(large, runtime=RuntimeConfig(bucket_mb=100)).collectives(8) == 10  # 8 of 36 MB, 64 rows left over
    assert Wire(cup77).collectives(1) == Wire(large).collectives(2, "local") == 0  # one rank; no-exchange
    with pytest.raises(ScalingInputError, match="'scoped' exchange are not modelled"):
        Wire(cup77).collectives(2, "scoped")


HOST_SAMPLES = (0.012, 0.013, 0.014, 0.016)
"""A 1-rank run's host time per unit, in turn: mean 13.75 ms, E[max_2] = (12 + 3 x 13 + 5 x 14 + 7 x 16) / 16 =
14.5625 ms."""


def host_bound_runs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A 1-rank run taking one of ``HOST_SAMPLES`` per unit (4 ms outside its spans) and two 2-rank sync runs of the
    toy's 8 buckets (9 collectives per unit) whose host times say 0.2 and 0.4 ms per launch."""
    single = write_run(tmp_path / "w1", 1, step_s=0.015, host=lambda unit: HOST_SAMPLES[unit % 4])
    dense = Wire(GAUSSIANS).dense_unit_bytes("sync")
    pairs = [write_run(tmp_path / f"w2-{launch}", 2, step_s=step_s, exchanged=dense, host=0.0145625 + 9 * launch)
             for launch, step_s in ((0.0002, 0.019), (0.0004, 0.021))]
    return single, *pairs


def test_host_bound_validation_predicts_each_pair_from_one_rank_and_the_other_pairs_launch_cost(tmp_path, capsys):
    single, pair_a, pair_b = host_bound_runs(tmp_path)
    runs = [load_run(path, 1) for path in (single, pair_a, pair_b)]
    assert [run_collectives(run, TOY_WIRE) for run in runs] == [0, 9, 9]
    bound = HostBound.fit(runs[:1], [(run, 9) for run in runs[1:]], None)
    assert bound.collective_launch_s == pytest.approx(0.0003, rel=1e-9)  # the median of 0.2 and 0.4 ms
    assert HostBound.fit(runs[:1], (), None).collective_launch_s == H200_COLLECTIVE_LAUNCH_S
    arguments = [str(single), str(pair_a), str(pair_b), "--validate", "--validate-fit", "host-bound", "--links",
                 "nvswitch", "--steps", "20", *TOY_ARGS]
    tyro.cli(SimulateCommand, args=arguments).main()
    out = capsys.readouterr().out
    exchange = (2e-6 + 512 / 370e9) + 8 * (2 * 2e-6 + 60_416 / 370e9)
    spread = 0.0145625 - 0.01375  # E[max_2 H] - mean H; constant compute: no compute spread
    for pair, measured_launch, other_launch, step_s in ((pair_a, 0.0002, 0.0004, 0.019),
                                                        (pair_b, 0.0004, 0.0002, 0.021)):
        assert f"collective launch {1e3 * other_launch:.3f} ms (fitted on 1 run(s) on 2+ ranks)" in out
        host = 0.004 + spread + 9 * other_launch  # one rank's 4 ms + what the peer adds
        predicted = COMPUTE + host + exchange + PUBLISH
        per_unit, measured = 0.0145625 + 9 * other_launch, 0.0145625 + 9 * measured_launch
        assert (f"| {pair} | sync | 2 | nvswitch | {1e3 * predicted:.2f} (= 10.00 + {1e3 * host:.2f} + "
                f"{1e3 * (exchange + PUBLISH):.2f}) | ") in out
        assert (f"| {100 * (predicted / step_s - 1):+.1f}% | {1e3 * per_unit:.2f} (= 14.56 + 9 x "
                f"{1e3 * other_launch:.2f}) | {1e3 * measured:.2f} | {100 * (per_unit / measured - 1):+.1f}% |") in out


def test_the_host_bound_term_predicts_other_world_sizes_from_one_rank(tmp_path, capsys):
    single, _, _ = host_bound_runs(tmp_path)
    arguments = [str(single), "--gaussians", "2048", "--host-term", "host-bound", "--collective-launch-ms", "0.5",
                 "--world-sizes", "1", "2", "4", "--links", "nvswitch", "--modes", "sync", "--steps", "20", *TOY_ARGS]
    tyro.cli(SimulateCommand, args=arguments).main()
    out = capsys.readouterr().out
    assert "collective launch 0.500 ms (given)" in out
    exchange = {2: (2e-6 + 512 / 370e9) + 8 * (2 * 2e-6 + 60_416 / 370e9),
                4: 3 * (2e-6 + 512 / 370e9) + 8 * all_reduce(PRESETS["nvswitch"], 60_416, 4)}
    host = np.array(HOST_SAMPLES)
    for world_size in (2, 4):
        step = 0.015 + expected_max(host, world_size) - host.mean() + 9 * 0.0005 + exchange[world_size]
        assert f"| {world_size} | drawn | 10.00 | {1e3 * step:.2f} / {world_size / step:.1f} |" in out
    untimed = write_run(tmp_path / "untimed", 1, step_s=0.015)
    with pytest.raises(SystemExit, match="host-bound term needs 1-rank runs, and unit logs with host times"):
        SimulateCommand(runs=(untimed,), gaussians=2048, host_term="host-bound").main()



def test_units_after_a_logging_step_are_drawn_apart_from_the_rest():
    # units 2 and 3 follow logging steps: the slowest of W is drawn per group, each weighted by its share (1/2)
    samples, logging = np.array([1.0, 2.0, 5.0, 7.0]), np.array([False, False, True, True])
    rest, slow = (1 * 1 + 2 * 3) / 4, (5 * 1 + 7 * 3) / 4  # E[max_2] of {1, 2} and of {5, 7}: 1.75 and 6.5
    assert expected_slowest(samples, 2, logging) == pytest.approx(0.5 * rest + 0.5 * slow, rel=1e-12)  # 4.125
    assert expected_max(samples, 2) == pytest.approx(81 / 16, rel=1e-12)  # one group: 5.0625
    assert expected_slowest(samples, 1, logging) == pytest.approx(3.75, rel=1e-12)  # one rank: the mean
    assert expected_slowest(samples, 1000, logging) == pytest.approx(0.5 * 2 + 0.5 * 7, rel=1e-12)  # not 7
    assert expected_slowest(samples, 2, None) == expected_slowest(samples, 2, np.ones(4, bool)) == expected_max(samples, 2)
    bound = HostBound(host=samples * 1e-3, compute=np.ones(4) * 1e-3, collective_launch_s=0.3e-3,
                      launch_source="given", logging=logging)
    assert bound.host_per_unit_s(2, 10) == pytest.approx(4.125e-3 + 10 * 0.3e-3, rel=1e-12)
    assert bound.added_s(2, 10) == pytest.approx(0.375e-3 + 3e-3, rel=1e-12)
    assert bound.added_s(1, 10) == 0.0
    # nerfstudio logs at step s after that step's unit returned: the work lands in unit s + 1
    assert logging_units(range(12), 5).nonzero()[0].tolist() == [1, 6, 11]
    assert logging_units(range(3), 1).all()


NERFSTUDIO_CONFIG = """!!python/object:nerfstudio.engine.trainer.TrainerConfig
_target: !!python/name:odin_ns.trainer.OdinTrainer ''
logging: !!python/object:nerfstudio.configs.base_config.LoggingConfig
  local_writer: !!python/object:nerfstudio.configs.base_config.LocalWriterConfig
    _target: !!python/name:nerfstudio.utils.writer.LocalWriter ''
    enable: false
    stats_to_track: !!python/tuple
    - !!python/object/apply:nerfstudio.utils.writer.EventName
      - Train Iter (time)
  relative_log_dir: !!python/object/apply:pathlib.PosixPath []
  steps_per_log: {every}
max_num_iterations: 40
"""
"""The parts of a nerfstudio config.yml that matter here, Python tags and all."""


def logging_cadence_run(run_dir: Path, every: int | None) -> Path:
    """A 1-rank run whose units after a logging step (every 2: the odd units) take 20 ms of host time and the others
    10 or 12 ms in turn; with ``every``, a config.yml saying that cadence. Steady units 20-39: E[max_2 H] is
    (1/2) 20 + (1/2) (10 x 1/4 + 12 x 3/4) = 15.75 ms with the groups apart, mean 15.5 ms; drawn as one group,
    10 x 1/16 + 12 x 3/16 + 20 x 3/4 = 17.875 ms."""
    host = lambda unit: 0.020 if unit % 2 else (0.010 if unit % 4 == 0 else 0.012)  # noqa: E731
    run = write_run(run_dir, 1, step_s=0.015, host=host)
    if every is not None:
        (run / "config.yml").write_text(NERFSTUDIO_CONFIG.format(every=every))
    return run


def test_the_logging_cadence_comes_from_config_yml_the_bench_or_the_option(tmp_path, capsys):
    configured, unknown = logging_cadence_run(tmp_path / "a", 2), logging_cadence_run(tmp_path / "b", None)
    run = load_run(configured, 1)
    assert (run.steps_per_log, run.steps_per_log_source) == (2, "config.yml")
    assert [unit for unit, slow in zip(range(20, 40), run.logging_units) if slow] == list(range(21, 40, 2))
    assert (load_run(configured, 1, steps_per_log=5).steps_per_log, load_run(unknown, 1).steps_per_log) == (5, None)
    results = write_bench(tmp_path / "results.json", (f"/elsewhere/{unknown.name}", 0.015, 1, 1), steps_per_log=2)
    from_bench = load_run(unknown, 1, "bench", load_bench([results]))
    assert (from_bench.steps_per_log, from_bench.steps_per_log_source) == (2, "bench results.json")
    exchange = (2e-6 + 512 / 370e9) + 8 * (2 * 2e-6 + 60_416 / 370e9)
    common = ["--gaussians", "2048", "--host-term", "host-bound", "--collective-launch-ms", "0.5", "--world-sizes",
              "2", "--links", "nvswitch", "--modes", "sync", "--steps", "20", *TOY_ARGS]
    for run_dir, option, slowest, grouping in (
        (configured, [], 15.75e-3, "logging units (the unit after each logging step, steps_per_log 2 from config.yml) "
                                   "10 of 20, drawn apart from the rest (mean H 20.00 ms, the rest 11.00 ms)"),
        (unknown, ["--steps-per-log", "2"], 15.75e-3, "steps_per_log 2 from given) 10 of 20, drawn apart"),
        (unknown, [], 17.875e-3, f"steps_per_log unknown for {unknown} (no config.yml logging.steps_per_log, no "
                                 "bench steps_per_log, no --steps-per-log): all units one group, drawn independently"),
    ):
        tyro.cli(SimulateCommand, args=[str(run_dir), *option, *common]).main()
        out = capsys.readouterr().out
        assert f"mean 15.50 ms, E[max_2 H] {1e3 * slowest:.2f} ms" in out and grouping in out
        step = 0.015 + slowest - 15.5e-3 + 9 * 0.0005 + exchange  # constant compute: no compute spread
        assert f"| 2 | drawn | 10.00 | {1e3 * step:.2f} / {2 / step:.1f} |" in out
    (configured / "config.yml").write_text(NERFSTUDIO_CONFIG.format(every=0))
    with pytest.raises(SystemExit, match="logging.steps_per_log is 0, not a step count"):
        SimulateCommand(runs=(configured,)).main()
    with pytest.raises(SystemExit, match="--steps-per-log must be at least 1, got 0"):
        SimulateCommand(runs=(unknown,), steps_per_log=0).main()
