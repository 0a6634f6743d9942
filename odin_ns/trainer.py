"""OdinTrainer: nerfstudio's Trainer, launched by ns-train or torchrun, training through OdinPipeline.

What it adds to nerfstudio's Trainer:
- ns-train's first call, the config's print, checks the capture first (odin-data's validation, without loading it):
  data that cannot be trained on ends the run in one line before anything is printed or written;
- under torchrun rank 0 alone prints and saves the config, and prints what nerfstudio would print alike on every rank
  (the run's folders, the checkpoint loaded, the end of training);
- it builds the run's one distributed context (``odin_ns.comm.context.DistContext``) and hands it to the pipeline:
  under torchrun (ns-train launched once per process) it joins the process group itself (NCCL on GPUs, gloo on CPU),
  under nerfstudio's launcher it takes the group that launcher made, alone it needs none;
- it falls back to the CPU when CUDA is unavailable (the device follows the machine);
- a step is one Odin task unit of B = world size x views per rank views, with the batch rules of ``odin_ns.batch``;
- evaluation, checkpoints and the end of training first drain the units in flight on every rank, so they see sync's
  parameters; checkpoints hold plain Python numbers where nerfstudio 1.1.5 leaves ``numpy.float64`` learning rates
  (torch >= 2.6 loads with ``weights_only=True`` and refuses those);
- per-unit runtime records go to ``odin_units.jsonl`` (rank 0; ``odin_units_rank{r}.jsonl`` for the others) in the
  run directory and to nerfstudio's writers; at the end each rank writes ``state_digest_rank{r}.json``, SHA-256 of
  every tensor of its model and optimizer state, to compare ranks and runs bit for bit;
- with ``--profile-steps N`` it records steps ``--profile-start`` .. +N-1 with torch.profiler into
  ``profile_rank{r}.json.gz`` per rank (:mod:`odin_ns.profiling`), the input of ``odin-bench timeline``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Type

import numpy as np
import torch
from nerfstudio.engine.trainer import TRAIN_INTERATION_OUTPUT, Trainer, TrainerConfig
from nerfstudio.utils import writer
from nerfstudio.utils.misc import step_check
from nerfstudio.utils.rich_utils import CONSOLE

from odin_ns.batch import scale_run_for_batch
from odin_ns.comm.context import DistContext
from odin_ns.data.dataparser import DatasetError, OdinDataParserConfig
from odin_ns.pipeline import OdinPipelineConfig
from odin_ns.runtime.records import unit_log, write_unit_log


def checkpoint_values(value: Any) -> Any:
    """``value`` as a checkpoint stores it: every numpy scalar inside dicts, lists and tuples replaced by the Python
    number it holds (loadable with weights_only), every tensor contiguous (the Gaussians and their moments are column
    views of packed tables while training: saved as views they would drag the whole table along and load strided)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor):
        return value.contiguous()
    if isinstance(value, dict):
        return {key: checkpoint_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(checkpoint_values(item) for item in value)
    return value


def launched_by_torchrun() -> bool:
    """True in a process that torchrun started as one of several ranks."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "LOCAL_RANK" in os.environ


def torchrun_rank(variable: Literal["RANK", "LOCAL_RANK"] = "RANK") -> int:
    """This process's rank (or rank on its node) among torchrun's ranks; 0 in a process torchrun did not start, the
    one that prints and saves the config (nerfstudio's own launcher starts its ranks after that)."""
    return int(os.environ[variable]) if launched_by_torchrun() else 0


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def checkpoint_name(step: int) -> str:
    """nerfstudio's checkpoint file name for ``step`` (its loader parses it back)."""
    return f"step-{step:09d}.ckpt"


def state_digest_path(run_dir: Path, rank: int) -> Path:
    """Where rank ``rank`` writes the digests of its final state."""
    return Path(run_dir) / f"state_digest_rank{rank}.json"


def remove_untrained_run_directory(run_dir: Path, output_dir: Path) -> None:
    """Remove a run directory that holds no checkpoint (what a run that stopped before training wrote there: its
    config.yml, writer files), then the folders above it up to ``output_dir`` that are left empty."""
    if not run_dir.is_dir() or (run_dir / "nerfstudio_models").exists():
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    output_dir = output_dir.resolve()
    for parent in run_dir.resolve().parents:
        if parent == output_dir or output_dir not in parent.parents:
            break
        try:
            parent.rmdir()
        except OSError:  # not empty: other runs live there
            break


def bind_optimizers_to_model_tensors(pipeline, optimizers) -> None:
    """Point every optimizer at the tensors the model trains, keeping the optimizer state.

    Resuming, nerfstudio builds the optimizers around the freshly initialised Gaussians, then loads the checkpoint by
    replacing those tensors with new ones of the checkpoint's size (splatfacto's ``load_state_dict``) and loads the
    optimizer state keyed by the old ones: the optimizers would step tensors nothing renders, and gsplat's strategy,
    which takes the tensor to replace from the optimizer, would put the initial Gaussians' opacities back at the next
    refine or opacity reset. Stock splatfacto resumed by nerfstudio has the same fault.
    """
    for group, params in pipeline.get_param_groups().items():
        optimizer = optimizers.optimizers[group]
        held = optimizer.param_groups[0]["params"]
        for index, (old, new) in enumerate(zip(held, params)):
            if old is not new:
                held[index] = new
                if old in optimizer.state:
                    optimizer.state[new] = optimizer.state.pop(old)
        optimizers.parameters[group] = params


@dataclass
class OdinTrainerConfig(TrainerConfig):
    """Trainer configuration of odin-splatfacto."""

    _target: Type = field(default_factory=lambda: OdinTrainer)
    profile_steps: int = 0
    """Record this many steps with torch.profiler (CPU ops, and CUDA kernels on GPUs) into profile_rank{r}.json.gz
    in the run directory, one file per rank, for ``odin-bench timeline``; 0: off (no profiler at all)."""
    profile_start: int = 200
    """First profiled step. Pick steps clear of evaluation and logging steps (their waits are not training)."""

    def print_to_terminal(self) -> None:
        """ns-train calls this first, before it saves the config or sets anything up: the capture and the output
        folder are checked here, so that a run that cannot train ends in one line before anything else is printed or
        written. Then the config and the capture found, by rank 0 alone."""
        capture = self.check_capture()
        if torchrun_rank() != 0:
            return
        self.check_run_directory()
        super().print_to_terminal()
        if capture is not None:
            CONSOLE.log(capture)

    def check_capture(self) -> str | None:
        """The capture under ``--data`` as odin-data finds it (None with another dataparser); a capture that cannot
        be trained on exits with its DatasetError, said once per node (every rank of a node reads the same files)."""
        datamanager = self.pipeline.datamanager
        if not isinstance(datamanager.dataparser, OdinDataParserConfig):
            return None
        data = datamanager.data if datamanager.data is not None else datamanager.dataparser.data
        try:
            return replace(datamanager.dataparser, data=Path(data)).setup().check()
        except DatasetError as error:
            raise SystemExit(f"error: {error}" if torchrun_rank("LOCAL_RANK") == 0 else 1) from None

    def check_run_directory(self) -> None:
        """Exit in one line where the run directory cannot be made: its nearest existing folder is a file or not
        writable (anything else that fails, save_config reports)."""
        run_dir = self.get_base_dir()
        existing = next(path for path in (run_dir, *run_dir.parents) if path.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            raise SystemExit(f"error: cannot write the run directory {run_dir}: {existing} is not a writable folder "
                             f"(--output-dir names where runs go)")

    def save_config(self) -> None:
        """nerfstudio's, by rank 0 alone (the other ranks take its run directory), with an output directory that
        cannot be written reported in one line."""
        if torchrun_rank() != 0:
            return
        try:
            super().save_config()
        except OSError as error:
            raise SystemExit(f"error: cannot write the run directory {self.get_base_dir()}: "
                             f"{error.strerror or error}") from None


class OdinTrainer(Trainer):
    """See the module docstring."""

    config: OdinTrainerConfig

    def __init__(self, config: OdinTrainerConfig, local_rank: int = 0, world_size: int = 1) -> None:
        if not isinstance(config.pipeline, OdinPipelineConfig):
            raise ValueError(f"OdinTrainer needs an OdinPipelineConfig, got {type(config.pipeline).__name__}")
        on_the_cpu_instead = config.machine.device_type == "cuda" and not torch.cuda.is_available()
        if on_the_cpu_instead:
            config.machine.device_type = "cpu"
        self.context = self._distributed_context(config, local_rank, world_size)
        if self.context.world_size > 1 and launched_by_torchrun():
            self._share_run_directory(config, self.context)
        if on_the_cpu_instead and self.context.is_main:
            CONSOLE.log("CUDA is not available: training on the CPU")
        views = self.context.world_size * config.pipeline.datamanager.views_per_rank
        if scale_run_for_batch(config, views) and self.context.is_main:
            CONSOLE.log(f"{views} views per step: learning rates x {views} ** {config.pipeline.lr_batch_exponent:g}, "
                        f"Adam eps / sqrt({views}), betas ** {views}, schedules counted in steps of {views} views")
        with self._said_by_rank_0():  # nerfstudio's constructor prints the checkpoint folder and the precision
            super().__init__(config, self.context.local_rank, self.context.world_size)
        self.stop_training = False
        self._stop_requested = 0
        """The signal this rank received (0: none)."""
        self._stop_signal = 0
        """The signal some rank received, once the ranks agreed to stop."""
        self._completed_step = -1
        self._profile_window = None  # built only when asked for: training without it never touches the profiler
        if config.profile_steps > 0:
            from odin_ns.profiling import ProfileWindow

            self._profile_window = ProfileWindow(config.profile_start, config.profile_steps, self.base_dir,
                                                 self.context.rank)

    def _said_by_rank_0(self) -> contextlib.AbstractContextManager:
        """Where nerfstudio prints what every rank would print alike (the run's folders, the checkpoint loaded, the
        end of training): printed by rank 0, swallowed on the others."""
        return contextlib.nullcontext() if self.context.is_main else CONSOLE.capture()

    @staticmethod
    def _distributed_context(config: OdinTrainerConfig, local_rank: int, world_size: int) -> DistContext:
        """The run's ranks: joined from torchrun's environment, taken from nerfstudio's launcher, or alone."""
        on_cuda = config.machine.device_type == "cuda"
        timeout_s = config.pipeline.odin.timeout_s
        if launched_by_torchrun() and world_size == 1:
            return DistContext.from_torchrun(timeout_s, backend="nccl" if on_cuda else "gloo")
        if on_cuda:
            torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank) if on_cuda else torch.device("cpu")
        if world_size > 1:
            return DistContext.joined(local_rank, device, timeout_s)
        return DistContext.single(device, timeout_s)

    def _load_checkpoint(self) -> None:
        """nerfstudio's loading, after checking that the checkpoint is a whole file (a truncated one fails with a
        line naming it rather than deep inside torch's unpickler), then this rank's densification statistics."""
        path = self.config.load_checkpoint
        if self.config.load_dir is not None:
            step = self.config.load_step
            if step is None:
                steps = [int(name[name.find("-") + 1 : name.find(".")]) for name in os.listdir(self.config.load_dir)
                         if name.endswith(".ckpt")]
                step = max(steps, default=None)
            self.config.load_step = step  # nerfstudio would also count a partial file's step
            path = self.config.load_dir / checkpoint_name(step) if step is not None else None
        if path is not None and path.exists() and not zipfile.is_zipfile(path):
            raise SystemExit(f"error: checkpoint {path} is truncated or not a torch checkpoint")
        with self._said_by_rank_0():
            super()._load_checkpoint()
        if path is not None:
            statistics = torch.load(path, map_location="cpu").get("densification_statistics", {})
            self.pipeline.restore_densification_statistics(statistics)

    @staticmethod
    def _share_run_directory(config: OdinTrainerConfig, context: DistContext) -> None:
        """Under torchrun every rank parsed the command line and took its own timestamp, and rank 0 alone saved the
        config: all ranks take rank 0's run directory, made where a rank's node does not share rank 0's file system
        (each rank writes its unit log and state digests there)."""
        config.timestamp = context.broadcast_object(config.timestamp, "run directory of rank 0")
        config.get_base_dir().mkdir(parents=True, exist_ok=True)

    def setup(self, test_mode: Literal["test", "val", "inference"] = "val") -> None:
        """nerfstudio's setup, with the distributed context handed to the pipeline it builds. Input that cannot be
        trained on (``DatasetError``: a broken capture, a plan of another capture, more ranks than views) ends the
        run with one line naming the file and the problem, and leaves no run directory behind."""
        pipeline_config = self.config.pipeline
        build_pipeline = pipeline_config.setup
        pipeline_config.setup = lambda **kwargs: build_pipeline(**kwargs, dist_context=self.context)
        try:
            super().setup(test_mode)
        except DatasetError as error:
            if self.context.is_main:
                remove_untrained_run_directory(self.base_dir, self.config.output_dir)
            raise SystemExit(f"error: {error}") from None
        finally:
            del pipeline_config.setup  # back to the class's method: the config stays plain data
        bind_optimizers_to_model_tensors(self.pipeline, self.optimizers)

    def train_iteration(self, step: int) -> TRAIN_INTERATION_OUTPUT:
        """One Odin task unit: the pipeline computes, exchanges and publishes; then the schedulers step."""
        if self.use_grad_scaler:
            raise ValueError("odin-splatfacto does not support mixed precision or a gradient scaler")
        if self._profile_window is not None:
            return self._profile_window.run(step, lambda: self._train_unit(step))
        return self._train_unit(step)

    def _train_unit(self, step: int) -> TRAIN_INTERATION_OUTPUT:
        self.context.at_step(step)  # a peer failure names the step
        # no zero_grad_all: the Gaussians' gradients go to each unit's own table, and the runtime clears the dense
        # parameters' before every compute (their optimizers step after the unit), so it would only cost host time
        logs = step % self.config.logging.steps_per_log == 0  # nerfstudio writes the metrics at these steps only
        loss, loss_dict, metrics_dict = self.pipeline.train_unit(step, self.optimizers, with_metrics=logs)
        self.optimizers.scheduler_step_all(step)
        self._completed_step = step
        self._log_units(step)
        if logs:  # steps every rank shares: collectives may run here
            self.pipeline.check_finite()
            self._agree_to_stop()
        elif self.context.world_size == 1:
            self._agree_to_stop()
        return loss, loss_dict, metrics_dict

    def train(self) -> None:
        """nerfstudio's training loop, with SIGINT and SIGTERM turned into a stop that every rank agrees on: the
        ranks drain, rank 0 writes a checkpoint of the last step, and every rank exits non-zero saying where it is.
        A second signal stops at once."""
        handlers = {number: signal.signal(number, self._request_stop) for number in STOP_SIGNALS}
        try:
            super().train()
            if self._stop_signal:
                self.context.barrier("checkpoint written")
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)
            if launched_by_torchrun():  # the group this trainer joined (nerfstudio's launcher destroys its own)
                self.context.destroy()
        if self._stop_signal:
            name = signal.Signals(self._stop_signal).name
            CONSOLE.print(f"rank {self.context.rank}: training stopped by {name} after step {self._completed_step}; "
                          f"checkpoint: {self.checkpoint_dir / checkpoint_name(self._completed_step)}", soft_wrap=True)
            raise SystemExit(128 + self._stop_signal)

    def _request_stop(self, number: int, frame: Any) -> None:
        if self._stop_requested:
            signal.signal(number, signal.SIG_DFL)
            raise KeyboardInterrupt
        self._stop_requested = number

    def _agree_to_stop(self) -> None:
        """Stop after this step if any rank was asked to (collective with several ranks; alone, no device work)."""
        if self.context.world_size == 1:
            self._stop_signal = self._stop_requested
        else:
            requested = torch.tensor([self._stop_requested], device=self.context.device)
            self._stop_signal = int(self.context.gather(requested, "stop request").max())
        self.stop_training = self.stop_training or bool(self._stop_signal)

    def _log_units(self, step: int, force: bool = False) -> None:
        """At logging steps, append the newly published units' records to this rank's unit log (``unit_log``) and,
        on the main process, to nerfstudio's writers; batched because reading a record's GPU timings waits for the
        GPU."""
        if not force and step % self.config.logging.steps_per_log != 0:
            return
        records = self.pipeline.take_unit_records()
        if not records:
            return
        write_unit_log(unit_log(self.base_dir, self.context.rank), records)
        if not self.context.is_main:
            return
        for key, value in records[-1].to_json().items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                writer.put_scalar(name=f"Odin/{key}", scalar=value, step=step)

    def eval_iteration(self, step: int) -> None:
        """nerfstudio's evaluation, after the units in flight are published: it sees sync's parameters."""
        config = self.config
        evaluates = config.is_wandb_enabled() or config.is_tensorboard_enabled() or config.is_comet_enabled()
        due = (config.steps_per_eval_batch, config.steps_per_eval_image, config.steps_per_eval_all_images)
        if evaluates and any(step_check(step, every) for every in due):
            self.pipeline.drain()
        super().eval_iteration(step)

    def _after_train(self) -> None:
        """Training that ends inside the profile window still writes its trace (before the final checkpoint); after
        it, every rank records the digests of its final state. A stopped run's checkpoint is its last trained step
        (nerfstudio's loop has already moved ``step`` to the next one)."""
        if self._profile_window is not None:
            self._profile_window.close()
        if self._stop_signal:
            self.step = self._completed_step
        with self._said_by_rank_0():  # the run's config and checkpoint folder
            super()._after_train()
        digests = self.pipeline.state_digests(self.optimizers)
        state_digest_path(self.base_dir, self.context.rank).write_text(json.dumps(digests, indent=1, sort_keys=True))

    def save_checkpoint(self, step: int) -> None:
        """Drain in-flight units on every rank, then (main process) write a weights_only-loadable checkpoint."""
        with self.train_lock:  # the viewer renders under this lock: never a half-published state
            self.pipeline.drain()
        self._log_units(step, force=True)
        statistics = self.pipeline.densification_statistics()  # collective: before rank 0 alone goes on
        if not self.context.is_main:
            return
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        checkpoint_path = self.checkpoint_dir / checkpoint_name(step)
        partial = checkpoint_path.with_name(checkpoint_path.name + ".partial")
        torch.save(
            {
                "step": step,
                "pipeline": checkpoint_values(self.pipeline.state_dict()),
                "optimizers": checkpoint_values({k: v.state_dict() for k, v in self.optimizers.optimizers.items()}),
                "schedulers": checkpoint_values({k: v.state_dict() for k, v in self.optimizers.schedulers.items()}),
                "scalers": self.grad_scaler.state_dict(),
                "densification_statistics": statistics,
            },
            partial,
        )
        os.replace(partial, checkpoint_path)  # atomic: a crash while writing never leaves a truncated checkpoint
        if self.config.save_only_latest_checkpoint:
            for stale in self.checkpoint_dir.glob("*.ckpt"):
                if stale != checkpoint_path:
                    stale.unlink()
