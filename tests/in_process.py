"""Helpers for tests that train in this process: a trainer set up without ns-train, its steps run as nerfstudio's
loop runs them, and counters of what a step dispatches or synchronises."""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Mapping

import torch
from nerfstudio.engine.callbacks import TrainingCallbackLocation
from torch.utils._python_dispatch import TorchDispatchMode

import odin_ns.model
from odin_ns.method_configs import odin_splatfacto


def in_process_trainer(
    data: Path,
    output_dir: Path,
    device_type: str,
    views_per_rank: int = 1,
    runtime_options: Mapping[str, Any] = MappingProxyType({}),
    **model_options,
):
    """An OdinTrainer set up in this process (one rank, no viewer, no periodic evaluation or saving);
    ``runtime_options`` set fields of ``--pipeline.odin`` (the runtime's configuration), ``model_options`` the model's."""
    config = copy.deepcopy(odin_splatfacto.config)
    config.data = config.pipeline.datamanager.data = Path(data)
    config.output_dir = Path(output_dir)
    config.vis = "tensorboard"
    config.machine.device_type = device_type
    config.pipeline.model.num_downscales = 0
    for name, value in model_options.items():
        setattr(config.pipeline.model, name, value)
    config.pipeline.datamanager.views_per_rank = views_per_rank
    for name, value in runtime_options.items():
        setattr(config.pipeline.odin, name, value)
    config.logging.steps_per_log = 1000
    config.steps_per_eval_image = config.steps_per_eval_all_images = config.steps_per_save = 1_000_000
    config.set_timestamp()
    trainer = config.setup(local_rank=0, world_size=1)
    trainer.setup()
    return trainer


def run_step(trainer, step: int):
    """One step as nerfstudio's training loop runs it, callbacks included (the densification strategy's among them);
    returns ``train_iteration``'s (loss, loss dict, metrics dict)."""
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    outputs = trainer.train_iteration(step)
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.AFTER_TRAIN_ITERATION)
    return outputs


class OperationCounter(TorchDispatchMode):
    """Counts the torch operations dispatched while ``counting`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.counting = False
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.counting:
            self.ops += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def rasterizer_calls_flagged(owner: Any, attribute: str) -> Iterator[None]:
    """Within the block, ``owner.attribute`` is True while the model's rasterizer runs (a counter told to skip the
    rasterizer's own operations), False otherwise."""
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


SYNC_WARNING = "called a synchronizing CUDA operation"
"""What torch's CUDA sync debug mode says at every synchronisation, in Python's warnings and on standard error."""
NATIVE_SITE = "C++ extension (printed by c10 to stderr: no Python call site)"
"""The site of a synchronisation warned about from C++ code that calls ATen directly (gsplat's ``isect_tiles``):
no torch binding is on the stack to turn it into a Python warning, so c10 prints it to file descriptor 2."""


@contextmanager
def native_stderr_lines() -> Iterator[list]:
    """Capture what native code writes to file descriptor 2 while the block runs; yields the list that holds the
    captured lines once the block has ended. What was captured is written back to standard error afterwards."""
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


def cuda_sync_sites(trainer, steps: range) -> Counter:
    """Run ``steps`` under torch's CUDA sync debug mode; each synchronisation counted at its call site (those warned
    about from C++ extensions under ``NATIVE_SITE``)."""
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
