"""Host work of the Odin runtime per unit, counted in dispatched torch operations (2 gloo ranks on the CPU).

On the GPU host the runtime's cost is Python and kernel launches, not bytes: the H200 profile in docs/results.md shows
the GPUs idle most of a unit. Every dispatched operation is at least one launch and a few microseconds of Python, so
counting the operations the runtime itself dispatches per unit (the model's forward and backward excluded) measures
that cost on any machine, without a GPU. A call of an ``odin_ns.kernels`` function counts as one operation, as its
Triton kernel is one launch on the GPU (on the CPU its torch fallback dispatches several). Gaussians are shaped like splatfacto's (59 floats per row); every unit sees
``visible_fraction`` of them, consecutive units alternate between two disjoint halves of the rows (so quality-first
can overlap) and every ``conflict_every``-th unit re-reads the previous unit's rows (so it must wait).

Usage: ``python -m odin_bench.host_ops [--rows 300000] [--units 30]``; prints a table and JSON.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import socket
import statistics
import sys
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.multiprocessing as mp
import tyro
from torch.utils._python_dispatch import TorchDispatchMode

from odin_ns.comm.context import DistContext, torchrun_context
from odin_ns.gaussians import GAUSSIAN_COLUMNS
from odin_ns.runtime.config import RuntimeConfig
from odin_ns.runtime.optimizer import ScopedAdam

CONFIGURATIONS: dict[str, dict] = {
    "sync": dict(mode="sync", exchange="dense"),
    "quality-first": dict(mode="quality-first", exchange="dense"),
    "quality-first-predicted": dict(mode="quality-first", exchange="dense", read_scopes="predicted"),
    "sync-scoped": dict(mode="sync", exchange="scoped"),
    "quality-first-scoped": dict(mode="quality-first", exchange="scoped"),
    "throughput-first-scoped": dict(mode="throughput-first", exchange="scoped"),
}
"""The runtime configurations compared, by name (``RuntimeConfig`` fields). Predicted read scopes get the exact
buckets of each unit's rows from a host-side predictor (numpy, like splatfacto's): what is counted is the runtime's
own work around the prediction."""


@dataclass
class HostOpsCommand:
    """Count the torch operations the runtime dispatches per unit, per mode and exchange."""

    rows: int = 300_000
    """Gaussians (rows); cup77 reaches about 0.3M."""
    units: int = 30
    """Units per configuration (the first quarter is warm-up and not counted)."""
    visible_fraction: float = 0.2
    """Share of the rows each unit sees."""
    conflict_every: int = 4
    """Every this many units, a unit reads the previous unit's rows (a RAW conflict)."""
    buckets: int = 8
    """Buckets the exchange is cut into (``bucket_mb`` is set to a ``buckets``-th of the rows, however small)."""

    def main(self) -> None:
        port = _free_port()
        context = mp.get_context("spawn")
        queue = context.SimpleQueue()
        processes = [context.Process(target=_rank, args=(rank, port, self, queue)) for rank in range(2)]
        for process in processes:
            process.start()
        results = [queue.get() for _ in processes]
        for process in processes:
            process.join()
        rows = next(result for result in results if result["rank"] == 0)["configurations"]
        print("| configuration | runtime ops per unit (median) | of which collectives |")
        print("|---|---|---|")
        for row in rows:
            print(f"| {row['configuration']} | {row['ops_per_unit']} | {row['collectives_per_unit']} |")
        print(json.dumps({"settings": asdict(self), "configurations": rows}))


class OpCounter(TorchDispatchMode):
    """Counts dispatched operations while ``counting`` is set (the model's own work switches it off)."""

    def __init__(self) -> None:
        super().__init__()
        self.counting = False
        self.ops = 0
        self.collectives = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.counting:
            self.ops += 1
            self.collectives += func.namespace == "c10d"
        return func(*args, **(kwargs or {}))


def _count_kernel_calls_as_launches(counter: OpCounter) -> None:
    """Make every imported ``odin_ns.kernels`` function count as one operation, whatever its fallback dispatches."""
    import odin_ns.kernels as kernels

    def one_launch(function):
        @functools.wraps(function)
        def counted(*args, **kwargs):
            if not counter.counting:
                return function(*args, **kwargs)
            counter.ops += 1
            counter.counting = False
            try:
                return function(*args, **kwargs)
            finally:
                counter.counting = True

        return counted

    functions = {id(getattr(kernels, name)): name for name in kernels.__all__ if callable(getattr(kernels, name))}
    for module in [m for name, m in sys.modules.items() if name.startswith("odin_ns.") and m is not kernels]:
        for attribute, value in list(vars(module).items()):
            if id(value) in functions and attribute == functions[id(value)] and attribute != "resolve_backend":
                setattr(module, attribute, one_launch(value))


