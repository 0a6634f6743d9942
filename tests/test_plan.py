"""AOT plan: per-epoch permutations, rank assignment, predicted conflicts, plan file, figure, datamanager."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from odin_ns.schedule.figure import draw_plan
from odin_ns.schedule.partition import partition_views
from odin_ns.schedule.plan import SchedulePlan, consecutive_conflicts
from odin_ns.schedule.rlg import build_rlg
from odin_ns.schedule.tracks import SFM_TRACKS, Observations, incidence_matrix


def strip_plan(num_views: int = 30, world_size: int = 1, views_per_rank: int = 1, **options) -> SchedulePlan:
    """Views along a strip; each point is seen by 3 consecutive views, so neighbours on the strip overlap."""
    views = np.concatenate([np.arange(start, start + 3) for start in range(num_views - 2)])
    points = np.repeat(np.arange(num_views - 2), 3)
    graph = build_rlg(Observations(incidence_matrix(views, points, num_views), SFM_TRACKS))
    positions = np.stack([np.arange(num_views), np.zeros(num_views), np.zeros(num_views)], axis=1).astype(float)
    return SchedulePlan(
        view_names=[f"{view}.jpg" for view in range(num_views)],
        graph=graph,
        partition=partition_views(graph, options.pop("num_regions", 3), seed=0),
        world_size=world_size,
        views_per_rank=views_per_rank,
        positions=positions,
        **options,
    )


@pytest.mark.parametrize("order", ["rlg", "random"])
@pytest.mark.parametrize(("world_size", "views_per_rank"), [(1, 1), (2, 1), (4, 2), (3, 3), (7, 4)])
def test_each_epoch_visits_views_at_most_once_and_drops_the_remainder(order, world_size, views_per_rank):
    plan = strip_plan(30, world_size, views_per_rank, order=order)
    per_step = world_size * views_per_rank
    seen_over_epochs = set()
    for epoch in range(12):
        units = plan.epoch_units(epoch)
        assert units.shape == (30 // per_step, per_step)
        flat = units.reshape(-1)
        assert len(set(flat.tolist())) == len(flat) == 30 - 30 % per_step
        seen_over_epochs |= set(flat.tolist())
    assert seen_over_epochs == set(range(30))  # the dropped remainder changes from epoch to epoch


def test_steps_continue_across_epochs_and_ranks_split_each_unit():
    plan = strip_plan(30, world_size=3, views_per_rank=2)
    assert plan.units_per_epoch == 5
    for step in range(12):
        epoch, unit = divmod(step, 5)
        per_rank = plan.unit_views(step)
        assert per_rank == plan.epoch_units(epoch)[unit].reshape(3, 2).tolist()
        assert [plan.views_for(step, rank) for rank in range(3)] == per_rank
        assert len({view for views in per_rank for view in views}) == 6
    with pytest.raises(ValueError, match="rank 3 outside world of size 3"):
        plan.views_for(0, 3)
    with pytest.raises(ValueError, match="step must be non-negative"):
        plan.unit_views(-1)


def test_plan_is_deterministic_per_seed():
    first, again, other = strip_plan(seed=5), strip_plan(seed=5), strip_plan(seed=6)
    assert (first.epoch_units(3) == again.epoch_units(3)).all()
    assert not (first.epoch_units(3) == other.epoch_units(3)).all()
    assert not (first.epoch_units(0) == first.epoch_units(1)).all()


def test_more_views_per_step_than_views_is_an_error():
    with pytest.raises(ValueError, match="= 32 views per step exceeds the 30 training views"):
        strip_plan(30, world_size=8, views_per_rank=4)
    with pytest.raises(ValueError, match="exceeds the 30 training views"):
        strip_plan(30).with_batch(world_size=31)


def test_rlg_order_rotates_regions_and_beats_random_on_conflict():
    plan = strip_plan(30)
    labels = plan.partition.labels
    units = plan.epoch_units(0)[:, 0]
    assert (labels[units[1:]] != labels[units[:-1]]).all()  # never two units of one region in a row
    planned, shuffled = plan.epoch_conflicts(0), plan.with_batch(order="random").epoch_conflicts(0)
    assert planned.total.mean() < shuffled.total.mean()


def test_predicted_conflicts_match_a_dense_computation():
    plan = strip_plan(30, world_size=2, views_per_rank=2, conflict_threshold=0.3)
    dense = plan.graph.weights.toarray()
    conflicts = plan.epoch_conflicts(0)
    for step in range(plan.units_per_epoch):  # the last pair reaches into epoch 1
        block = dense[np.ix_(sum(plan.unit_views(step), []), sum(plan.unit_views(step + 1), []))]
        assert conflicts.total[step] == pytest.approx(block.sum())
        assert conflicts.peak[step] == pytest.approx(block.max())
        assert conflicts.admissible[step] == (block.max() < 0.3)
    assert conflicts.admissible_fraction == pytest.approx(conflicts.admissible.mean())


def test_consecutive_conflicts_of_a_single_unit_is_empty():
    total, peak = consecutive_conflicts(strip_plan().graph.weights, np.array([[0, 1]]))
    assert len(total) == len(peak) == 0


def test_view_without_observations_is_still_scheduled(caplog):
    """Documented behaviour: a view that shares no point gets no edges, a region, and a place in every epoch."""
    views, points = np.array([0, 1, 1, 2, 2, 3]), np.array([0, 0, 1, 1, 2, 2])  # view 4 observes nothing
    with caplog.at_level(logging.WARNING, logger="odin_ns.schedule.rlg"):
        graph = build_rlg(Observations(incidence_matrix(views, points, 5), SFM_TRACKS))
    assert "1 of 5 views share no point" in caplog.text
    plan = SchedulePlan([f"{view}.jpg" for view in range(5)], graph, partition_views(graph, 2))
    assert graph.isolated_views().tolist() == [4]
    assert sorted(plan.epoch_units(0).reshape(-1).tolist()) == [0, 1, 2, 3, 4]


def test_plan_file_round_trip_and_view_check(tmp_path):
    plan = strip_plan(30, world_size=2)
    plan.save(tmp_path / "plan.npz")
    loaded = SchedulePlan.load(tmp_path / "plan.npz")
    assert loaded.view_names == plan.view_names and loaded.world_size == 2
    assert (loaded.epoch_units(2) == plan.epoch_units(2)).all()
    assert loaded.summary()["intra_region_weight_fraction"] == pytest.approx(plan.partition.intra_fraction)
    loaded.check_views(plan.view_names)
    with pytest.raises(ValueError, match="training view 1 is 'x.jpg' in the dataset but '1.jpg' in the plan"):
        loaded.check_views(["0.jpg", "x.jpg"] + plan.view_names[2:])
    with pytest.raises(ValueError, match="plan is for 30 training views, the dataset has 2"):
        loaded.check_views(["0.jpg", "1.jpg"])
    with pytest.raises(FileNotFoundError, match="no plan file"):
        SchedulePlan.load(tmp_path / "missing.npz")


def test_figure_is_written(tmp_path):
    plan = strip_plan(30, world_size=2)
    draw_plan(plan, tmp_path / "plan.png")
    assert (tmp_path / "plan.png").read_bytes()[:4] == b"\x89PNG"
    plan.positions = None
    with pytest.raises(ValueError, match="no camera positions"):
        draw_plan(plan, tmp_path / "other.png")


def test_cup77_consecutive_overlap_is_lower_than_random(cup77):
    from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig

    from odin_ns.data.datamanager import plan_training_views

    config = ColmapDataParserConfig(data=cup77, colmap_path=Path("sparse/0"), downscale_factor=1, load_3D_points=False)
    plan = plan_training_views(config.setup().get_dataparser_outputs(split="train"), config, seed=0)
    assert plan.graph.source == "sfm-tracks"
    for world_size, views_per_rank in [(1, 1), (2, 1), (2, 2), (4, 2)]:
        summary = plan.with_batch(world_size, views_per_rank).summary()
        print(
            f"cup77 W={world_size} b={views_per_rank}: mean consecutive conflict "
            f"rlg {summary['mean_conflict_sum']:.4f} random {summary['random_mean_conflict_sum']:.4f}; "
            f"admissible windows {summary['admissible_window_fraction']:.0%} "
            f"vs {summary['random_admissible_window_fraction']:.0%}"
        )
        assert summary["mean_conflict_sum"] < summary["random_mean_conflict_sum"]


def cup77_datamanager(cup77: Path, rank: int, world_size: int, **options):
    from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig

    from odin_ns.data.datamanager import OdinDataManagerConfig

    dataparser = ColmapDataParserConfig(data=cup77, colmap_path=Path("sparse/0"), downscale_factor=1)
    config = OdinDataManagerConfig(dataparser=dataparser, cache_images="gpu", **options)
    # every simulated rank builds the plan itself: what rank 0 builds and broadcasts in a real run
    context = SimpleNamespace(rank=rank, world_size=world_size, is_main=True, broadcast_object=lambda value, what: value)
    return config.setup(device="cpu", dist_context=context)


def test_datamanager_ranks_get_disjoint_views_covering_the_epoch(cup77):
    managers = [cup77_datamanager(cup77, rank, 2) for rank in range(2)]
    plan = managers[0].plan
    assert plan.num_views == len(managers[0].train_dataset) == 67  # 77 images, every 8th held out
    served = []
    for step in range(plan.units_per_epoch):
        per_rank = []
        for manager in managers:
            camera, data = manager.next_train(step)
            (view,) = camera.metadata["cam_idx"]
            assert camera.shape == (1,) and data["image"].shape == (1, 150, 200, 3)
            assert camera.metadata["image_size"] == (200, 150)
            assert torch.equal(data["image"][0], manager.cached_train[view]["image"])
            per_rank.append(view)
        assert per_rank[0] != per_rank[1]
        assert managers[1].unit_views(step) == [[per_rank[0]], [per_rank[1]]]
        served += per_rank
    assert len(set(served)) == len(served) == 66  # 67 views, units of 2: one dropped this epoch


def test_plan_command_file_drives_a_datamanager_of_another_batch(cup77, tmp_path):
    from odin_ns.data.datamanager import PlanCommand

    PlanCommand(data=cup77, world_size=2, views_per_rank=2, out=tmp_path).main()
    assert (tmp_path / "plan.png").stat().st_size > 10_000
    manager = cup77_datamanager(cup77, 0, 1, plan_path=tmp_path / "plan.npz")
    assert manager.plan.world_size == 1 and manager.plan.views_per_rank == 1  # the file is rescheduled
    cameras, data = manager.next_train(0)
    assert cameras.shape == (1,) and data["image"].shape == (1, 150, 200, 3)
    assert manager.unit_views(0) == [cameras.metadata["cam_idx"]]


def test_a_datamanager_serves_several_views_per_rank_as_one_batch(cup77):
    manager = cup77_datamanager(cup77, 1, 2, views_per_rank=3)
    cameras, data = manager.next_train(4)
    views = manager.unit_views(4)[1]
    assert cameras.metadata["cam_idx"] == views and len(views) == 3
    assert cameras.shape == (3,) and data["image"].shape == (3, 150, 200, 3)
    for index, view in enumerate(views):
        assert torch.equal(data["image"][index], manager.cached_train[view]["image"])
        assert torch.equal(cameras.camera_to_worlds[index], manager.train_cameras.camera_to_worlds[view])
