"""The Odin runtime on 2 ranks: quality-first equals sync, hazards are resolved, faults surface.

All scenarios share one spawn of two ranks per backend (process start-up dominates the cost); each rank saves what
it ended with, and the tests compare the ranks, the modes and the exchange kinds. gloo on the CPU always runs; the
same scenarios run under NCCL on 2 GPUs where available.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from host_read_counter import HostReadCounter
from runtime_toy import (
    GRID,
    LEARNING_RATES,
    NUM_ROWS,
    ToyModel,
    ToyReadPredictor,
    cell_sorted,
    cell_view,
    initial_params,
    make_runtime,
    rank_device,
    run_schedule,
    spawn_ranks,
    unit_functions,
    visible_rows,
)

from odin_ns.runtime.exchange import GradientExchange, StagedUnit
from odin_ns.runtime.executor import StaleUnitError
from odin_ns.runtime.finite import NonFiniteGradientError
from odin_ns.runtime.records import Clock, UnitRecord, UnitTrace, summarize
from odin_ns.structural_barrier import DrainingBarrier
from odin_ns.sync.predicted import ScopeMispredictionError
from odin_ns.sync.scopes import scope_of

WORLD_SIZE = 2
DISJOINT = [[cell_view((2 * unit + rank) % GRID**2) for rank in range(WORLD_SIZE)] for unit in range(60)]
"""Consecutive units render disjoint cells: every overlap window should be admitted."""
CONFLICT = DISJOINT[:3] + [DISJOINT[2]] + DISJOINT[3:6]
"""Unit 3 renders unit 2's views again: a RAW conflict on every row unit 2 updates."""
ALWAYS_CONFLICTING = [[cell_view(0), cell_view(1)]] * 20
"""Every unit re-renders the same cells: every window must wait for all of the previous unit's exchange."""
LATE_ROW = 0
LATE_VISIBILITY = [
    [cell_view(0, attractor=(0.9, 0.125)), cell_view(10)],
    [cell_view(1), cell_view(11)],
    [cell_view(5), cell_view(15)],
]
"""Unit 0 pulls the points of cell 0 towards cell 1, so LATE_ROW (on their border) enters unit 1's view of cell 1
only once unit 0 is published: unit 1's read scope, taken before, does not show it."""
APPENDED_ROWS = 100


def late_visibility_params() -> dict[str, torch.Tensor]:
    params = initial_params()
    params["means"][LATE_ROW] = torch.tensor([0.245, 0.1])
    return params


def train(rank: int, schedule, params: dict[str, torch.Tensor], **config) -> tuple[dict, dict]:
    model = ToyModel(params)
    runtime = make_runtime(model, **config)
    run_schedule(runtime, schedule, rank)
    runtime.drain()
    return model.snapshot(), [record.to_json() for record in runtime.stats.take()]


def nan_on_one_rank_error(rank: int) -> str:
    """Rank 1's unit 5 produces a NaN gradient; the check at a later shared step must stop every rank, naming it."""
    model = ToyModel(initial_params())
    runtime = make_runtime(model, mode="quality-first")
    for unit, views in enumerate(DISJOINT[:9]):
        compute_fn, visible_fn = unit_functions(views[rank])
        if unit == 5 and rank == 1:
            def poisoned(views_of_unit, compute_fn=compute_fn):
                loss, visible = compute_fn(views_of_unit)
                views_of_unit["colors"].grad[visible.nonzero()[0]] = float("nan")
                return loss, visible
            compute_fn = poisoned
        runtime.run_unit(unit, compute_fn, visible_fn)
    try:
        runtime.check_finite()
    except NonFiniteGradientError as error:
        runtime.context.barrier("leave together")
        return str(error)
    return "no error"


