"""Single-process pieces of the runtime: scopes, hazard checks, admission, bucket packing, shadow views, config."""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch

from odin_ns.comm.collectives import RowBuckets, all_reduce_statistics
from odin_ns.comm.context import DistContext
from odin_ns.comm.process_group import read_torchrun_env
from odin_ns.kernels import bitmap_to_mask, pack_bitmap
from odin_ns.runtime.config import MIN_BUCKET_MB, MIN_BUCKETS, RuntimeConfig
from odin_ns.runtime.executor import OdinRuntime, consecutive_runs
from odin_ns.runtime.optimizer import ScopedAdam
from odin_ns.runtime.packed import pack_gaussians
from odin_ns.runtime.shadow import shadow_views, staged_gradients
from odin_ns.sync.gate import DelayLimits
from odin_ns.sync.hazards import (
    HazardError,
    QualityFirstPolicy,
    WindowHazards,
    check_private_staging,
    raw_exposure,
    stale_reads,
)
from odin_ns.sync.scopes import restrict_to_ranges, rows_per_range, scope_of, union_over_ranks

NUM_ROWS = 1000
CPU = torch.device("cpu")


def scope(rows: list[int], num_rows: int = NUM_ROWS) -> torch.Tensor:
    mask = torch.zeros(num_rows, dtype=torch.bool)
    mask[rows] = True
    return pack_bitmap(mask)


def test_buckets_cover_all_rows_in_word_aligned_ranges():
    tensors = [torch.zeros(NUM_ROWS, 3), torch.zeros(NUM_ROWS, 2, 2)]
    buckets = RowBuckets.for_tensors(tensors, bucket_bytes=28 * 300)
    assert buckets.rows_per_bucket == 288
    assert buckets.ranges == [(0, 288), (288, 576), (576, 864), (864, 1000)]
    assert RowBuckets.for_tensors(tensors, bucket_bytes=1).rows_per_bucket == 32


def test_buckets_are_not_cut_below_the_smallest_size_to_reach_the_bucket_count():
    """1000 rows of 28 bytes: min_buckets 8 asks for 125 rows (96, in whole words), a floor of 5,000 bytes keeps 179
    (192 in whole words, rounded up to the floor); the largest bucket still caps it; a floor above the whole table
    leaves one bucket; floor 0 is min_buckets alone."""
    tensors = [torch.zeros(NUM_ROWS, 3), torch.zeros(NUM_ROWS, 2, 2)]
    assert RowBuckets.for_tensors(tensors, 28 * 1000, min_buckets=8).rows_per_bucket == 96
    assert RowBuckets.for_tensors(tensors, 28 * 1000, min_buckets=8, min_bucket_bytes=0).rows_per_bucket == 96
    assert RowBuckets.for_tensors(tensors, 28 * 1000, min_buckets=8, min_bucket_bytes=5000).rows_per_bucket == 192
    assert RowBuckets.for_tensors(tensors, 28 * 100, min_buckets=8, min_bucket_bytes=2800).rows_per_bucket == 96
    assert len(RowBuckets.for_tensors(tensors, 28 * 2000, min_buckets=8, min_bucket_bytes=28 * 1500).ranges) == 1
    with pytest.raises(ValueError, match="min_bucket_bytes not negative"):
        RowBuckets.for_tensors(tensors, 28 * 1000, min_bucket_bytes=-1)


def test_the_runtime_cuts_at_least_eight_buckets_of_at_least_4_mb_or_bucket_mb():
    """16 bytes a row: 4 MB is 262,144 rows. 128 MB of rows make 8 buckets of 16 MB; 16 MB make 4 of 4 MB (8 of 2 MB
    would be below the floor); 0.5 MB buckets (below 4 MB: the floor is bucket_mb) hold 32,768 rows whatever the
    table, and a table smaller than a bucket is one; with 2 MB buckets, 128 MB make 64."""
    assert (MIN_BUCKETS, MIN_BUCKET_MB) == (8, 4.0)

    def buckets(rows: int, **config) -> RowBuckets:
        return RuntimeConfig(**config).buckets_for([torch.empty(rows, 4, device="meta")])

    assert buckets(2**23).rows_per_bucket == 2**20 and len(buckets(2**23).ranges) == 8
    assert buckets(2**20).rows_per_bucket == 262_144 and len(buckets(2**20).ranges) == 4
    assert buckets(100_000, bucket_mb=0.5).rows_per_bucket == buckets(2**23, bucket_mb=0.5).rows_per_bucket == 32_768
    assert len(buckets(2**23, bucket_mb=2).ranges) == 64
    assert buckets(1000, bucket_mb=0.5).ranges == [(0, 1000)]