def _rank(rank: int, port: int, command: HostOpsCommand, queue) -> None:
    """One of the two spawned ranks: joins the group as torchrun's ranks do (its environment), so the runtime gets
    the same ``DistContext`` as in training."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(1)
    # Every runtime module that calls the kernels, loaded before their imports are wrapped (RuntimeConfig imports the
    # runtime only when it builds one).
    importlib.import_module("odin_ns.runtime.executor")

    counter = OpCounter()
    _count_kernel_calls_as_launches(counter)
    configurations = []
    with torchrun_context(backend="gloo") as context:
        for name, settings in CONFIGURATIONS.items():
            ops, collectives = _count(command, settings, counter, context)
            configurations.append({"configuration": name, "ops_per_unit": statistics.median(ops),
                                   "collectives_per_unit": statistics.median(collectives)})
    queue.put({"rank": rank, "configurations": configurations})


class _ExactRowsPredictor:
    """``ReadPredictor`` that knows every unit's rows exactly (numpy on the host, as splatfacto's predictor works)."""

    def __init__(self, rows_of, rank: int, world_size: int):
        self._rows_of, self._rank, self._world_size = rows_of, rank, world_size
        self._starts = np.zeros(1, dtype=np.int64)

    def rebind(self, params, buckets) -> None:
        self._starts = np.array([lo for lo, _ in buckets.ranges])

    def published(self, params, refresh: bool = True) -> None:
        pass

    def read_buckets(self, unit_id: int, every_rank: bool) -> np.ndarray:
        ranks = range(self._world_size) if every_rank else [self._rank]
        rows = np.logical_or.reduce([self._rows_of(unit_id, rank) for rank in ranks])
        return np.logical_or.reduceat(rows, self._starts)


def _count(
    command: HostOpsCommand, settings: dict, counter: OpCounter, context: DistContext
) -> tuple[list[int], list[int]]:
    """Per-unit operation counts of one configuration on this rank."""
    generator = torch.Generator().manual_seed(0)
    params = {name: torch.randn((command.rows, *shape), generator=generator) for name, shape in GAUSSIAN_COLUMNS.items()}
    optimizers = {name: ScopedAdam([param], lr=1e-3) for name, param in params.items()}
    seen = int(command.rows * command.visible_fraction)
    half = command.rows // 2

    def rows_of(unit: int, rank: int) -> np.ndarray:
        """Rows unit ``unit`` sees on ``rank``: alternating halves, a conflicting re-read every ``conflict_every``
        units."""
        first = 0 if unit % 2 == 0 else half
        if unit % command.conflict_every == 0 and unit > 0:
            first = 0 if (unit - 1) % 2 == 0 else half
        mask = np.zeros(command.rows, dtype=bool)
        mask[first + rank * seen // 2 : first + (rank + 1) * seen // 2] = True
        return mask

    predictor = None
    if settings.get("read_scopes") == "predicted":
        predictor = _ExactRowsPredictor(rows_of, context.rank, context.world_size)
    row_bytes = 4 * sum(math.prod(shape) for shape in GAUSSIAN_COLUMNS.values())
    bucket_mb = -(-command.rows // command.buckets) * row_bytes / 2**20
    config = RuntimeConfig(bucket_mb=bucket_mb, **settings)
    runtime = config.setup(params=params, optimizers=optimizers, context=context, predictor=predictor)

    def unit_functions(unit: int):
        mask = torch.from_numpy(rows_of(unit, context.rank))

        def compute(views):
            previous, counter.counting = counter.counting, False
            loss = sum((view[mask] * 1e-3).square().sum() for view in views.values())
            loss.backward()
            counter.counting = previous
            return loss.detach(), mask

        def visible(views):
            return mask.clone()

        def sensitivity(views):
            from odin_ns.sync.gate import ReaderSensitivity

            previous, counter.counting = counter.counting, False
            result = ReaderSensitivity(torch.full((command.rows,), 100.0), torch.full((command.rows,), 0.1))
            counter.counting = previous
            return result

        return compute, visible, sensitivity

    ops, collectives = [], []
    with counter:
        for unit in range(command.units):
            compute, visible, sensitivity = unit_functions(unit)
            counter.ops = counter.collectives = 0
            counter.counting = True
            runtime.run_unit(unit, compute, visible, sensitivity)
            counter.counting = False
            ops.append(counter.ops)
            collectives.append(counter.collectives)
        runtime.drain()
    warm_up = command.units // 4
    return ops[warm_up:], collectives[warm_up:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def entrypoint() -> None:
    tyro.cli(HostOpsCommand).main()


if __name__ == "__main__":
    entrypoint()
