"""OdinPipeline: nerfstudio's pipeline with Odin's runtime owning the gradient exchange (no DDP).

Each training step is one task unit: this rank renders its views on private shadow views of the Gaussians, and the
runtime (:mod:`odin_ns.runtime`) exchanges the gradients and publishes them with the selective Adam, synchronously
(``sync``) or overlapped with the next unit (``quality-first``, ``throughput-first``). The model knows nothing of
ranks: the pipeline hands it the shadow views to render from and answers the densification strategy's barrier (drain,
reduce statistics, rebind).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Tuple, Type

import torch
import torch.distributed as dist
from nerfstudio.configs.base_config import PrintableConfig
from nerfstudio.engine.optimizers import Optimizers
from nerfstudio.models.splatfacto import get_viewmat
from nerfstudio.pipelines.base_pipeline import VanillaPipeline, VanillaPipelineConfig
from nerfstudio.utils.rich_utils import CONSOLE

from odin_ns.runtime.executor import DrainingBarrier, OdinRuntime, RuntimeConfig
from odin_ns.sync.gate import DelayLimits, ReaderSensitivity, pinhole_sensitivity

GAUSSIAN_GROUPS = ("means", "scales", "quats", "features_dc", "features_rest", "opacities")


@dataclass
class OdinConfig(PrintableConfig):
    """How the Gaussians' gradients are exchanged and published across ranks."""

    mode: Literal["sync", "quality-first", "throughput-first", "no-exchange"] = "quality-first"
    """sync: all-reduce then step every unit; quality-first: overlap a unit's exchange with the next unit when their
    Gaussian scopes do not conflict (same result as sync); throughput-first: also admit bounded delayed reads;
    no-exchange: measurement only (benchmarks' compute floor), every rank trains alone and replicas diverge."""
    tau: float = 0.2
    """throughput-first: largest admitted fraction of a unit's read scope whose update is still in flight."""
    max_delay_pixels: float = 0.5
    """throughput-first: largest screen displacement (pixels) a delayed read may skip of a Gaussian's centre."""
    max_delay_opacity: float = 0.01
    """throughput-first: largest opacity change a delayed read may skip."""
    max_delay_param_step: float = 0.05
    """throughput-first: largest skipped change of any other parameter (log-scale, quaternion, SH coefficient)."""
    exchange: Literal["dense", "scoped", "auto"] = "dense"
    """dense: all-reduce every row; scoped: only the rows some rank updated; auto: scoped when the scope is small.
    Dense by default: the scoped exchange needs the update scope's size on the host before it can launch, a read
    that stalls the GPU queue; on 2 H200s over NVLink that cost more than the bytes it saved (docs/results.md,
    large-scene profile). Scoped pays where links are slow relative to the host."""
    bucket_mb: float = 25.0
    """Largest all-reduced bucket of gradient rows (every mode cuts the same buckets)."""
    min_buckets: int = 8
    """Cut the exchange into at least this many row ranges: the granularity at which a conflicting unit waits for
    part of the previous unit's exchange. Every bucket is one more collective to launch and wait for."""
    timeout_s: float = 600.0
    """A rank waiting longer than this on a collective (a peer died or hung) exits with an error."""
    fallback_after: int = 16
    """quality-first/throughput-first: after this many windows in a row that overlapped nothing, run
    ``fallback_units`` units on sync's path (skipping host work that cannot pay), then probe again; 0: never."""
    fallback_units: int = 64
    adam: Literal["selective", "dense"] = "selective"
    """selective: Adam steps only Gaussians some view of the step saw (what makes update scopes well defined);
    dense: stock splatfacto's Adam over every Gaussian (sync mode only), for comparison."""
    scale_with_batch: bool = True
    """Scale learning rates by sqrt(B), Adam betas to beta**B and count schedules in views, for B views per step
    over all ranks; False keeps splatfacto's per-step values whatever the batch."""
    profile_steps: int = 0
    """Record this many steps with torch.profiler (CPU ops, and CUDA kernels on GPUs) into profile_rank{r}.json.gz
    in the run directory, one file per rank, for ``odin-ns timeline``; 0: off (no profiler at all)."""
    profile_start: int = 200
    """First profiled step. Pick steps clear of evaluation and logging steps (their waits are not training)."""

    def runtime_config(self) -> RuntimeConfig:
        delay = DelayLimits(
            tau=self.tau,
            max_pixels=self.max_delay_pixels,
            max_opacity=self.max_delay_opacity,
            max_param_step=self.max_delay_param_step,
        )
        return RuntimeConfig(
            mode="sync" if self.mode == "no-exchange" else self.mode,
            exchange=self.exchange,
            adam_rows=self.adam, bucket_bytes=int(self.bucket_mb * 2**20), min_buckets=self.min_buckets,
            timeout_s=self.timeout_s, delay=delay, fallback_after=self.fallback_after, fallback_units=self.fallback_units
        )


@dataclass
class OdinPipelineConfig(VanillaPipelineConfig):
    """Pipeline whose gradient exchange is Odin's runtime."""

    _target: Type = field(default_factory=lambda: OdinPipeline)
    odin: OdinConfig = field(default_factory=OdinConfig)


