"""Training views served in the order of the static Odin schedule, one unit per step, each rank its share.

``OdinDataManager`` keeps nerfstudio's ``FullImageDatamanager`` (image caching, undistortion, eval path) and only
replaces which training views ``next_train(step)`` returns: those the AOT plan (odin_ns.schedule.plan) assigns to
this rank at that step. ``PlanCommand`` (``odin-ns plan``) builds the same plan ahead of time with the same
dataparser, so a plan file made once can be handed to every rank via ``plan_path``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Dict, List, Literal, Optional, Tuple, Type, Union

import numpy as np
import torch
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager, FullImageDatamanagerConfig
from nerfstudio.data.dataparsers.base_dataparser import DataParserConfig, DataparserOutputs
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig
from nerfstudio.utils.rich_utils import CONSOLE

from odin_ns.comm.context import DistContext
from odin_ns.data.dataparser import DatasetError, OdinDataParserConfig
from odin_ns.rendering import scaled_intrinsics, splatfacto_view_matrices, view_inverses
from odin_ns.schedule.partition import DEFAULT_NUM_REGIONS
from odin_ns.schedule.plan import Order, SchedulePlan, build_plan, check_views_per_step
from odin_ns.schedule.rlg import DEFAULT_MAX_TRACK_LENGTH, DEFAULT_TOP_K
from odin_ns.schedule.tracks import ViewCameras, view_names


def plan_training_views(
    outputs: DataparserOutputs, dataparser_config: DataParserConfig, **plan_options
) -> SchedulePlan:
    """AOT plan of the training split a dataparser produced; SfM tracks when it read a COLMAP model."""
    recon_dir = None
    if isinstance(dataparser_config, ColmapDataParserConfig) and dataparser_config.colmap_path is not None:
        recon_dir = dataparser_config.data / dataparser_config.colmap_path
    seed_points = outputs.metadata.get("points3D_xyz")
    return build_plan(
        outputs.image_filenames,
        ViewCameras.from_nerfstudio(outputs.cameras),
        recon_dir=recon_dir,
        seed_points=None if seed_points is None else np.asarray(seed_points),
        **plan_options,
    )


@dataclass
class OdinDataManagerConfig(FullImageDatamanagerConfig):
    """FullImageDatamanager serving training views in the order of the static Odin schedule."""

    _target: Type = field(default_factory=lambda: OdinDataManager)
    order: Order = "rlg"
    """rlg: consecutive steps rotate through weakly coupled regions of the RLG, and a step of several views takes them
    from one region, so its update stays compact; random: plain shuffle (baseline)."""
    views_per_rank: int = 1
    """Views each rank renders per step, in one rasterizer call (global batch B = world size x views per rank;
    ``odin_ns.batch`` scales learning rates, eps, betas and schedules for it). The training images must share one
    size."""
    num_regions: int = DEFAULT_NUM_REGIONS
    plan_path: Optional[Path] = None
    """Plan written by ``odin-ns plan``; None builds it at start-up (seeded by train_cameras_sampling_seed)."""
    top_k: int = DEFAULT_TOP_K
    max_track_length: int = DEFAULT_MAX_TRACK_LENGTH


class OdinDataManager(FullImageDatamanager):
    """Serves, at every step, this rank's views of the plan's unit for that step.

    ``dist_context`` says which rank this is among how many, and carries the plan from rank 0 to the others; None is
    a single process (rank 0 of 1). nerfstudio's ``world_size`` and ``local_rank`` only reach the parent class.
    """

    config: OdinDataManagerConfig

    def __init__(
        self,
        config: OdinDataManagerConfig,
        device: Union[torch.device, str] = "cpu",
        test_mode: Literal["test", "val", "inference"] = "val",
        world_size: int = 1,
        local_rank: int = 0,
        dist_context: Optional[DistContext] = None,
        **kwargs,
    ):
        super().__init__(config, device, test_mode, world_size, local_rank, **kwargs)
        if config.views_per_rank < 1:
            raise ValueError(f"views_per_rank must be at least 1, got {config.views_per_rank}")
        self.context = dist_context or DistContext.single(device)
        self.rank, self.num_ranks = self.context.rank, self.context.world_size
        views = len(self.train_dataset)
        try:  # checked on every rank: the plan is built on rank 0 alone
            check_views_per_step(self.num_ranks, config.views_per_rank, views)
        except ValueError as error:
            raise DatasetError(
                f"{config.dataparser.data} has {views} training views, but {self.num_ranks} ranks x "
                f"{config.views_per_rank} views per rank need {self.num_ranks * config.views_per_rank} distinct "
                "views per step (fewer ranks, or --pipeline.datamanager.views-per-rank lower)") from error
        self._cameras_of_units: Dict[Tuple[int, ...], Cameras] = {}

    @cached_property
    def plan(self) -> SchedulePlan:
        """The schedule, built (or loaded and checked against the training views) once, by rank 0, on first use, and
        shared with the other ranks (collective): nodes need neither the plan file nor the SfM model to agree."""
        made = None
        if self.context.is_main:
            try:
                made = self._make_plan()
            except DatasetError as error:  # sent to every rank, so all stop with the same line instead of waiting
                made = error
        shared = self.context.broadcast_object(made, "the Odin plan")
        if isinstance(shared, DatasetError):
            raise shared
        return shared

    def _make_plan(self) -> SchedulePlan:
        config = self.config
        if config.plan_path is not None:
            try:
                plan = SchedulePlan.load(config.plan_path)
                plan.check_views(view_names(self.train_dataset.image_filenames))
            except (OSError, ValueError, KeyError) as error:
                raise DatasetError(f"plan file {config.plan_path} cannot drive this capture "
                                   f"({config.dataparser.data}): {error}") from error
            plan = plan.with_batch(self.num_ranks, views_per_rank=config.views_per_rank, order=config.order)
            CONSOLE.log(f"Odin schedule loaded from {config.plan_path}")
        else:
            plan = plan_training_views(
                self.train_dataparser_outputs,
                config.dataparser,
                world_size=self.num_ranks,
                views_per_rank=config.views_per_rank,
                num_regions=config.num_regions,
                order=config.order,
                seed=config.train_cameras_sampling_seed,
                top_k=config.top_k,
                max_track_length=config.max_track_length,
            )
            seconds = plan.settings["aot_seconds"]
            CONSOLE.log(
                f"Odin AOT schedule ({plan.graph.source}) took {seconds['total']:.2f} s: reading "
                f"{seconds['observations']:.2f}, graph {seconds['graph']:.2f}, partition {seconds['partition']:.2f}, "
                f"order {seconds['order']:.2f}"
            )
        summary = plan.summary()
        CONSOLE.log(
            f"Odin schedule: {plan.num_views} views, regions {summary['regions']} "
            f"({summary['intra_region_weight_fraction']:.0%} of RLG weight inside), {plan.units_per_epoch} units of "
            f"{plan.world_size}x{plan.views_per_rank} views per epoch, order {plan.order}"
        )
        return plan

    def unit_views(self, step: int) -> List[List[int]]:
        """Training-view indices of the unit of a step, one list per rank."""
        return self.plan.unit_views(step)

    def next_train(self, step: int) -> Tuple[Cameras, Dict]:
        """This rank's views of the unit of ``step``: a (B,)-shaped Cameras whose metadata holds the views' indices
        (``cam_idx``, a list) and their common size on the host (``image_size``), and images stacked [B, H, W, C]."""
        views = self.plan.views_for(step, self.rank)
        cached = self.cached_train  # also sets self.train_cameras
        data = {key: torch.stack([cached[view][key] for view in views]) if torch.is_tensor(value) else
                [cached[view][key] for view in views] for key, value in cached[views[0]].items()}
        data["image"] = data["image"].to(self.device, non_blocking=True)  # cached on the device, or pinned
        assert len(self.train_cameras.shape) == 1, "Assumes single batch dimension"
        sizes = {self.train_image_sizes[view] for view in views}
        if len(sizes) > 1:
            raise ValueError(f"views {list(views)} have sizes {sorted(sizes)}: views rendered together need one size "
                             "(train with --pipeline.datamanager.views-per-rank 1, or resize the images)")
        return self._unit_cameras(tuple(views), sizes.pop()), data

    def _unit_cameras(self, views: Tuple[int, ...], size: Tuple[int, int]) -> Cameras:
        """The (B,) device Cameras of ``views``: rows of every training view's device camera, built once. Its
        metadata also holds what gsplat takes for these views at full resolution, the world-to-camera matrices
        (``viewmats``, [B, 4, 4], splatfacto's own: ``splatfacto_view_matrices``) and the intrinsics (``intrinsics``,
        [B, 3, 3]): otherwise each render rebuilds them from the same fixed cameras in about twenty small launches;
        and the view matrices' inverses (``camtoworlds``, ``view_inverses``: each the one gsplat computes for that
        view), which gsplat would otherwise compute on every render. A unit's Cameras is kept for when the plan deals
        the same views again (every epoch, with one view per rank), the last ``len(views of the capture)`` of them:
        with several views per rank the plan deals new combinations every epoch. Callers must not modify it."""
        cameras = self._cameras_of_units.pop(views, None)
        if cameras is None:
            every_view = self._device_train_cameras
            # the rows joined on the device: indexing by a list would first copy the indices to the device
            rows = torch.cat([self._view_indices[v : v + 1] for v in views])
            cameras = every_view[rows]
            cameras.metadata = {**(cameras.metadata or {}), "cam_idx": list(views), "image_size": size,
                                **{key: table[rows] for key, table in self._device_view_matrices.items()}}
        self._cameras_of_units[views] = cameras  # the most recently used last
        if len(self._cameras_of_units) > len(self._view_indices):
            del self._cameras_of_units[next(iter(self._cameras_of_units))]
        return cameras

    @cached_property
    def _device_train_cameras(self) -> Cameras:
        """Every training view's camera on the device, as ``cached_train`` (which it reads first) leaves them."""
        _ = self.cached_train  # sets train_cameras, undistorted
        return self.train_cameras.to(self.device)

    @cached_property
    def _view_indices(self) -> torch.Tensor:
        """0..V-1 on the device, whose one-element slices a unit's row index is joined from."""
        return torch.arange(len(self._device_train_cameras), device=self.device)

    @cached_property
    def _device_view_matrices(self) -> Dict[str, torch.Tensor]:
        """Every training view's gsplat matrices at full resolution (see ``_unit_cameras``)."""
        cameras = self._device_train_cameras
        viewmats = splatfacto_view_matrices(cameras.camera_to_worlds)
        return {"viewmats": viewmats, "camtoworlds": view_inverses(viewmats),
                "intrinsics": scaled_intrinsics(cameras, 1.0)}

    @cached_property
    def train_image_sizes(self) -> List[Tuple[int, int]]:
        """(width, height) of every training view, read once on the host; first read after ``cached_train``, whose
        undistortion may change the sizes."""
        cameras = self.train_dataset.cameras
        return list(zip(cameras.width[:, 0].tolist(), cameras.height[:, 0].tolist()))

    def get_train_rays_per_batch(self) -> int:
        return super().get_train_rays_per_batch() * self.config.views_per_rank


