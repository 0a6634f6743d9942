"""OdinPipeline: nerfstudio's pipeline with Odin's runtime owning the gradient exchange (no DDP).

Each training step is one task unit: this rank renders its views on private shadow views of the Gaussians, and the
runtime (:mod:`odin_ns.runtime`) exchanges the gradients and publishes them, synchronously (``sync``) or overlapped
with the next unit (``quality-first``, ``throughput-first``). The distributed context comes from the trainer and is
handed to the datamanager and the runtime; the model knows nothing of ranks: the pipeline hands it the shadow views
to render from and answers the densification strategy's barrier (``odin_ns.structural_barrier``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Tuple, Type

import torch
from nerfstudio.engine.optimizers import Optimizers
from nerfstudio.pipelines.base_pipeline import Pipeline, VanillaPipeline, VanillaPipelineConfig
from nerfstudio.utils.rich_utils import CONSOLE

from odin_ns.comm.context import DistContext
from odin_ns.gaussians import GAUSSIAN_GROUPS
from odin_ns.model import NEAR_PLANE
from odin_ns.read_prediction import SplatReadPredictor, pinhole_views
from odin_ns.runtime.capture import CapturedCompute, UnitEffect
from odin_ns.runtime.config import RuntimeConfig
from odin_ns.runtime.executor import OdinRuntime
from odin_ns.runtime.records import UnitRecord
from odin_ns.runtime.replicas import digests
from odin_ns.structural_barrier import GSPLAT_STATISTIC_OPS, DrainingBarrier
from odin_ns.sync.gate import ReaderSensitivity, pinhole_sensitivity


@dataclass
class OdinPipelineConfig(VanillaPipelineConfig):
    """Pipeline whose gradient exchange is Odin's runtime."""

    _target: Type = field(default_factory=lambda: OdinPipeline)
    odin: RuntimeConfig = field(default_factory=RuntimeConfig)
    """How the Gaussians' gradients are exchanged and published across ranks."""
    scale_with_batch: bool = True
    """Scale learning rates by B ** lr-batch-exponent, Adam eps by 1/sqrt(B), betas to beta**B and count schedules in
    steps of B views, for B views per step over all ranks (``odin_ns.batch``); False keeps splatfacto's per-step
    values."""
    lr_batch_exponent: float = 0.5
    """Power of B the learning rates are multiplied by at B views per step: 0.5 is Grendel-GS's square-root rule
    (the views' gradients are noise around one direction), 1 the linear rule (every view pushes the same way), 0
    leaves them per-step."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.lr_batch_exponent <= 1.0:
            raise ValueError(f"lr_batch_exponent must be within [0, 1] (0.5: square root, 1: linear), got "
                             f"{self.lr_batch_exponent}")
        if not self.scale_with_batch and self.lr_batch_exponent != 0.5:
            raise ValueError("lr_batch_exponent scales the learning rates only with scale_with_batch True")


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
        dist_context: Optional[DistContext] = None,
    ):
        Pipeline.__init__(self)  # VanillaPipeline's own __init__ would wrap the model in DDP: the runtime exchanges
        self.config = config
        self.test_mode = test_mode
        self.context = dist_context or DistContext.single(device, config.odin.timeout_s)
        """Ranks and collectives (``ns-eval`` and the viewer load a pipeline without one: a single process)."""
        self.replica_context = self._replica_context()
        """The ranks whose Gaussians stay equal, which the runtime exchanges with (``_replica_context``)."""
        self.world_size = self.context.world_size
        self.datamanager = config.datamanager.setup(
            device=device, test_mode=test_mode, world_size=self.world_size, local_rank=local_rank,
            dist_context=self.context,
        )
        metadata = getattr(self.datamanager, "train_dataparser_outputs", None)
        metadata = metadata.metadata if metadata is not None else {}
        seed_points = (metadata["points3D_xyz"], metadata["points3D_rgb"]) if "points3D_xyz" in metadata else None
        self.datamanager.to(device)
        assert self.datamanager.train_dataset is not None, "Missing input dataset"
        self._model = config.model.setup(
            scene_box=self.datamanager.train_dataset.scene_box,
            num_train_data=len(self.datamanager.train_dataset),
            metadata=self.datamanager.train_dataset.metadata,
            device=device,
            grad_scaler=grad_scaler,
            seed_points=seed_points,
        )
        self.model.to(device)
        self.model.strategy.verbose = self.context.rank == 0  # splatfacto's line per refine (grown, pruned, count),
        # once per job: every rank makes the same change
        self.runtime: Optional[OdinRuntime] = None
        self._produced: Dict[Any, Tuple[Dict, Dict[str, torch.Tensor], Dict]] = {}
        """Per unit key, the (outputs, losses, render info) its compute last produced: a captured unit's are its
        graph's tensors, rewritten by every replay."""
        self._produced_version = -1

    def _replica_context(self) -> DistContext:
        """The ranks whose Gaussians this rank keeps equal to its own: every rank of the job. A subclass may return
        fewer: with ``self.context.solo()`` each rank trains alone and its replica diverges from the others' (their
        Gaussian counts too once they densify); a checkpoint then holds rank 0's model with rank 0's densification
        statistics, gathered over this context. Called once on every rank while the pipeline is built: making a
        context is collective."""
        return self.context

    # ------------------------------------------------------------------------------------------------- training

    def train_unit(
        self, step: int, optimizers: Optimizers, with_metrics: bool = True
    ) -> Tuple[torch.Tensor, Dict[str, Any], Dict[str, Any]]:
        """Render, backpropagate and hand this rank's unit to the runtime, then step the dense groups (camera
        optimizer, bilateral grid) with their gradients averaged over ranks; returns (loss, loss dict, metrics).

        ``with_metrics`` False leaves the training metrics out (an empty dict): nerfstudio writes them at logging
        steps only, and on a host-bound step every operation they launch is host time."""
        runtime = self._runtime(optimizers)
        camera, batch = self.datamanager.next_train(step)
        model = self.model
        unit = model.training_unit(camera, batch, shared_capacity=runtime.graphs is not None and runtime.graphs.capturing)
        strategy = model.strategy
        accumulates = strategy.accumulates(step)
        key = None if unit.key is None else (unit.key, accumulates)  # a graph per shape, with or without statistics
        if self._produced_version != runtime.structure_version:  # the graphs that wrote them were dropped
            self._produced.clear()
            self._produced_version = runtime.structure_version

        def compute_from(views: Dict[str, torch.Tensor], inputs: Dict[str, torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
            with model.rendering_from(views):
                outputs, losses = model.unit_losses(unit, inputs)
            loss = torch.stack(list(losses.values())).sum() if len(losses) > 1 else next(iter(losses.values()))
            loss.backward()
            self._produced[key] = (outputs, losses, model.info)
            return loss.detach(), model.updated_rows()

        def compute(views: Dict[str, torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
            return compute_from(views, unit.inputs)

        def read_scope(views: Dict[str, torch.Tensor]) -> torch.Tensor:
            with self.model.rendering_from(views):
                return self.model.visible_gaussians(camera)

        def sensitivity(views: Dict[str, torch.Tensor]) -> ReaderSensitivity:
            """Throughput-first's pixels per unit of displacement in this unit's cameras (full resolution: an upper
            bound while splatfacto renders downscaled)."""
            model = self.model
            viewmats, intrinsics = model.view_matrices(camera), model.full_resolution_intrinsics(camera)
            return pinhole_sensitivity(views["means"], viewmats, intrinsics)

        statistics = UnitEffect(  # from the render the unit's compute left in model.info
            lambda outputs, inputs: strategy.accumulate_statistics(model.gauss_params, model.strategy_state, model.info),
            lambda: strategy.statistics(model.strategy_state),
        )
        captured = CapturedCompute(key, unit.inputs, compute_from, effect=statistics if accumulates else None)
        loss = runtime.run_unit(step, compute, read_scope, sensitivity, captured)
        strategy.statistics_accumulated = accumulates
        # a replayed unit ran no Python: what its compute produced are the tensors its graph rewrote in place
        outputs, losses, model.info = self._produced[key]
        model.observe_intersections(unit)
        for group in optimizers.parameters:
            if group not in GAUSSIAN_GROUPS:
                optimizers.optimizer_step(group)
        if not with_metrics:
            return loss, losses, {}
        with torch.no_grad():  # from the rendered and target images the unit left; copies: the next replay rewrites them
            metrics = model.get_metrics_dict(outputs, batch)
        return loss.clone(), {name: value.detach().clone() for name, value in losses.items()}, metrics

    def drain(self) -> None:
        """Publish every in-flight unit on every rank (collective): before evaluation, checkpoints and the end."""
        if self.runtime is not None:
            self.runtime.drain()

    def densification_statistics(self) -> Dict[str, torch.Tensor]:
        """The densification statistics (gsplat's ``grad2d``, ``count``, ``radii``) of every rank holding this
        rank's replica (``replica_context``), stacked [ranks, N] on the CPU, for a checkpoint (collective over those
        ranks). Each rank keeps its own between refines (they are reduced just before one), so a resumed run must
        give each rank back its own to refine as an uninterrupted run would."""
        statistics = {key: value for key, value in sorted(self.model.strategy_state.items()) if torch.is_tensor(value)}
        context = self.replica_context
        return {key: context.gather(value, f"densification statistic {key}").cpu() for key, value in statistics.items()}

    def restore_densification_statistics(self, statistics: Dict[str, torch.Tensor]) -> None:
        """Give this rank its row of a checkpoint's ``densification_statistics``; from a run with another number of
        ranks sharing a replica, the first of this replica's ranks takes their reduction and the others start from
        zero (the next refine sees the same sums). Where every rank is a replica of its own (``_replica_context``),
        every rank continues from the checkpoint's model and statistics as one process resuming it would."""
        world_size = self.replica_context.world_size
        rank = self.replica_context.rank if world_size > 1 else 0  # a rank alone keeps its global rank in the context
        for key, per_rank in statistics.items():
            if per_rank.shape[0] == world_size:
                value = per_rank[rank]
            elif rank == 0:
                value = per_rank.amax(0) if GSPLAT_STATISTIC_OPS.get(key) == "max" else per_rank.sum(0)
            else:
                value = torch.zeros_like(per_rank[0])
            self.model.strategy_state[key] = value.to(self.device)

    def check_finite(self) -> None:
        """NonFiniteGradientError on every rank if a unit's gradients held NaN/Inf on some rank (collective)."""
        if self.runtime is not None:
            self.runtime.check_finite()

    def take_unit_records(self) -> List[UnitRecord]:
        """Records of the units published since the last call (reading them waits for the GPU: call at logging
        steps); the runtime forgets them."""
        return self.runtime.stats.take() if self.runtime is not None else []

    def state_digests(self, optimizers: Optimizers) -> Dict[str, str]:
        """SHA-256 of every tensor of the model and of the optimizers' state (moments and step counts), by name."""
        tensors = {f"model.{name}": tensor for name, tensor in self.model.state_dict().items()}
        for group, optimizer in optimizers.optimizers.items():
            for index, param in enumerate(optimizer.param_groups[0]["params"]):
                for key, value in optimizer.state.get(param, {}).items():
                    if isinstance(value, torch.Tensor):
                        tensors[f"optimizer.{group}.{index}.{key}"] = value
        return digests(tensors)

    def _runtime(self, optimizers: Optimizers) -> OdinRuntime:
        if self.runtime is None:
            self._start_from_rank0_gaussians()
            config = self.config.odin
            if config.read_scopes == "predicted" and self.model.config.camera_optimizer.mode != "off":
                raise ValueError(
                    "--pipeline.odin.read-scopes predicted needs fixed camera poses: set "
                    "--pipeline.model.camera-optimizer.mode off, or use --pipeline.odin.read-scopes measured"
                )
            if self.context.world_size == 1 and config.overlapped:
                CONSOLE.log(f"one rank: nothing to overlap, {config.mode} runs as sync")
                config = dataclasses.replace(config, mode="sync", read_scopes="measured")
            predictor = self._read_predictor(optimizers) if config.read_scopes == "predicted" else None
            gaussian_optimizers = {name: optimizers.optimizers[name] for name in GAUSSIAN_GROUPS}
            dense_params = [
                param for group, params in optimizers.parameters.items() if group not in GAUSSIAN_GROUPS for param in params
            ]
            self.runtime = config.setup(
                params=self.model.gauss_params,
                optimizers=gaussian_optimizers,
                context=self.replica_context,
                dense_params=dense_params,
                predictor=predictor,
                log=CONSOLE.log if self.context.is_main else lambda _: None,
            )
            graphs = self.runtime.graphs
            views = self.datamanager.config.views_per_rank
            if graphs is not None and graphs.capturing:
                if views > 1:
                    graphs.disable(f"units of {views} views run eagerly: the GPU's work already hides their launches, "
                                   "and captured ones trained slower (docs/results.md, 'Time to quality')")
                elif not self.model.size_intersections_ahead():
                    graphs.disable(f"units run eagerly: the '{self.model.renderer}' renderer sizes its tile "
                                   "intersections on the host, which a captured step cannot")
            self.model.strategy.barrier = DrainingBarrier(self.runtime)
        return self.runtime

    def _read_predictor(self, optimizers: Optimizers) -> SplatReadPredictor:
        """Predicted read scopes from the plan and the training cameras, which must stay where they are."""
        self.datamanager.cached_train  # sets train_cameras: the (undistorted) cameras training renders with
        means, scales = (optimizers.optimizers[name].param_groups[0] for name in ("means", "scales"))
        return SplatReadPredictor(
            pinhole_views(self.datamanager.train_cameras),
            self.datamanager.unit_views,
            self.context.rank,
            means_lr=lambda: means["lr"],
            scales_lr=lambda: scales["lr"],
            betas=tuple(means["betas"]),
            near_plane=NEAR_PLANE,
            largest_downscale=2**self.model.config.num_downscales,
        )

    @torch.no_grad()
    def _start_from_rank0_gaussians(self) -> None:
        """Every rank starts from rank 0's Gaussians, as DDP starts from rank 0's weights: nerfstudio's launcher
        seeds each rank differently (seed + rank), so random initialisations (splatfacto's quaternions) differ."""
        self.context.broadcast_([param.data for param in self.model.gauss_params.values()], "rank 0's Gaussians")