class OdinPipeline(VanillaPipeline):
    """Trains one task unit per step through :class:`OdinRuntime`; see the module docstring."""

    config: OdinPipelineConfig

    def __init__(
        self,
        config: OdinPipelineConfig,
        device: str,
        test_mode: Literal["test", "val", "inference"] = "val",
        world_size: int = 1,
        local_rank: int = 0,
        grad_scaler: Optional[torch.cuda.amp.GradScaler] = None,
    ):
        # world_size=1 keeps VanillaPipeline from wrapping the model in DDP: the runtime owns the exchange.
        super().__init__(config, device, test_mode, world_size=1, local_rank=local_rank, grad_scaler=grad_scaler)
        self.world_size = world_size
        self.runtime: Optional[OdinRuntime] = None
        self._optimizers: Optional[Optimizers] = None
        self._records_read = 0

    # ------------------------------------------------------------------------------------------------- training

    def train_unit(self, step: int, optimizers: Optimizers) -> Tuple[torch.Tensor, Dict[str, Any], Dict[str, Any]]:
        """Render, backpropagate and hand this rank's unit to the runtime; returns (loss, loss dict, metrics)."""
        runtime = self._runtime(optimizers)
        camera, batch = self.datamanager.next_train(step)
        results: Dict[str, Dict[str, Any]] = {}

        def compute(views: Dict[str, torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
            with self.model.rendering_from(views):
                outputs = self.model(camera)
                metrics = self.model.get_metrics_dict(outputs, batch)
                losses = self.model.get_loss_dict(outputs, batch, metrics)
            loss = torch.stack(list(losses.values())).sum()
            loss.backward()
            results.update(losses=losses, metrics=metrics)
            return loss.detach(), (self.model.info["radii"] > 0).any(dim=0)

        def read_scope(views: Dict[str, torch.Tensor]) -> torch.Tensor:
            with self.model.rendering_from(views):
                return self.model.visible_gaussians(camera)

        def sensitivity(views: Dict[str, torch.Tensor]) -> ReaderSensitivity:
            """Throughput-first's pixels per unit of displacement in this unit's cameras (full resolution: an upper
            bound while splatfacto renders downscaled)."""
            means = views["means"]
            viewmats = get_viewmat(self.model.camera_optimizer.apply_to_camera(camera).to(means.device))
            return pinhole_sensitivity(means, viewmats, camera.get_intrinsics_matrices().to(means.device))

        loss = runtime.run_unit(step, compute, read_scope, sensitivity)
        self._step_shared_groups(optimizers)
        return loss, results["losses"], results["metrics"]

    def drain(self) -> None:
        """Publish every in-flight unit on every rank (collective): before checkpoints and at the end of training."""
        if self.runtime is not None:
            self.runtime.drain()

    def _runtime(self, optimizers: Optimizers) -> OdinRuntime:
        if self.runtime is None:
            if not dist.is_initialized():  # a single process: a one-rank group keeps one code path
                on_cuda = self.device.type == "cuda"
                dist.init_process_group(
                    "nccl" if on_cuda else "gloo",
                    store=dist.HashStore(),
                    rank=0,
                    world_size=1,
                    device_id=self.device if on_cuda else None,
                )
            self._optimizers = optimizers
            self._start_from_rank0_gaussians()
            config = self.config.odin.runtime_config()
            if dist.get_world_size() == 1 and config.mode != "sync":
                CONSOLE.log(f"one rank: nothing to overlap, {self.config.odin.mode} runs as sync")
                config = dataclasses.replace(config, mode="sync")
            self.runtime = OdinRuntime(
                self.model.gauss_params, self._gaussian_optimizers(), config, group=self._exchange_group()
            )
            self.model.strategy.barrier = DrainingBarrier(self.runtime)
        return self.runtime

    @torch.no_grad()
    def _start_from_rank0_gaussians(self) -> None:
        """Every rank starts from rank 0's Gaussians, as DDP starts from rank 0's weights: nerfstudio's launcher
        seeds each rank differently (seed + rank), so random initialisations (splatfacto's quaternions) differ."""
        if dist.get_world_size() > 1:
            for param in self.model.gauss_params.values():
                dist.broadcast(param.data, src=0)

    def _exchange_group(self) -> Optional[dist.ProcessGroup]:
        """The ranks this rank exchanges with: all of them, or (no-exchange) only itself."""
        if self.config.odin.mode != "no-exchange":
            return None
        singletons = [dist.new_group([rank]) for rank in range(dist.get_world_size())]  # every rank creates each
        return singletons[dist.get_rank()]

    def _gaussian_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        assert self._optimizers is not None
        return {name: self._optimizers.optimizers[name] for name in GAUSSIAN_GROUPS}

    def _step_shared_groups(self, optimizers: Optimizers) -> None:
        """Non-Gaussian groups (camera optimizer, bilateral grid): small, averaged densely and stepped every unit."""
        for group, params in optimizers.parameters.items():
            if group in GAUSSIAN_GROUPS:
                continue
            if self.world_size > 1:
                for param in params:
                    if param.grad is not None:
                        dist.all_reduce(param.grad)
                        param.grad /= self.world_size
            optimizers.optimizer_step(group)

    def new_unit_records(self) -> List[Dict[str, Any]]:
        """Runtime records of the units published since the last call, as JSON-able dicts.

        Converting a record reads its device counters and CUDA event timings, which waits for the GPU: callers batch
        it at logging steps rather than after every unit.
        """
        if self.runtime is None:
            return []
        records = self.runtime.stats.records[self._records_read :]
        self._records_read += len(records)
        return [record.as_dict() for record in records]