def run_with_structural_change(runtime, model: ToyModel, schedule, split: int, rank: int, run=run_schedule) -> None:
    """Units ``schedule[:split]``, a structural change decided from statistics reduced over ranks by the barrier
    (rows the last unit saw appended), the remaining units, then a drain."""
    barrier = DrainingBarrier(runtime, {"seen": "sum"})
    run(runtime, schedule[:split], rank)
    state = {"seen": visible_rows(model.params["means"].detach(), schedule[split - 1][rank]).float()}
    barrier.before_change(state, refines=True)
    model.append_rows(state["seen"].nonzero().squeeze(1)[:APPENDED_ROWS])
    barrier.after_change(model.params)
    run(runtime, schedule[split:], rank, first_unit=split)
    runtime.drain()


def train_with_camera(rank: int, schedule, params: dict[str, torch.Tensor], **config) -> tuple[dict, list]:
    """Units with a dense camera offset stepped by torch Adam after every unit, as the pipeline steps nerfstudio's
    camera optimizer: its gradients must be one unit's, averaged over ranks, however often the unit ran."""
    model = ToyModel(params)
    camera = torch.nn.Parameter(torch.zeros(2, device=rank_device()))
    camera_optimizer = torch.optim.Adam([camera], lr=0.01)
    runtime = make_runtime(model, dense_params=[camera], **config)
    for unit, views in enumerate(schedule):
        camera_optimizer.zero_grad()  # as nerfstudio's trainer zeroes every group before a step
        runtime.run_unit(unit, *unit_functions(views[rank], camera=camera))
        camera_optimizer.step()
    runtime.drain()
    state = camera_optimizer.state[camera]
    camera_state = {"camera": camera.detach().cpu(), **{f"camera.{key}": state[key].cpu() for key in state}}
    return {**model.snapshot(), **camera_state}, [record.to_json() for record in runtime.stats.take()]


def train_with_densification(rank: int, mode: str, **config) -> dict[str, torch.Tensor]:
    """10 units, a structural change, 10 more units."""
    model = ToyModel(initial_params())
    run_with_structural_change(make_runtime(model, mode=mode, **config), model, DISJOINT[:20], 10, rank)
    return model.snapshot()


PREDICTED_LEARNING_RATES = {**LEARNING_RATES, "means": 0.001}
"""Means that move little per step, so a bucket's bounds stay within its cell: with the toy's 0.01, Adam may move a
point 0.07 a step, and the inflated bounds of every bucket would reach the next cell."""
PREDICTED_BUCKETS = 16
"""About one grid cell of cell-sorted rows per bucket."""
SAME_CELL = [[cell_view(5), cell_view(5)]] * 12
"""Both ranks render one cell in every unit: every unit reads all that the previous one updated."""
APART = [[cell_view(cells[rank]) for rank in range(WORLD_SIZE)] for cells in [(0, 2), (8, 10), (1, 3), (9, 11)] * 10]
"""Consecutive units two grid rows apart: a bucket's bounds (one cell, inflated) reach the neighbouring cells,
so the views of the next unit must not neighbour this unit's for their predicted scopes to miss each other."""
CORNERS = [[cell_view(cells[rank]) for rank in range(WORLD_SIZE)] for cells in [(0, 1), (14, 15)] * 6]
"""Consecutive units in opposite corners of the square, with buckets of a quarter cell (``CORNER_BUCKETS``), so that
some windows read no bucket the previous unit updated (a bucket straddling two grid rows spans the square's width,
and its inflated box can still reach both corners)."""
CORNER_BUCKETS = 64


def train_predicted(
    rank: int, mode: str, schedule=APART, densify: bool = False, predictor=None, buckets: int = PREDICTED_BUCKETS,
    **config,
) -> tuple[dict, list]:
    """Cell-sorted rows, small means steps, 16 buckets; quality-first with predicted read scopes (``predictor``, by
    default the toy's conservative one) or the mode given."""
    model = ToyModel(cell_sorted(initial_params()), PREDICTED_LEARNING_RATES)
    if mode == "quality-first" and predictor is None:
        predictor = ToyReadPredictor(schedule, rank, PREDICTED_LEARNING_RATES["means"])
    extra = dict(read_scopes="predicted", predictor=predictor) if predictor is not None else {}
    runtime = make_runtime(model, mode=mode, buckets=buckets, **extra, **config)
    if densify:
        run_with_structural_change(runtime, model, schedule[:20], 10, rank)
    else:
        run_schedule(runtime, schedule, rank)
        runtime.drain()
    return model.snapshot(), [record.to_json() for record in runtime.stats.take()]