def test_rows_per_range_and_restriction_follow_the_ranges():
    bitmap = scope([0, 31, 32, 500, 999])
    ranges = [(0, 32), (32, 512), (512, 1000)]
    assert rows_per_range(bitmap, ranges).tolist() == [2, 2, 1]
    restricted = bitmap_to_mask(restrict_to_ranges(bitmap, [ranges[1]]), NUM_ROWS)
    assert restricted.nonzero().squeeze(1).tolist() == [32, 500]


def test_union_over_ranks_is_the_or_of_the_rank_scopes():
    gathered = torch.stack([scope([1, 2]), scope([2, 700])])
    assert bitmap_to_mask(union_over_ranks(gathered), NUM_ROWS).nonzero().squeeze(1).tolist() == [1, 2, 700]


def test_quality_first_publishes_exactly_the_buckets_holding_conflicting_rows():
    ranges = RowBuckets(NUM_ROWS, 256).ranges
    update = scope([10, 300, 301, 600, 900])
    read = torch.stack([scope([11, 300, 900, 950])])
    hazards = WindowHazards.from_device(raw_exposure(update, read, ranges))
    assert hazards == WindowHazards(
        conflict_rows=(0, 1, 0, 1),
        update_rows=(1, 2, 1, 1),
        read_rows=4,
        rank_conflict_rows=((0, 1, 0, 1),),
        rank_read_rows=(4,),
    )
    assert hazards.raw
    assert QualityFirstPolicy().buckets_to_publish_first(hazards) == [1, 3]
    disjoint = WindowHazards.from_device(raw_exposure(update, torch.stack([scope([11, 12])]), ranges))
    assert not disjoint.raw and QualityFirstPolicy().buckets_to_publish_first(disjoint) == []


def test_raw_exposure_counts_each_reading_rank_and_their_union():
    """Two ranks reading overlapping rows: a row of counts for each rank, one for the union of their reads (a row both
    read counts once) and one for the update. The per-rank rows are what tau bounds: a rank reading few rows may read
    a larger share of them stale than the union's counts show."""
    ranges = RowBuckets(NUM_ROWS, 256).ranges
    update = scope([10, 300, 301, 600, 900])
    reads = torch.stack([scope([10, 11, 300]), scope([300, 301, 900, 950])])
    exposure = raw_exposure(update, reads, ranges)
    assert exposure.dtype == torch.int64
    assert exposure.tolist() == [
        [1, 1, 0, 0, 3],  # rank 0: conflicts per bucket, then |read|
        [0, 2, 0, 1, 4],  # rank 1
        [1, 2, 0, 1, 6],  # union of the reads: row 300 once
        [1, 2, 1, 1, 0],  # |update| per bucket
    ]
    hazards = WindowHazards.from_device(exposure)
    assert hazards.conflict_rows == (1, 2, 0, 1) and hazards.read_rows == 6
    assert hazards.rank_conflict_rows == ((1, 1, 0, 0), (0, 2, 0, 1)) and hazards.rank_read_rows == (3, 4)
    assert hazards.delayed_share([3]) == 0.25
    assert hazards.delayed_share([1, 3]) == 0.75  # rank 1's share; the union's would be 3 / 6


def test_stale_reads_count_only_rows_published_after_the_unit_ran():
    update = scope([5, 600])
    seen = scope([5, 600, 601])
    assert stale_reads(update, [(512, 1000)], seen).item() == 1
    assert stale_reads(update, [(0, 512), (512, 1000)], seen).item() == 2
    assert stale_reads(update, [], seen).item() == 0


def test_private_staging_rejects_aliased_or_leaked_gradients():
    shared = {"means": torch.zeros(4, 3, requires_grad=True)}
    in_flight = [torch.zeros(4, 3)]
    check_private_staging({"means": torch.zeros(4, 3)}, shared, in_flight)
    with pytest.raises(HazardError, match="shares memory"):
        check_private_staging({"means": in_flight[0][1:]}, shared, in_flight)
    shared["means"].grad = torch.ones(4, 3)
    with pytest.raises(HazardError, match="instead of its shadow view"):
        check_private_staging({"means": torch.zeros(4, 3)}, shared, in_flight)