@dataclass
class PlanCommand:
    """Build the static Odin schedule (RLG, regions, unit order) of a dataset; write plan.npz and plan.png.

    The training split is the one training uses (OdinDataParser's defaults: every 8th image held out for eval).
    """

    data: Path
    """Dataset folder: a COLMAP capture (sparse/0, colmap/sparse/0, sparse) or a transforms.json scene."""
    world_size: int = 1
    views_per_rank: int = 1
    num_regions: int = DEFAULT_NUM_REGIONS
    out: Optional[Path] = None
    """Output folder; default outputs/<dataset folder name>/plan."""
    seed: int = 42
    """Defaults to nerfstudio's train_cameras_sampling_seed, the seed a datamanager without plan_path uses."""
    top_k: int = DEFAULT_TOP_K
    max_track_length: int = DEFAULT_MAX_TRACK_LENGTH

    def main(self) -> None:
        parser_config = OdinDataParserConfig(data=self.data, load_3D_points=True)  # seed points: an RLG without tracks
        parser = parser_config.setup()
        outputs = parser.get_dataparser_outputs(split="train")
        plan = plan_training_views(
            outputs,
            parser_config,
            world_size=self.world_size,
            views_per_rank=self.views_per_rank,
            num_regions=self.num_regions,
            seed=self.seed,
            top_k=self.top_k,
            max_track_length=self.max_track_length,
        )
        out = self.out if self.out is not None else Path("outputs") / self.data.resolve().name / "plan"
        plan.save(out / "plan.npz")
        from odin_ns.schedule.figure import draw_plan  # matplotlib: for this command, not every training start

        draw_plan(plan, out / "plan.png")
        CONSOLE.print(json.dumps(plan.summary(), indent=2))
        CONSOLE.print(f"wrote {out / 'plan.npz'} and {out / 'plan.png'}")
