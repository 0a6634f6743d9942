"""Where a steady training step makes the host wait for the GPU, by call site (CUDA only).

Trains odin-splatfacto in-process on one GPU for a few warm-up steps, then runs steps under torch's CUDA sync debug
mode, which warns at every operation that synchronises the host with the device (``.item()``, ``nonzero``, copies
from pageable host memory...); each warning is attributed to the call site that made it. A sync is a place where
host and GPU time add up instead of overlapping.

A warning raised inside a C++ extension that calls ATen directly (gsplat's ``isect_tiles`` reads its intersection
count with ``.item<int64_t>()`` in C++) never reaches Python's warning machinery: no torch binding is on the stack to
translate it, so c10 prints it to the process's standard error. Those are counted from file descriptor 2, captured
while the steps run, under one site named for what it is.

Usage: ``python -m odin_bench.host_waits --data data/cup77 --views-per-rank 1 4``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Tuple

import torch
import tyro
from odin_ns.in_process import in_process_trainer, run_step
from odin_ns.rendering.presized import COUNT_LAG


@dataclass
class HostWaitsCommand:
    """Count and locate the host synchronisations of steady training steps on one GPU."""

    data: Path
    """Dataset (COLMAP capture or transforms.json scene)."""
    views_per_rank: Tuple[int, ...] = (1,)
    """Views per step to count at, one training run each."""
    warmup_steps: int = 30
    """Steps trained before counting (first renders, allocations and kernel compilation are not steady)."""
    steps: int = 3
    """Steps counted; the count printed is per step."""
    out: Path = Path("outputs/host_waits")
    """Folder for the runs' nerfstudio outputs."""
    presized_intersections: bool = False
    """Train with ``--pipeline.model.presized-intersections`` (the forward without gsplat's host read). A view's
    render is sized exactly (a host read) until its count from an earlier render has reached the host, so the
    warm-up is lengthened until every counted view has one."""

    def main(self) -> None:
        if not torch.cuda.is_available():
            raise SystemExit("error: host waits are a GPU matter: this needs CUDA")
        for views in self.views_per_rank:
            trainer = in_process_trainer(self.data, self.out / f"views{views}", "cuda", views,
                                         presized_intersections=self.presized_intersections)
            warmup = self.warmup_steps
            if self.presized_intersections:
                warmup = steps_until_counted_views_sized_ahead(trainer.pipeline.datamanager.plan, warmup, self.steps)
            for step in range(warmup):  # from step 0, as nerfstudio's training loop
                run_step(trainer, step)
            torch.cuda.synchronize()
            sites = count_host_syncs(trainer, range(warmup, warmup + self.steps))
            print(f"views per rank {views}: {sum(sites.values()) / self.steps:.1f} host syncs per step")
            for site, count in sites.most_common(20):
                print(f"  {count / self.steps:.1f}  {site}")


MAX_WARMUP_EPOCHS = 100
"""Epochs after which a view still without a count means the plan leaves it out (each epoch drops a random few)."""


def steps_until_counted_views_sized_ahead(
    plan, warmup_steps: int, counted_steps: int, lag: int = COUNT_LAG, rank: int = 0
) -> int:
    """The first step ``w >= warmup_steps`` such that, trained from step 0, every view ``rank`` renders at a counted
    step ``t`` (``w <= t < w + counted_steps``) has its intersection count on the host by then: it was rendered at
    some step ``<= t - 1 - lag``, since the budget adopts a render's count ``lag`` renders later. A view without one
    is sized exactly, with gsplat's host read, so the steps counted from ``w`` are steady. Each epoch of the plan is a
    fresh shuffle, so at one view per step this is about an epoch or more."""
    first_render: dict = {}
    last_step = warmup_steps + MAX_WARMUP_EPOCHS * plan.units_per_epoch
    for step in range(last_step):
        if step >= warmup_steps and all(
            first_render.get(view, t) <= t - 1 - lag
            for t in range(step, step + counted_steps) for view in plan.views_for(t, rank)
        ):
            return step
        for view in plan.views_for(step, rank):
            first_render.setdefault(view, step)
    raise ValueError(f"rank {rank} still renders views without a count after {MAX_WARMUP_EPOCHS} epochs")


SYNC_WARNING = "called a synchronizing CUDA operation"
"""What torch's CUDA sync debug mode says at every synchronisation, in Python's warnings and on standard error."""
NATIVE_SITE = "C++ extension (printed by c10 to stderr: no Python call site)"
"""The site of a synchronisation whose warning bypassed Python (see the module docstring)."""


@contextmanager
def native_stderr_lines() -> Iterator[list]:
    """Capture what native code writes to file descriptor 2 while the block runs; yields the list that holds the
    captured lines once the block has ended. Whatever was captured is written back to standard error afterwards, so
    nothing printed there is lost."""
    sys.stderr.flush()
    saved = os.dup(2)
    captured: list = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            captured.extend(text.splitlines())
            sys.stderr.write(text)


def count_host_syncs(trainer, steps: range) -> Counter:
    """Run ``steps`` under torch's CUDA sync debug mode; each synchronisation counted at its call site (those that
    warn from C++ extensions, outside Python, under ``NATIVE_SITE``)."""
    sites: Counter = Counter()

    def record(message, category, filename, lineno, file=None, line=None):
        if SYNC_WARNING not in str(message):  # not the mode's one-time notice
            return
        frames = [frame for frame in traceback.extract_stack()
                  if "site-packages/torch/" not in frame.filename and "warnings" not in frame.filename]
        sites[" <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in reversed(frames[-5:-1]))] += 1

    with warnings.catch_warnings(), native_stderr_lines() as native_lines:
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for step in steps:
                run_step(trainer, step)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    native = sum(SYNC_WARNING in line for line in native_lines)
    if native:
        sites[NATIVE_SITE] += native
    return sites


def entrypoint() -> None:
    tyro.cli(HostWaitsCommand).main()


if __name__ == "__main__":
    entrypoint()