def test_packing_moves_params_and_moments_into_one_table_of_views():
    """pack_gaussians: every parameter and Adam moment becomes a column view of one table, with the same values, and
    the optimizers hold the new views."""
    generator = torch.Generator().manual_seed(0)
    params = {"means": torch.nn.Parameter(torch.randn(6, 3, generator=generator)),
              "features": torch.nn.Parameter(torch.randn(6, 2, 3, generator=generator)),
              "opacities": torch.nn.Parameter(torch.randn(6, generator=generator))}
    originals = {name: p.detach().clone() for name, p in params.items()}
    optimizers = {name: ScopedAdam([p], lr=0.1) for name, p in params.items()}
    moment = torch.randn(6, 3, generator=generator)
    optimizers["means"].state[params["means"]].update(step=torch.tensor(4.0), exp_avg=moment, exp_avg_sq=moment.abs())
    packed = pack_gaussians(params, optimizers)
    assert packed.params.shape == (6, 10) and packed.layout.spans == {"means": (0, 3), "features": (3, 9), "opacities": (9, 10)}
    for name, param in params.items():
        assert isinstance(param, torch.nn.Parameter) and param.untyped_storage().data_ptr() == packed.params.untyped_storage().data_ptr()
        assert torch.equal(param, originals[name]) and optimizers[name].holds(param)
    state = optimizers["means"].state[params["means"]]
    assert torch.equal(state["exp_avg"], moment) and torch.equal(state["exp_avg_sq"], moment.abs()) and state["step"] == 4
    assert torch.equal(packed.exp_avg[:, :3], moment) and not packed.exp_avg[:, 3:].any()
    features = torch.randn(6, 5, 3)[:, 1:3]  # a strided gradient, as the backward of a concatenation hands out
    table, views = packed.gradient_table({"means": None, "features": features, "opacities": torch.ones(6)})
    assert table.shape == (6, 10) and table.is_contiguous() and views["features"].shape == (6, 2, 3)
    assert not table[:, :3].any() and torch.equal(views["features"], features) and torch.equal(table[:, 9], torch.ones(6))
    with pytest.raises(ValueError, match="the gradient of 'opacities' is"):
        packed.gradient_table({"opacities": torch.ones(5)})


def test_scope_of_rejects_masks_of_the_wrong_kind():
    assert scope_of(torch.ones(NUM_ROWS, dtype=torch.bool), NUM_ROWS, CPU).shape == (32,)
    with pytest.raises(ValueError, match="bool mask of shape"):
        scope_of(torch.ones(NUM_ROWS), NUM_ROWS, CPU)
    with pytest.raises(ValueError, match="bool mask of shape"):
        scope_of(torch.ones(NUM_ROWS - 1, dtype=torch.bool), NUM_ROWS, CPU)


def test_shadow_views_read_the_shared_storage_and_stage_gradients_privately():
    shared = {"means": torch.nn.Parameter(torch.ones(5, 3)), "unused": torch.nn.Parameter(torch.ones(5, 1))}
    views = shadow_views(shared)
    assert views["means"].data_ptr() == shared["means"].data_ptr()
    (2 * views["means"]).sum().backward()
    staged = staged_gradients(views)
    assert shared["means"].grad is None
    assert torch.equal(staged["means"], torch.full((5, 3), 2.0)) and staged["unused"] is None


def test_publication_must_not_happen_while_a_unit_graph_is_alive():
    """Why the runtime publishes only before a unit's forward or after its backward: views share the version
    counter of the shared tensor, so an in-place publication in between breaks the unit's backward."""
    shared = torch.nn.Parameter(torch.ones(5, 3))
    view = shadow_views({"means": shared})["means"]
    loss = (view * view).sum()
    with torch.no_grad():
        shared.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    view = shadow_views({"means": shared})["means"]
    (view * view).sum().backward()
    with torch.no_grad():
        shared.add_(1.0)
    assert torch.equal(view.grad, torch.full((5, 3), 4.0))


def test_adam_is_stocks_dense_adam_by_default_in_every_mode():
    """Dense Adam is the default and is accepted in every mode (the overlapped ones drift the rows outside a unit's
    update scope ahead of its exchange); selective Adam stays a choice; anything else is refused."""
    for mode in ("sync", "quality-first", "throughput-first"):
        assert RuntimeConfig(mode=mode).adam == "dense"
        assert RuntimeConfig(mode=mode, adam="selective").adam == "selective"
    with pytest.raises(ValueError, match="adam must be one of"):
        RuntimeConfig(adam="auto")