class FirstBucketOnly(ToyReadPredictor):
    """A prediction that misses rows: every unit would read only the first bucket."""

    def read_buckets(self, unit_id: int, every_rank: bool):
        hit = super().read_buckets(unit_id, every_rank)
        hit[1:] = False
        return hit


class RecordingPredictor(ToyReadPredictor):
    """The toy's predictor, recording which units the runtime asked about and whether each publication refreshed
    the bounds."""

    def __init__(self, *args):
        super().__init__(*args)
        self.asked: list[int] = []
        self.refreshed: list[bool] = []

    def published(self, params, refresh: bool = True) -> None:
        self.refreshed.append(refresh)
        super().published(params, refresh)

    def read_buckets(self, unit_id: int, every_rank: bool):
        self.asked.append(unit_id)
        return super().read_buckets(unit_id, every_rank)


def predicted_sync_path_stretches(rank: int) -> tuple[dict, list, list[int], list[bool]]:
    """Quality-first with predicted scopes over SAME_CELL (every unit reads all the previous one updated), with a
    stretch after 3 units that left nothing in flight: (state, records, units asked about, refresh per publication)."""
    predictor = RecordingPredictor(SAME_CELL, rank, PREDICTED_LEARNING_RATES["means"])
    state, records = train_predicted(rank, "quality-first", SAME_CELL, predictor=predictor,
                                     sync_path_stretches=(3, 4))
    return state, records, predictor.asked, predictor.refreshed


def host_reads_of_predicted_windows(rank: int) -> tuple[list[str], list]:
    """Quality-first with predicted scopes over APART, counting the runtime's own host reads (the units' compute and
    read-scope functions are the model's, not counted) from the third unit on: a window is decided from the plan and
    host-side bounds, so none should be read from the device. Reads of the optimizers' step counters are not counted:
    torch keeps them on the host."""
    model = ToyModel(cell_sorted(initial_params()), PREDICTED_LEARNING_RATES)
    predictor = ToyReadPredictor(APART, rank, PREDICTED_LEARNING_RATES["means"])
    runtime = make_runtime(model, mode="quality-first", buckets=PREDICTED_BUCKETS, read_scopes="predicted",
                           predictor=predictor)
    counter = HostReadCounter(set())  # the optimizers' step counters: torch keeps them on the host

    def not_counted(function):
        def call(*args):
            counter.paused = True
            try:
                return function(*args)
            finally:
                counter.paused = False

        return call

    for unit, views in enumerate(APART[:12]):
        compute_fn, visible_fn = unit_functions(views[rank])
        if unit < 2:
            runtime.run_unit(unit, compute_fn, visible_fn)
            continue
        counter.excluded_scalars = {
            state["step"].data_ptr() for optimizer in model.optimizers.values() for state in optimizer.state.values()
        }
        with counter:
            runtime.run_unit(unit, not_counted(compute_fn), not_counted(visible_fn))
    runtime.drain()
    reads = [f"{count} x {name} at {where}" for (name, where), count in counter.reads.most_common()]
    return reads, [record.to_json() for record in runtime.stats.take()]


FIRST_BUCKETS = [5, 2]


