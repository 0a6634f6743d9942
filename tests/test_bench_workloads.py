"""The alternating-cost workload (odin_bench.workloads) and the launcher that trains on it (odin_bench.train): every
rank out of phase with its neighbour, costs from the seed points, and the datamanager's plan replaced on every rank."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from odin_bench import train
from odin_bench.workloads import (
    ALTERNATING_COST,
    AlternatingCostPlan,
    alternating_cost_training_views,
    rank_imbalance,
    render_costs,
)
from odin_ns.schedule.partition import partition_views
from odin_ns.schedule.plan import SchedulePlan
from odin_ns.schedule.rlg import build_rlg
from odin_ns.schedule.tracks import SFM_TRACKS, Observations, ViewCameras, incidence_matrix
from training import QUIET_TRAINING, run, torchrun


def strip_plan(num_views: int, world_size: int, views_per_rank: int = 1) -> SchedulePlan:
    """Views along a strip in 4 regions; each point is seen by 3 consecutive views."""
    views = np.concatenate([np.arange(start, start + 3) for start in range(num_views - 2)])
    points = np.repeat(np.arange(num_views - 2), 3)
    graph = build_rlg(Observations(incidence_matrix(views, points, num_views), SFM_TRACKS))
    return SchedulePlan([f"{view}.jpg" for view in range(num_views)], graph, partition_views(graph, 4, seed=0),
                        world_size=world_size, views_per_rank=views_per_rank)


@pytest.mark.parametrize(("world_size", "views_per_rank"), [(2, 1), (4, 1), (2, 2), (3, 1)])
def test_alternating_cost_order_puts_every_rank_out_of_phase_with_its_neighbour(world_size, views_per_rank):
    """Rank r renders costly views at steps t with t + r even and cheap ones otherwise; each epoch visits every view at
    most once; consecutive units come from different regions where the pools allow."""
    costs = np.where(np.arange(64) % 2 == 0, 1.0, 0.1)  # half the views costly, spread along the strip
    plan = AlternatingCostPlan.of(strip_plan(64, world_size, views_per_rank), costs)
    assert plan.order == ALTERNATING_COST
    costly = costs > np.median(costs)
    units = plan.epoch_units(0)
    flat = units.reshape(-1)
    assert len(set(flat.tolist())) == len(flat) == 64 - 64 % (world_size * views_per_rank)
    per_rank = costly[units.reshape(len(units), world_size, views_per_rank)]
    wanted = (np.arange(len(units))[:, None] + np.arange(world_size)[None]) % 2 == 0
    matches = np.where(wanted, per_rank.all(axis=2), (~per_rank).all(axis=2))
    assert matches.mean() >= 0.9  # a class may run out near the end of an epoch
    labels = plan.partition.labels
    shared = [bool(set(labels[a]) & set(labels[b])) for a, b in zip(units[:-1], units[1:])]
    assert np.mean(shared) < 0.25
    summary = plan.summary()
    assert summary["rank_imbalance"] > summary["random_rank_imbalance"]  # the random baseline deals random units


def test_the_alternating_cost_order_needs_every_views_cost():
    with pytest.raises(ValueError, match="alternating-cost order needs each of the 30 views' render cost"):
        AlternatingCostPlan.of(strip_plan(30, 2), np.ones(29))


def test_rank_imbalance_is_one_for_equal_ranks_and_the_slowest_over_the_mean_otherwise():
    costs = np.array([1.0, 1.0, 3.0, 1.0])
    assert rank_imbalance(np.array([[0, 1]]), costs, 2) == 1.0
    assert rank_imbalance(np.array([[2, 3]]), costs, 2) == pytest.approx(3.0 / 2.0)


def test_render_costs_count_the_points_in_each_frustum():
    looking_down_minus_z = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]])
    looking_away = looking_down_minus_z.copy()
    looking_away[:, :3] = np.diag([1.0, -1.0, -1.0])  # turned around: looks down +z
    cameras = ViewCameras(
        camera_to_world=np.stack([looking_down_minus_z, looking_away]),
        fx=np.full(2, 50.0), fy=np.full(2, 50.0), cx=np.full(2, 50.0), cy=np.full(2, 50.0),
        width=np.full(2, 100.0), height=np.full(2, 100.0),
    )
    points = np.array([[0.0, 0.0, -5.0], [0.1, 0.1, -3.0], [0.0, 0.0, 4.0], [50.0, 0.0, -1.0]])
    assert render_costs(cameras, points).tolist() == [0.5, 0.25]
    with pytest.raises(ValueError, match="need seed points"):
        render_costs(cameras, np.zeros((0, 3)))


def test_a_datamanager_deals_the_workload_in_place_of_the_plan_it_builds(tiny_scene: Path, monkeypatch):
    """What the launcher's stand-in does to a datamanager: its plan is the alternating-cost one, costs from the
    capture's seed points (the tiny scene's wide views see every region, its ring views one)."""
    from odin_ns.data import datamanager
    from odin_ns.data.dataparser import OdinDataParserConfig

    monkeypatch.setattr(datamanager, "plan_training_views", alternating_cost_training_views)
    config = datamanager.OdinDataManagerConfig(dataparser=OdinDataParserConfig(data=tiny_scene))
    context = SimpleNamespace(rank=0, world_size=2, is_main=True, broadcast_object=lambda value, what: value)
    plan = config.setup(device="cpu", dist_context=context).plan
    assert isinstance(plan, AlternatingCostPlan) and plan.order == ALTERNATING_COST
    costly = plan.view_costs > np.median(plan.view_costs)
    units = plan.epoch_units(0)
    assert (costly[units[:, 0]] != costly[units[:, 1]]).mean() > 0.9


def test_the_launcher_refuses_the_workload_with_a_plan_file(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train", "--alternating-cost", "odin-splatfacto",
                                      "--pipeline.datamanager.plan-path", "plan.npz"])
    with pytest.raises(SystemExit, match="not one from a plan file"):
        train.main()


@pytest.mark.slow
def test_two_ranks_train_on_the_workload_through_the_launcher(tiny_scene: Path, tmp_path: Path):
    """Under torchrun each rank runs the launcher: rank 0 builds the workload's plan and the other takes it."""
    result = run([*torchrun(2), "-m", "odin_bench.train", "--alternating-cost", "odin-splatfacto", "--data",
                  str(tiny_scene), "--output-dir", str(tmp_path), "--max-num-iterations", "4", *QUIET_TRAINING])
    output = " ".join((result.stdout + result.stderr).split())  # rich wraps the log lines
    assert "order alternating-cost" in output, output[-3000:]
