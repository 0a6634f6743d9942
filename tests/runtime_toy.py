"""A toy renderer and a 2-rank harness (gloo on the CPU, NCCL on GPUs) for the runtime tests; no nerfstudio renderer.

The toy "scene" is N points in the unit square with a colour and an opacity each. A view is a window of the square:
it sees the points whose mean lies inside (a projection-like test that depends on the parameters, so an update can
move a point into or out of a view). Its loss pulls the colours of the points it sees towards a target colour and
their means towards an attractor, and is differentiable through the visible rows only.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from odin_ns.comm.context import DistContext, torchrun_context
from odin_ns.runtime.config import RuntimeConfig
from odin_ns.runtime.executor import OdinRuntime
from odin_ns.runtime.optimizer import ScopedAdam
from odin_ns.runtime.window import SYNC_PATH_AFTER, SYNC_PATH_UNITS
from odin_ns.sync.predicted import BucketBounds, adam_step_factor, per_bucket

NUM_ROWS = 2000
LEARNING_RATES = {"means": 0.01, "colors": 0.05, "opacities": 0.05}
GRID = 4
"""Views are the cells of a GRID x GRID tiling of the unit square."""
ROW_BYTES = 4 * (2 + 3 + 1)
"""Gradient bytes of a toy row: means 2, colors 3 and opacities 1 float32."""
_context: DistContext | None = None
"""This rank's context, set by the spawn harness."""


@dataclass(frozen=True)
class View:
    window: tuple[float, float, float, float]
    target: tuple[float, float, float]
    attractor: tuple[float, float]