def test_runtime_config_and_environment_errors_name_the_problem():
    with pytest.raises(ValueError, match="mode must be one of"):
        RuntimeConfig(mode="hogwild")
    with pytest.raises(ValueError, match="exchange must be one of"):
        RuntimeConfig(exchange="sparse")
    with pytest.raises(ValueError, match="bucket_mb must be positive"):
        RuntimeConfig(bucket_mb=0)
    with pytest.raises(ValueError, match="read_scopes must be one of"):
        RuntimeConfig(read_scopes="guessed")
    with pytest.raises(ValueError, match="runs quality-first with the dense exchange, got sync with dense"):
        RuntimeConfig(mode="sync", read_scopes="predicted")
    with pytest.raises(ValueError, match="runs quality-first with the dense exchange, got quality-first with scoped"):
        RuntimeConfig(exchange="scoped", read_scopes="predicted")
    with pytest.raises(ValueError, match="tau must be within"):
        RuntimeConfig(delay=DelayLimits(tau=1.5))
    with pytest.raises(ValueError, match="missing torchrun environment variable"):
        read_torchrun_env({"RANK": "0", "WORLD_SIZE": "2"})
    assert read_torchrun_env(
        {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    ) == (1, 2, 1)
    with pytest.raises(ValueError, match="reduction op"):
        all_reduce_statistics({"count": torch.zeros(3)}, {}, timedelta(seconds=1))
    with pytest.raises(ValueError, match="must be one of"):
        all_reduce_statistics({"count": torch.zeros(3)}, {"count": "mean"}, timedelta(seconds=1))


def test_runtime_config_sets_up_the_runtime_it_describes():
    """nerfstudio's ``InstantiateConfig`` protocol, which the pipeline's ``--pipeline.odin.*`` relies on: ``setup``
    builds the runtime around the config itself and the caller's parameters, optimizers and context."""
    config = RuntimeConfig(mode="sync", bucket_mb=1.5)
    assert config.bucket_bytes == 3 * 2**19 and not config.overlapped and RuntimeConfig().overlapped
    params = {name: torch.nn.Parameter(torch.zeros(NUM_ROWS, 3)) for name in ("means", "colors")}
    optimizers = {name: ScopedAdam([param]) for name, param in params.items()}
    runtime = config.setup(params=params, optimizers=optimizers, context=DistContext.single("cpu"))
    assert isinstance(runtime, OdinRuntime) and runtime.config is config and runtime.num_rows == NUM_ROWS


def test_buckets_publish_in_runs_of_consecutive_ranges():
    assert consecutive_runs([3, 0, 1, 5, 6, 7]) == [[0, 1], [3], [5, 6, 7]]
    assert consecutive_runs([]) == []


@pytest.mark.parametrize("mode", ["sync", "quality-first"])
def test_every_unit_records_its_host_time_and_the_host_time_before_it(mode):
    """A unit's ``host_run_s`` covers its ``run_unit`` call (a 20 ms compute here) and ``host_between_s`` the host's
    time since the previous call returned (30 ms of sleep here; 0 for the first unit), staged units included."""
    import time

    params = {name: torch.nn.Parameter(torch.zeros(NUM_ROWS, 3)) for name in ("means", "colors")}
    optimizers = {name: ScopedAdam([param]) for name, param in params.items()}
    runtime = RuntimeConfig(mode=mode).setup(params=params, optimizers=optimizers, context=DistContext.single("cpu"))
    visible = torch.zeros(NUM_ROWS, dtype=torch.bool)
    visible[:100] = True

    def compute(views):
        time.sleep(0.02)
        loss = sum(view[visible].square().sum() for view in views.values())
        loss.backward()
        return loss.detach(), visible

    for unit in range(4):
        if unit:
            time.sleep(0.03)
        runtime.run_unit(unit, compute, lambda views: visible.clone())
    runtime.drain()
    records = runtime.stats.take()
    assert [record.unit_id for record in records] == [0, 1, 2, 3]
    # lower bounds only: a sleep lasts at least as long as asked, however loaded the machine
    assert all(record.host_run_s >= 0.02 for record in records)
    assert records[0].host_between_s == 0.0 and all(record.host_between_s >= 0.03 for record in records[1:])


def test_the_finite_watch_names_the_groups_of_nan_and_inf_columns_and_not_huge_finite_ones():
    """NaN, +Inf and -Inf are caught per column and reported by group at the first unit they appeared in; finite
    values whose column sum would overflow float32 are not (the watch reads minima and maxima, not sums)."""
    from odin_ns.runtime.finite import FiniteWatch, NonFiniteGradientError

    watch = FiniteWatch(["means", "opacities", "colors"], [0, 0, 0, 1, 2, 2, 2], torch.device("cpu"))
    table = torch.zeros(4, 7)
    table[:2, 1] = 3e38  # sums to Inf, each value finite
    watch.observe(3, table)
    watch.check(DistContext.single("cpu"))
    table[2, 3] = float("nan")
    watch.observe(4, table)
    table[1, 5], table[0, 6] = float("inf"), -float("inf")
    watch.observe(5, table)  # later: the report names where it began
    with pytest.raises(NonFiniteGradientError, match=r"\['opacities'\] on rank 0 at step 4"):
        watch.check(DistContext.single("cpu"))
    fresh = FiniteWatch(["means", "opacities", "colors"], [0, 0, 0, 1, 2, 2, 2], torch.device("cpu"))
    fresh.observe(7, table)
    with pytest.raises(NonFiniteGradientError, match=r"\['colors', 'opacities'\] on rank 0 at step 7"):
        fresh.check(DistContext.single("cpu"))
    fresh.observe(8, torch.zeros(0, 7))  # no rows (every Gaussian pruned): nothing to watch