def bucket_launch_order(rank: int) -> list[int]:
    """The order in which a dense exchange launches its buckets when a unit waits for FIRST_BUCKETS, and whether
    each bucket still arrives averaged."""
    model = ToyModel(initial_params())
    runtime = make_runtime(model, mode="quality-first", buckets=PREDICTED_BUCKETS)
    exchange = GradientExchange(runtime.config, runtime.context, Clock(runtime.context.device))
    exchange.plan(runtime.packed.params)
    table = torch.full_like(runtime.packed.params, float(rank + 1))
    visible = scope_of(torch.zeros(NUM_ROWS, dtype=torch.bool, device=table.device), NUM_ROWS, table.device)
    staged = StagedUnit(0, 0, table, {}, visible, UnitTrace(UnitRecord(0, "quality-first", 0)), ())
    in_flight = exchange.launch(staged, read_scope=None, first_buckets=FIRST_BUCKETS)
    order = list(in_flight.buckets)
    exchange.arrive(in_flight, range(len(exchange.buckets.ranges)))
    assert torch.equal(table, torch.full_like(table, 1.5)), "a bucket launched out of row order was not averaged"
    return order


def misprediction_error(rank: int) -> str:
    try:
        train_predicted(rank, "quality-first", APART[:6], predictor=FirstBucketOnly(APART[:6], rank, 0.001))
    except ScopeMispredictionError as error:
        return str(error)
    return "no error"


def stale_publication_error(rank: int) -> str:
    """Change the structure while a unit is staged (no drain): publishing it must raise."""
    model = ToyModel(initial_params())
    runtime = make_runtime(model, mode="quality-first")
    run_schedule(runtime, DISJOINT[:1], rank)
    model.append_rows(torch.arange(APPENDED_ROWS))
    runtime.rebind(model.params, model.optimizers)
    try:
        runtime.drain()
    except StaleUnitError as error:
        runtime.drain()
        return str(error)
    return "no error"


def scenario_worker(rank: int, out_dir: Path) -> None:
    results = {}
    for name, schedule, params in (
        ("disjoint", DISJOINT, initial_params()),
        ("conflict", CONFLICT, initial_params()),
        ("late", LATE_VISIBILITY, late_visibility_params()),
    ):
        for mode in ("sync", "quality-first"):
            results[f"{name}/{mode}/dense"] = train(rank, schedule, params, mode=mode, exchange="dense")
    for mode in ("sync", "quality-first"):
        results[f"disjoint/{mode}/selective"] = train(rank, DISJOINT, initial_params(), mode=mode, adam="selective")
        results[f"predicted/{mode}/selective"] = train_predicted(rank, mode, adam="selective")
    results["disjoint/quality-first/scoped"] = train(
        rank, DISJOINT, initial_params(), mode="quality-first", exchange="scoped"
    )
    results["disjoint/sync/auto"] = train(rank, DISJOINT, initial_params(), mode="sync", exchange="auto")
    for mode in ("sync", "quality-first"):
        results[f"conflicting/{mode}"] = train(
            rank, ALWAYS_CONFLICTING, initial_params(), mode=mode, sync_path_stretches=(3, 4)
        )
    for mode in ("sync", "quality-first"):
        results[f"late-camera/{mode}"] = train_with_camera(rank, LATE_VISIBILITY, late_visibility_params(), mode=mode)
    for mode in ("sync", "quality-first"):
        results[f"densify/{mode}"] = (train_with_densification(rank, mode), [])
    for mode in ("sync", "quality-first"):
        results[f"predicted/{mode}"] = train_predicted(rank, mode)
        results[f"predicted-densify/{mode}"] = train_predicted(rank, mode, densify=True)
    for mode in ("sync", "quality-first"):
        results[f"predicted-conflicting/{mode}"] = train_predicted(rank, mode, SAME_CELL)
        results[f"predicted-corners/{mode}"] = train_predicted(rank, mode, CORNERS, buckets=CORNER_BUCKETS)
    results["predicted-stretch"] = predicted_sync_path_stretches(rank)
    results["mispredicted"] = misprediction_error(rank)
    results["predicted-host-reads"] = host_reads_of_predicted_windows(rank)
    results["launch-order"] = bucket_launch_order(rank)
    results["stale"] = stale_publication_error(rank)
    results["nan"] = nan_on_one_rank_error(rank)
    torch.save(results, out_dir / f"rank{rank}.pt")


