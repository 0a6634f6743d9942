"""Operations a steady training step dispatches, in total and by the code that dispatches them (any device).

On the GPU a step is host-bound: every dispatched operation costs the host microseconds of Python and dispatch (a
kernel launch, most of them), so the count of a step's operations measures its host work on any machine, the CPU
included. The step is nerfstudio's iteration with its training callbacks (gsplat's densification statistics are
gathered there). A call of an ``odin_ns.kernels`` function counts as one operation (one Triton launch on the GPU), as
in ``host_ops``; the rasterizer's forward is counted apart, since on the CPU the reference rasterizer stands in for
gsplat's few fused kernels (its backward, and that of the loss's SSIM, which on the CPU is pytorch_msssim's rather
than one Triton kernel, show under their autograd nodes). The steps counted neither log, evaluate, save nor refine.

Usage: ``odin-bench step-ops --data data/demo [--views-per-rank 1] [--steps 5]``; prints a table, then JSON.
"""

from __future__ import annotations

import importlib
import json
import statistics
import tempfile
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import tyro

import odin_ns.model
from odin_bench.host_ops import OpCounter, _count_kernel_calls_as_launches
from odin_ns.in_process import in_process_trainer, run_step


class _SiteCounter(OpCounter):
    """An ``OpCounter`` that also attributes each operation to the innermost odin_ns, nerfstudio or gsplat frame
    calling it, or, in the backward, to the autograd node running it."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: Counter = Counter()
        self.in_rasterizer = False
        self.rasterizer_ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.counting and self.in_rasterizer:
            self.rasterizer_ops += 1
        elif self.counting:
            node = torch._C._current_autograd_node()
            if node is not None:
                self.sites[f"backward: {node.name()}"] += 1
            else:
                frames = [frame for frame in traceback.extract_stack()[:-1]
                          if any(f"/{package}/" in frame.filename for package in PACKAGES)]
                self.sites[_site(frames[-1]) if frames else "(no odin_ns or nerfstudio frame)"] += 1
        return super().__torch_dispatch__(func, types, args, kwargs)


PACKAGES = ("odin_ns", "nerfstudio", "gsplat")


def _site(frame: traceback.FrameSummary) -> str:
    package = next(package for package in PACKAGES if f"/{package}/" in frame.filename)
    return f"{package}/{frame.filename.rsplit(f'/{package}/', 1)[1]}:{frame.name}"


@dataclass
class StepOpsCommand:
    """Count the operations of steady training steps, by call site."""

    data: Path
    views_per_rank: int = 1
    warmup_steps: int = 0
    """Steps before counting; 0: two epochs of the plan (every unit's cameras built once)."""
    steps: int = 5
    top: int = 25
    """Call sites listed."""
    device: str = "cpu"

    def main(self) -> None:
        importlib.import_module("odin_ns.rendering.presized")  # kernel callers loaded before their imports are wrapped
        with tempfile.TemporaryDirectory() as out:
            trainer = in_process_trainer(self.data, Path(out), self.device, self.views_per_rank,
                                         warmup_length=1_000_000)  # no refine among the counted steps
            counter = _SiteCounter()
            _count_kernel_calls_as_launches(counter)
            units = len(trainer.pipeline.datamanager.train_dataset) // self.views_per_rank
            warmup = self.warmup_steps or 2 * units
            for step in range(1, warmup + 1):
                run_step(trainer, step)
            per_step, rasterizer = [], []
            with rasterizer_calls_flagged(counter, "in_rasterizer"), counter:
                for step in range(warmup + 1, warmup + 1 + self.steps):
                    before, before_rasterizer = counter.ops, counter.rasterizer_ops
                    counter.counting = True
                    run_step(trainer, step)  # the training callbacks too (densification statistics among them)
                    counter.counting = False
                    per_step.append(counter.ops - before)
                    rasterizer.append(counter.rasterizer_ops - before_rasterizer)
        kernel_calls = (sum(per_step) - sum(rasterizer) - sum(counter.sites.values())) / self.steps
        sites = [(site, count / self.steps) for site, count in counter.sites.most_common(self.top)]
        print(f"| {self.data.name}, {self.views_per_rank} view(s) per step | operations per step |")
        print("|---|---|")
        print(f"| all, rasterizer included (median of {self.steps}) | {statistics.median(per_step)} |")
        print(f"| the rasterizer's forward | {statistics.median(rasterizer)} |")
        print(f"| odin_ns.kernels calls (one launch each) | {kernel_calls:g} |")
        for site, count in sites:
            print(f"| {site} | {count:g} |")
        print(json.dumps({"settings": {k: str(v) for k, v in vars(self).items()}, "per_step": per_step,
                          "rasterizer_per_step": rasterizer, "kernel_calls_per_step": kernel_calls,
                          "sites": dict(sites)}))


@contextmanager
def rasterizer_calls_flagged(owner: Any, attribute: str) -> Iterator[None]:
    """Within the block, ``owner.attribute`` is True while the model's rasterizer runs (a counter told to skip or
    count apart the rasterizer's own operations), False otherwise."""
    original = odin_ns.model.rasterize_fn

    def flagged(renderer):
        rasterize = original(renderer)

        def call(**kwargs):
            setattr(owner, attribute, True)
            try:
                return rasterize(**kwargs)
            finally:
                setattr(owner, attribute, False)

        return call

    odin_ns.model.rasterize_fn = flagged
    try:
        yield
    finally:
        odin_ns.model.rasterize_fn = original


def entrypoint() -> None:
    tyro.cli(StepOpsCommand).main()


if __name__ == "__main__":
    entrypoint()