def cell_view(cell: int, attractor: tuple[float, float] | None = None) -> View:
    """The view of grid cell ``cell``, pulling its points to the cell's centre unless told otherwise."""
    size = 1.0 / GRID
    x0, y0 = (cell % GRID) * size, (cell // GRID) * size
    target = (cell / GRID**2, 1.0 - cell / GRID**2, 0.5)
    return View((x0, y0, x0 + size, y0 + size), target, attractor or (x0 + size / 2, y0 + size / 2))


def visible_rows(means: torch.Tensor, view: View) -> torch.Tensor:
    x0, y0, x1, y1 = view.window
    x, y = means[:, 0], means[:, 1]
    return (x >= x0) & (x < x1) & (y >= y0) & (y < y1)


def unit_functions(view: View, camera: torch.Tensor | None = None) -> tuple[Callable, Callable]:
    """(compute_fn, visible_fn) of a unit rendering ``view`` on this rank; with ``camera`` (a dense [2] offset, as a
    camera optimizer's), the loss also pulls the offset means towards the attractor."""

    def visible_fn(views: dict[str, torch.Tensor]) -> torch.Tensor:
        return visible_rows(views["means"], view)

    def compute_fn(views: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        visible = visible_rows(views["means"].detach(), view)
        rows = visible.nonzero().squeeze(1)
        means, colors, opacities = (views[name].index_select(0, rows) for name in ("means", "colors", "opacities"))
        target = torch.tensor(view.target, device=means.device)
        attractor = torch.tensor(view.attractor, device=means.device)
        offset = means if camera is None else means + camera
        loss = (torch.sigmoid(opacities) * (colors - target).square()).sum() + 0.1 * (offset - attractor).square().sum()
        loss.backward()
        return loss.detach(), visible

    return compute_fn, visible_fn


def initial_params(num_rows: int = NUM_ROWS, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        "means": torch.rand(num_rows, 2, generator=generator),
        "colors": 0.1 * torch.randn(num_rows, 3, generator=generator),
        "opacities": torch.zeros(num_rows, 1),
    }


def cell_sorted(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The rows ordered by grid cell, as the Gaussians are kept in Morton order: a bucket of rows is then a compact
    piece of the square, which is what predicted read scopes bound."""
    cells = (params["means"] * GRID).floor().clamp(0, GRID - 1)
    order = torch.argsort(cells[:, 1] * GRID + cells[:, 0], stable=True)
    return {name: tensor[order] for name, tensor in params.items()}


class ToyReadPredictor:
    """``ReadPredictor`` of the toy: each bucket's box of means, inflated by what Adam can have moved them since the
    box was taken, against the windows a schedule's units render (every rank's, or ``rank``'s)."""

    def __init__(self, schedule: Sequence[Sequence[View]], rank: int, means_lr: float):
        self.schedule, self.rank = schedule, rank
        self.step_bound = means_lr * adam_step_factor(0.9, 0.999)
        self.bounds: BucketBounds | None = None

    def rebind(self, params, buckets) -> None:
        def boxes(params):
            means = params["means"].detach()
            return torch.cat([per_bucket(means, buckets, "min"), per_bucket(means, buckets, "max")], dim=1)

        self.bounds = BucketBounds(boxes)
        self.bounds.refresh(params, wait=True)

    def published(self, params, refresh: bool = True) -> None:
        self.bounds.tick()
        if refresh:
            self.bounds.refresh(params)

    def read_buckets(self, unit_id: int, every_rank: bool):
        boxes, age = self.bounds.latest()
        margin = (age + 2) * self.step_bound
        unit = self.schedule[unit_id % len(self.schedule)]  # schedules repeat, as epochs of a plan do
        views = unit if every_rank else [unit[self.rank]]
        hit = np.zeros(len(boxes), dtype=bool)
        for view in views:
            x0, y0, x1, y1 = view.window
            overlap_x = (boxes[:, 0] - margin <= x1) & (boxes[:, 2] + margin >= x0)
            overlap_y = (boxes[:, 1] - margin <= y1) & (boxes[:, 3] + margin >= y0)
            hit |= overlap_x & overlap_y
        return hit


def rank_device() -> torch.device:
    """This rank's GPU under NCCL, the CPU under gloo."""
    return rank_context().device


class ToyModel:
    """Shared parameters on this rank's device and one ScopedAdam per parameter, as nerfstudio sets Gaussians up."""

    def __init__(self, tensors: dict[str, torch.Tensor], learning_rates: dict[str, float] = LEARNING_RATES):
        self.params = {
            name: torch.nn.Parameter(tensor.to(rank_device(), copy=True)) for name, tensor in tensors.items()
        }
        self.optimizers = {name: ScopedAdam([param], lr=learning_rates[name]) for name, param in self.params.items()}

    def append_rows(self, rows: torch.Tensor) -> None:
        """Clone ``rows`` at the end of every tensor (moments of the clones start at zero), like a densification."""
        for name, old in list(self.params.items()):
            new = torch.nn.Parameter(torch.cat([old.detach(), old.detach()[rows]]))
            optimizer = self.optimizers[name]
            state = optimizer.state.pop(old, None)
            if state:
                for key in ("exp_avg", "exp_avg_sq"):
                    state[key] = torch.cat([state[key], torch.zeros_like(state[key][rows])])
                optimizer.state[new] = state
            optimizer.param_groups[0]["params"] = [new]
            self.params[name] = new

    def snapshot(self) -> dict[str, torch.Tensor]:
        """Parameters, both Adam moments and step counts, copied to the CPU."""
        out = {}
        for name, param in self.params.items():
            state = self.optimizers[name].state[param]
            out[name] = param.detach().cpu()
            for key in ("exp_avg", "exp_avg_sq", "step"):
                out[f"{name}.{key}"] = state[key].cpu()
        return out


def run_schedule(runtime: OdinRuntime, schedule: Sequence[Sequence[View]], rank: int, first_unit: int = 0) -> None:
    """Run one unit per schedule entry, this rank rendering its view of the entry."""
    for offset, views in enumerate(schedule):
        compute_fn, visible_fn = unit_functions(views[rank])
        runtime.run_unit(first_unit + offset, compute_fn, visible_fn)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rank_entry(
    worker: Callable[[int, Path], None], rank: int, world_size: int, port: int, out_dir: Path, backend: str
) -> None:
    """Join the group from torchrun-style variables, run ``worker``; write any error to ``rank{rank}.error``."""
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    torch.set_num_threads(1)
    try:
        global _context
        with torchrun_context(timeout_s=10.0, backend=backend) as _context:
            worker(rank, out_dir)
            dist.barrier()  # leave together: gloo torn down under a peer still using it can abort that peer
    except BaseException:
        (out_dir / f"rank{rank}.error").write_text(traceback.format_exc())
        raise
    # Skip the interpreter's teardown once the group is destroyed: c10d's static objects occasionally abort there
    # ("terminate called without an active exception": twice in full-suite CI runs, never alone), after the work.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def spawn_ranks(
    worker: Callable[[int, Path], None], out_dir: Path, world_size: int, backend: str, join_timeout_s: float = 120.0
) -> list[int]:
    """Run ``worker(rank, out_dir)`` in ``world_size`` spawned processes; return their exit codes."""
    context = mp.get_context("spawn")
    port = free_port()
    processes = [
        context.Process(target=_rank_entry, args=(worker, rank, world_size, port, out_dir, backend))
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(join_timeout_s)
        if process.is_alive():
            process.kill()
            process.join()
    return [process.exitcode for process in processes]


def rank_context() -> DistContext:
    """This rank's distributed context (inside ``spawn_ranks``)."""
    assert _context is not None, "rank_context() is for workers run by spawn_ranks"
    return _context


def make_runtime(
    model: ToyModel,
    dense_params=(),
    predictor=None,
    buckets: int = 8,
    sync_path_stretches: tuple[int, int] = (SYNC_PATH_AFTER, SYNC_PATH_UNITS),
    **config,
) -> OdinRuntime:
    """The runtime over ``model`` on this rank's context, its exchange of ``NUM_ROWS`` rows cut into about
    ``buckets`` buckets (a bucket size below the runtime's 4 MB floor sets the size itself: the toy's tables are
    tiny, and the tests need several buckets per exchange)."""
    bucket_mb = -(-NUM_ROWS // buckets) * ROW_BYTES / 2**20
    config = RuntimeConfig(bucket_mb=bucket_mb, timeout_s=10.0, **config)
    return config.setup(
        params=model.params, optimizers=model.optimizers, context=rank_context(), dense_params=dense_params,
        predictor=predictor, sync_path_stretches=sync_path_stretches,
    )