def dying_peer_worker(rank: int, out_dir: Path) -> None:
    """Rank 1 dies abruptly in the middle of training; rank 0 carries on until the next collective fails."""
    model = ToyModel(initial_params())
    runtime = make_runtime(model, mode="quality-first")
    for unit, views in enumerate(DISJOINT[:20]):
        if rank == 1 and unit == 5:
            os._exit(1)
        runtime.run_unit(unit, *unit_functions(views[rank]))
    runtime.drain()


def rank_errors(out_dir: Path) -> dict[int, str]:
    return {
        rank: (out_dir / f"rank{rank}.error").read_text()
        for rank in range(WORLD_SIZE)
        if (out_dir / f"rank{rank}.error").exists()
    }


@pytest.fixture(
    scope="module",
    params=[
        "gloo",
        pytest.param(
            "nccl",
            marks=[
                pytest.mark.gpu,
                pytest.mark.skipif(torch.cuda.device_count() < WORLD_SIZE, reason=f"needs {WORLD_SIZE} CUDA GPUs"),
            ],
        ),
    ],
)
def results(request, tmp_path_factory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp(f"runtime-{request.param}")
    exit_codes = spawn_ranks(scenario_worker, out_dir, WORLD_SIZE, backend=request.param)
    assert exit_codes == [0] * WORLD_SIZE, rank_errors(out_dir)
    return [torch.load(out_dir / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]


def assert_same_state(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Bitwise equal parameters, Adam moments and step counts."""
    assert actual.keys() == expected.keys()
    for key in expected:
        assert torch.equal(actual[key], expected[key]), key


def records_of(run) -> list[UnitRecord]:
    return [UnitRecord.from_json(record) for record in run[1]]


def test_quality_first_matches_sync_while_overlapping(results):
    for rank_results in results:
        run = rank_results["disjoint/quality-first/dense"]
        assert_same_state(run[0], rank_results["disjoint/sync/dense"][0])
        summary = summarize(records_of(run))
        assert summary.windows_admitted == summary.windows_overlapped == len(DISJOINT) - 1
        assert summary.units == len(DISJOINT)
    assert_same_state(results[1]["disjoint/quality-first/dense"][0], results[0]["disjoint/quality-first/dense"][0])


def test_dense_adam_steps_every_row_and_selective_adam_only_those_seen(results):
    """Both optimizers keep quality-first equal to sync, measured and predicted; they are different optimizers (dense
    Adam moves rows a unit did not see along their momentum), and with predicted scopes dense Adam does not exchange
    the buckets no unit updates, which selective Adam's publication of the update scope's buckets still sends."""
    for rank_results in results:
        for scenario in ("disjoint", "predicted"):
            quality_first, sync = (rank_results[f"{scenario}/{mode}/selective"] for mode in ("quality-first", "sync"))
            assert_same_state(quality_first[0], sync[0])
            dense = rank_results["disjoint/sync/dense" if scenario == "disjoint" else "predicted/sync"][0]
            assert not torch.equal(dense["means"], sync[0]["means"])
        windows = [record.window for record in records_of(rank_results["disjoint/quality-first/selective"])]
        assert sum(window.overlapped for window in windows if window) == len(DISJOINT) - 1
        sent = {adam: sum(record.bytes_exchanged for record in records_of(run))
                for adam, run in (("dense", rank_results["predicted/quality-first"]),
                                  ("selective", rank_results["predicted/quality-first/selective"]))}
        assert sent["dense"] < sent["selective"]


def test_predicted_read_scopes_equal_sync_with_buckets_left_in_flight(results):
    """quality-first decided ahead (no scope gather, no host read, no re-run) ends bitwise where sync ends, on every
    rank, across a structural change too, and leaves part of every window's exchange in flight."""
    for rank_results in results:
        for scenario in ("predicted", "predicted-densify"):
            run = rank_results[f"{scenario}/quality-first"]
            assert_same_state(run[0], rank_results[f"{scenario}/sync"][0])
        records = records_of(rank_results["predicted/quality-first"])
        windows = [record.window for record in records if record.window is not None]
        assert len(windows) == len(APART) - 1 and all(window.predicted for window in windows)
        assert all(window.overlapped for window in windows), "every window should leave buckets in flight"
        assert sum(window.buckets_published_first for window in windows) < sum(window.buckets_with_updates for window in windows) / 2
        assert all(record.reruns == 0 for record in records)
    assert_same_state(results[1]["predicted/quality-first"][0], results[0]["predicted/quality-first"][0])


def test_a_window_that_reads_nothing_of_the_exchange_in_flight_equals_sync(results):
    """Windows that publish nothing before their compute make the compute stream wait for the exchange's scope
    gather (a wait on the peers) only after it; the state is still sync's."""
    for rank_results in results:
        run = rank_results["predicted-corners/quality-first"]
        assert_same_state(run[0], rank_results["predicted-corners/sync"][0])
        windows = [record.window for record in records_of(run) if record.window is not None]
        assert any(window.buckets_published_first == 0 for window in windows), "no window took the deferred path"


def test_units_predicted_to_conflict_entirely_take_syncs_path(results):
    """Where the plan's next unit reads every bucket a unit updates, the unit publishes at once, as sync does: no
    window is opened, and the state is sync's."""
    for rank_results in results:
        run = rank_results["predicted-conflicting/quality-first"]
        assert_same_state(run[0], rank_results["predicted-conflicting/sync"][0])
        records = records_of(run)
        assert all(record.window is None for record in records)
        assert all(record.sync_path for record in records[:-1])


def test_predicted_sync_path_stretches_skip_the_prediction(results):
    """Units 0-2 each publish at once (the plan's next unit reads everything they update): three windows that left
    nothing in flight start a stretch of 4 units (3-6) that run as sync does, asking the predictor nothing; no
    bounds are refreshed from the publication of the unit that started it (2) until its last unit's. Units 7-9
    probe again and start the next stretch (10-11). The state is sync's."""
    for rank_results in results:
        state, records, asked, refreshed = rank_results["predicted-stretch"]
        assert_same_state(state, rank_results["predicted-conflicting/sync"][0])
        records = [UnitRecord.from_json(record) for record in records]
        assert all(record.sync_path and record.window is None for record in records)
        # each probing unit asks about itself and the plan's next unit
        assert asked == [0, 1, 1, 2, 2, 3, 7, 8, 8, 9, 9, 10]
        assert refreshed == [True] * 2 + [False] * 4 + [True] * 3 + [False] * 3


def test_a_window_decided_from_predicted_scopes_reads_nothing_from_the_device(results):
    for rank_results in results:
        reads, records = rank_results["predicted-host-reads"]
        windows = [UnitRecord.from_json(record).window for record in records[2:]]
        assert any(window is not None and window.buckets_published_first < window.buckets_with_updates
                   for window in windows), "no window left buckets in flight: nothing was tested"
        assert not reads, "host reads in the runtime's steps:\n" + "\n".join(reads)


def test_buckets_a_unit_waits_for_are_launched_first(results):
    """A stream completes collectives in launch order: a unit waiting for buckets 5 and 2 should not wait for 0-4."""
    for rank_results in results:
        order = rank_results["launch-order"]
        assert order[:2] == FIRST_BUCKETS and order[2:] == sorted(order[2:]) and sorted(order) == list(range(len(order)))


def test_a_prediction_that_misses_rows_stops_every_rank(results):
    for rank_results in results:
        assert "read or updated a row outside its predicted buckets" in rank_results["mispredicted"]
        assert rank_results["mispredicted"].startswith("unit 0 on rank 0")


def test_conflicting_unit_waits_for_the_buckets_it_reads(results):
    for rank_results in results:
        run = rank_results["conflict/quality-first/dense"]
        assert_same_state(run[0], rank_results["conflict/sync/dense"][0])
        window = records_of(run)[3].window
        assert not window.raw_admitted
        assert window.conflict_rows > 0 and window.buckets_published_first > 0
        summary = summarize(records_of(run))
        assert (summary.windows, summary.windows_admitted) == (len(CONFLICT) - 1, len(CONFLICT) - 2)


def test_late_visibility_reruns_the_speculative_unit(results):
    rank0_state = results[0]["late/quality-first/dense"][0]
    assert records_of(results[0]["late/quality-first/dense"])[1].reruns == 1
    assert rank0_state["means"][LATE_ROW, 0] > 0.25, "the scenario must move the row into unit 1's view"
    for rank_results in results:
        assert_same_state(rank_results["late/quality-first/dense"][0], rank_results["late/sync/dense"][0])


def test_a_rerun_replaces_the_dense_gradients_of_its_first_run(results):
    """Defect 13a: a validation re-run added its camera-optimizer gradients to the first run's, so the camera was
    stepped with twice the gradient and quality-first left sync."""
    assert records_of(results[0]["late-camera/quality-first"])[1].reruns == 1
    for rank_results in results:
        sync, quality_first = rank_results["late-camera/sync"][0], rank_results["late-camera/quality-first"][0]
        assert not torch.equal(sync["camera"], torch.zeros(2)), "the camera must have trained"
        assert_same_state(quality_first, sync)
    assert_same_state(results[1]["late-camera/quality-first"][0], results[0]["late-camera/quality-first"][0])


def test_scoped_exchange_equals_dense_and_moves_fewer_bytes(results):
    for rank_results in results:
        scoped, dense = rank_results["disjoint/quality-first/scoped"], rank_results["disjoint/quality-first/dense"]
        assert_same_state(scoped[0], dense[0])
        assert {record.exchange for record in records_of(scoped)} == {"scoped"}
        assert summarize(records_of(scoped)).bytes_exchanged < summarize(records_of(dense)).bytes_exchanged / 2
        auto = rank_results["disjoint/sync/auto"]
        assert_same_state(auto[0], dense[0])
        assert {record.exchange for record in records_of(auto)} == {"scoped"}


def test_windows_that_overlap_nothing_switch_to_sync_path_stretches_and_probe_again(results):
    for rank_results in results:
        run = rank_results["conflicting/quality-first"]
        assert_same_state(run[0], rank_results["conflicting/sync"][0])
        on_sync_path = [record.unit_id for record in records_of(run) if record.sync_path]
        # 3 rejected windows (units 1-3) start a stretch of 4 units; unit 8 starts the overlap again, its successor
        # probes, and so on.
        assert on_sync_path == [4, 5, 6, 7, 12, 13, 14, 15]
        summary = summarize(records_of(run))
        assert summary.units_on_sync_path == 8
        assert (summary.windows, summary.windows_admitted) == (9, 0)
        assert not any(record.sync_path for record in records_of(rank_results["conflicting/sync"]))


def test_structural_change_keeps_ranks_identical(results):
    rank0, rank1 = (rank_results["densify/quality-first"][0] for rank_results in results)
    assert rank0["means"].shape[0] == NUM_ROWS + APPENDED_ROWS
    assert_same_state(rank1, rank0)
    assert_same_state(rank0, results[0]["densify/sync"][0])


def test_publishing_a_unit_staged_before_a_structural_change_raises(results):
    for rank_results in results:
        assert "staged against structure version 0" in rank_results["stale"]


def test_a_nan_on_one_rank_stops_every_rank_naming_its_origin(results):
    for rank_results in results:
        assert "['colors'] on rank 1 at step 5" in rank_results["nan"], rank_results["nan"]


def test_dead_peer_makes_the_survivor_fail_with_a_clear_error(tmp_path):
    exit_codes = spawn_ranks(dying_peer_worker, tmp_path, WORLD_SIZE, backend="gloo", join_timeout_s=60.0)
    errors = rank_errors(tmp_path)
    assert exit_codes[1] == 1
    assert exit_codes[0] not in (0, None), "the survivor must exit non-zero, not hang"
    assert "PeerFailureError" in errors[0] and "a peer rank died or hung" in errors[0]
