"""Densification on 2 ranks decides what one process rendering both ranks' views decides, across opacity resets.

Each rank feeds OdinStrategy its own synthetic gsplat ``info`` (one camera) per step; the reference process feeds
both ranks' cameras as one batch of two. The barrier's runtime is a stand-in whose ``reduce_statistics`` is a real
all-reduce over the gloo group, so the test isolates what the strategy and the barrier do with the statistics.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist
from runtime_toy import spawn_ranks

from odin_ns.strategy import OdinStrategy
from odin_ns.structural_barrier import DrainingBarrier

WORLD_SIZE = 2
NUM_GAUSSIANS = 64
WIDTH, HEIGHT = 64, 48
STEPS = range(7)
"""Step 0 resets opacities only, 3 refines, 4 resets only, 6 refines (see ``strategy()``)."""
REFINE_STEPS = [3, 6]
RESET_ONLY_STEPS = [0, 4]


def strategy() -> OdinStrategy:
    return OdinStrategy(
        grow_grad2d=0.2,
        refine_scale2d_stop_iter=100,
        refine_start_iter=0,
        refine_stop_iter=100,
        reset_every=4,
        refine_every=3,
        pause_refine_after_reset=0,
    )


def initial_gaussians() -> tuple[dict[str, torch.nn.Parameter], dict[str, torch.optim.Optimizer]]:
    """Half small (duplicated when their gradient is high), half large (split), a few nearly transparent (pruned)."""
    generator = torch.Generator().manual_seed(0)
    small = torch.arange(NUM_GAUSSIANS) % 2 == 0
    opacities = torch.zeros(NUM_GAUSSIANS)
    opacities[::7] = -10.0
    params = {
        "means": torch.rand(NUM_GAUSSIANS, 3, generator=generator),
        "scales": torch.where(small, -6.0, -2.5)[:, None].expand(-1, 3).clone(),
        "quats": torch.randn(NUM_GAUSSIANS, 4, generator=generator),
        "opacities": opacities,
    }
    params = {name: torch.nn.Parameter(tensor) for name, tensor in params.items()}
    return params, {name: torch.optim.Adam([param], lr=0.01) for name, param in params.items()}


def rank_camera(step: int, rank: int, num_gaussians: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(gradient of means2d [N, 2], radii [N]) of rank's view at step; gradients are multiples of 2**-10, so sums in
    any order are exact. A Gaussian has one radius per step whichever view sees it: for a Gaussian seen by several
    cameras of one batch, gsplat keeps the last camera's radius instead of the largest."""
    radii = torch.randint(1, 5, (num_gaussians,), generator=torch.Generator().manual_seed(step), dtype=torch.int32)
    generator = torch.Generator().manual_seed(1000 * step + rank)
    visible = torch.rand(num_gaussians, generator=generator) < 0.6
    grad = torch.zeros(num_gaussians, 2)
    grad[:, 0] = torch.randint(0, 17, (num_gaussians,), generator=generator) / 1024
    return grad * visible[:, None], radii * visible


def train_step(model: dict, step: int, ranks: list[int], batch_size: int) -> None:
    """One step of ``model`` rendering the views of ``ranks`` as one batch, the loss averaged over the batch."""
    params = model["params"]
    cameras = [rank_camera(step, rank, len(params["means"])) for rank in ranks]
    means2d = torch.zeros(len(ranks), len(params["means"]), 2, requires_grad=True)
    info = {
        "means2d": means2d,
        "radii": torch.stack([radii for _, radii in cameras]),
        "width": WIDTH,
        "height": HEIGHT,
        "n_cameras": batch_size,
        "gaussian_ids": None,
    }
    model["strategy"].step_pre_backward(params, model["optimizers"], model["state"], step, info)
    (means2d * torch.stack([grad for grad, _ in cameras])).sum().div(batch_size).backward()
    model["strategy"].step_post_backward(params, model["optimizers"], model["state"], step, info)


class RecordingRuntime:
    """The runtime calls of a barrier, recorded; statistics are all-reduced over the default group if there is one."""

    def __init__(self):
        self.calls: list[str] = []
        self.reduced: list[dict[str, torch.Tensor]] = []

    def drain(self) -> None:
        self.calls.append("drain")

    def reduce_statistics(self, statistics, ops) -> dict[str, torch.Tensor]:
        self.calls.append("reduce_statistics")
        reduced = {name: tensor.clone() for name, tensor in statistics.items()}
        if dist.is_initialized():
            for name, tensor in reduced.items():
                dist.all_reduce(tensor, dist.ReduceOp.SUM if ops[name] == "sum" else dist.ReduceOp.MAX)
        self.reduced.append({name: tensor.clone() for name, tensor in reduced.items()})
        return reduced

    def rebind(self, params) -> None:
        self.calls.append("rebind")

    def verify_replicas(self) -> None:
        self.calls.append("verify_replicas")


def train(ranks: list[int], batch_size: int) -> dict:
    """Every step of STEPS on the views of ``ranks``; the Gaussians and the statistics each refine decided from."""
    params, optimizers = initial_gaussians()
    model = {"params": params, "optimizers": optimizers, "strategy": strategy()}
    model["state"] = model["strategy"].initialize_state(scene_scale=1.0)
    runtime = RecordingRuntime()
    model["strategy"].barrier = DrainingBarrier(runtime)
    for step in STEPS:
        train_step(model, step, ranks, batch_size)
    return {
        "params": {name: param.detach().clone() for name, param in params.items()},
        "refine_statistics": runtime.reduced,
        "calls": runtime.calls,
    }


def rank_worker(rank: int, out_dir: Path) -> None:
    torch.save(train([rank], batch_size=1), out_dir / f"rank{rank}.pt")


def test_statistics_are_reduced_before_refines_only():
    """Every structural change drains, rebinds and checks the replicas; only a refine reduces the statistics."""
    calls = train([0], batch_size=1)["calls"]
    per_change = ["drain", "rebind", "verify_replicas"]
    refine = ["drain", "reduce_statistics", "rebind", "verify_replicas"]
    assert [step for step in STEPS if strategy().changes_structure(step)] == sorted(RESET_ONLY_STEPS + REFINE_STEPS)
    assert calls == per_change + refine + per_change + refine  # steps 0, 3, 4, 6


def test_two_ranks_densify_like_one_process_fed_both_views(tmp_path):
    assert spawn_ranks(rank_worker, tmp_path, WORLD_SIZE, "gloo") == [0] * WORLD_SIZE, [
        error.read_text() for error in tmp_path.glob("rank*.error")
    ]
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]
    reference = train(list(range(WORLD_SIZE)), batch_size=WORLD_SIZE)
    assert len(reference["params"]["means"]) != NUM_GAUSSIANS, "the steps must grow or prune something"
    for rank, result in enumerate(ranks):
        for name, want in reference["params"].items():
            got = result["params"][name]
            assert got.shape == want.shape and torch.equal(got, want), f"rank {rank}: {name} after step {STEPS[-1]}"
        assert len(result["refine_statistics"]) == len(REFINE_STEPS)
        for refine, (got, want) in enumerate(zip(result["refine_statistics"], reference["refine_statistics"])):
            for name in want:
                assert torch.equal(got[name], want[name]), f"rank {rank}: {name} at refine step {REFINE_STEPS[refine]}"
