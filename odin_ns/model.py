"""OdinSplatfactoModel: nerfstudio's splatfacto with a device-agnostic renderer and offline-safe metrics.

Training semantics (parameter groups, learning rates, gsplat ``DefaultStrategy`` densification) are splatfacto's.
What changes:
- the device follows the trainer (stock splatfacto calls ``.cuda()`` while building and rendering);
- rendering goes through :mod:`odin_ns.rendering`: gsplat's CUDA rasterizer on GPU, the torch reference on CPU;
- a training step renders all of this rank's views (``--pipeline.datamanager.views-per-rank``) in one rasterizer
  call: training outputs and targets carry a leading view axis, the loss is the mean over the views;
- the random training background is drawn per (step, training view), so re-running a unit (Odin's validation)
  renders exactly the same image, whichever rank renders the view;
- a steady training step reads nothing from the device on the host (tests/test_host_reads.py);
- the loss's SSIM is one fused kernel pair on CUDA (``odin_ns.kernels.ssim``): pytorch_msssim's separable
  convolutions were most of a step's GPU time at several views per rank;
- LPIPS is built lazily and reported as unavailable when its weights cannot be loaded;
- the resolution warm-up stops halving at MIN_RENDER_LONG_SIDE pixels (below it densification runs away).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Literal, Optional, Tuple, Type, Union

import torch
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.models.splatfacto import (
    RGB2SH,
    SplatfactoModel,
    SplatfactoModelConfig,
    num_sh_bases,
    random_quat_tensor,
)
from nerfstudio.model_components.lib_bilagrid import total_variation_loss
from nerfstudio.utils.rich_utils import CONSOLE
from scipy.spatial import cKDTree

from odin_ns.kernels.ssim import fused_ssim
from odin_ns.metrics import LazyLPIPS
from odin_ns.rendering import (
    RendererName,
    project_visibility,
    rasterize_fn,
    resolve_renderer,
    scaled_intrinsics,
    splatfacto_view_matrices,
)
from odin_ns.rendering.presized import (
    PresizedIntersections,
    RenderKey,
    known_view_inverse,
    route_view_inverse,
    unchecked_view_inverse,
)
from odin_ns.strategy import OdinStrategy, morton_order


@dataclass
class OdinSplatfactoModelConfig(SplatfactoModelConfig):
    """Splatfacto, runnable on CPU or GPU, as the model Odin trains."""

    _target: Type = field(default_factory=lambda: OdinSplatfactoModel)
    renderer: RendererName = "auto"
    """gsplat (CUDA), reference (pure torch, any device), or auto: gsplat on CUDA, reference otherwise."""
    views_per_step: int = 1
    """Views rendered per optimizer step over all ranks, set with the schedules it divides by ``odin_ns.batch``."""
    densify_grad_thresh_without_absgrad: float = 0.0002
    """Densification threshold on the plain 2D mean gradient, used where absgrad is unavailable (reference renderer).
    0.0002 is the 3DGS/gsplat default for plain gradients; ``densify_grad_thresh`` (0.0008) is tuned for absgrad."""
    presized_intersections: bool = False
    """gsplat renderer: size each training render's tile-intersection buffers from the counts its views had at
    their previous renders (read late), so that the forward reads nothing on the host. gsplat's own sizing waits for
    the GPU, and with several ranks for the previous unit's exchange; a view's first render, and the first after a
    resolution or Gaussian-count change, is sized exactly (``odin_ns.rendering.presized``)."""


@dataclass(frozen=True)
class TrainingShape:
    """What a training unit's launches depend on beyond its tensors' values: units of one shape launch the same work
    on inputs of the same shapes (the key of a captured step)."""

    width: int
    height: int
    """The rendered size (after the resolution warm-up)."""
    gaussians: int
    sh_degree: Optional[int]
    render_mode: str
    scale_regularization: bool
    capacity: Optional[int]
    """Tile-intersection slots shared by any views at this size (None: sized per render, or by gsplat)."""
    inputs: Tuple[Tuple[str, Tuple[int, ...], str], ...]
    """Each input tensor's name, shape and dtype."""


@dataclass
class TrainingUnit:
    """A training step's views as ``OdinSplatfactoModel.training_unit`` prepared them."""

    shape: TrainingShape
    inputs: Dict[str, torch.Tensor]
    views: List[int]
    camera: Cameras
    """The views' cameras, whose poses the render corrects where the camera optimizer trains (then they are not
    among the inputs: the correction is part of each compute's autograd graph, which a re-run repeats)."""
    key: Optional[TrainingShape]
    """``shape`` where units of this shape can replay one captured step; None where the step's launches depend on
    more than its shape."""

    def render_keys(self) -> List[RenderKey]:
        """What decides each view's intersection count in this unit's render (``RenderKey``)."""
        return [RenderKey(view, self.shape.width, self.shape.height, self.shape.gaussians) for view in self.views]


NEAR_PLANE = 0.01
"""Splatfacto's near plane: Gaussians whose centre is closer to the camera are not rendered."""
FIXED_BACKGROUNDS = {"black": torch.zeros(3), "white": torch.ones(3)}
MIN_RENDER_LONG_SIDE = 120
"""Splatfacto's resolution warm-up never renders a training image with a shorter long side than this (pixels). Its
densification splits every Gaussian whose radius exceeds ``split_screen_size`` (5%) of the image, and the smallest
splats are about 3 px in radius; at 32x24 (the 128x96 demo scene at 1/4) that is 9% of the image, so every Gaussian
splits at every refinement and the count runs away (README). 120 px keeps a 3 px splat at half the threshold."""

def initial_gaussians(
    config: SplatfactoModelConfig, seed_points: Optional[Tuple[torch.Tensor, torch.Tensor]]
) -> Dict[str, torch.Tensor]:
    """Splatfacto's initialisation (SfM seed points or a random cube), built on the CPU, rows in Morton order so
    Odin's publication ranges follow the scene. Shared with the gsplat-distributed benchmark peer."""
    has_seed = seed_points is not None and not config.random_init
    if has_seed:
        means = seed_points[0].float()
    else:
        means = (torch.rand((config.num_random, 3)) - 0.5) * config.random_scale
    distances, _ = cKDTree(means.numpy()).query(means.numpy(), k=4, workers=-1)  # as splatfacto (sklearn), parallel
    avg_dist = torch.from_numpy(distances[:, 1:]).float().mean(dim=-1, keepdim=True)
    num_points = means.shape[0]
    dim_sh = num_sh_bases(config.sh_degree)
    if has_seed and seed_points[1].shape[0] > 0:
        seed_rgb = seed_points[1].float() / 255
        shs = torch.zeros((num_points, dim_sh, 3))
        if config.sh_degree > 0:
            shs[:, 0, :3] = RGB2SH(seed_rgb)
        else:
            shs[:, 0, :3] = torch.logit(seed_rgb, eps=1e-10)
        features_dc, features_rest = shs[:, 0, :], shs[:, 1:, :]
    else:
        features_dc = torch.rand(num_points, 3)
        features_rest = torch.zeros((num_points, dim_sh - 1, 3))
    tensors = {
        "means": means,
        "scales": torch.log(avg_dist.repeat(1, 3)),
        "quats": random_quat_tensor(num_points),
        "features_dc": features_dc,
        "features_rest": features_rest,
        "opacities": torch.logit(0.1 * torch.ones(num_points, 1)),
    }
    order = morton_order(means)
    return {name: tensor[order].contiguous() for name, tensor in tensors.items()}


def training_views(camera: Cameras) -> List[int]:
    """The training-view indices of a training ``Cameras`` (the datamanager's ``cam_idx`` list)."""
    views = (camera.metadata or {}).get("cam_idx")
    if views is None:
        raise ValueError("training cameras carry their view indices in metadata['cam_idx']")
    return list(views) if isinstance(views, (list, tuple)) else [int(views)]


def image_size(camera: Cameras) -> Tuple[int, int]:
    """(width, height) in pixels of a one-camera ``Cameras``: the host copy training cameras carry in their metadata
    (``image_size``, attached by the datamanager: reading the device tensors would make the host wait for the GPU),
    else read from the camera."""
    size = (camera.metadata or {}).get("image_size")
    if size is not None:
        return size
    return int(camera.width[0, 0].item()), int(camera.height[0, 0].item())


class OdinSplatfactoModel(SplatfactoModel):
    """Splatfacto on any device; see the module docstring for what differs from stock."""

    config: OdinSplatfactoModelConfig

    def populate_modules(self) -> None:
        self.renderer = resolve_renderer(self.config.renderer, torch.device(self.kwargs.get("device", "cpu")))
        if self.config.presized_intersections and self.renderer != "gsplat":
            raise ValueError(f"presized_intersections sizes gsplat's intersection buffers; the renderer here is "
                             f"'{self.renderer}' (gsplat needs CUDA)")
        self._presized = PresizedIntersections() if self.config.presized_intersections else None
        self._shared_capacities: Dict[Tuple[int, int, int], int] = {}
        """(width, height, cameras) -> the shared capacity of such renders now (``training_unit``)."""
        if self.renderer == "gsplat":
            route_view_inverse()  # training renders invert their view matrices without gsplat's host read
        self.gauss_params = torch.nn.ParameterDict(self._initial_gaussians())
        self.camera_optimizer = self.config.camera_optimizer.setup(num_cameras=self.num_train_data, device="cpu")

        from nerfstudio.model_components.lib_bilagrid import BilateralGrid
        from pytorch_msssim import SSIM
        from torchmetrics.image import PeakSignalNoiseRatio

        self.psnr = PeakSignalNoiseRatio(data_range=1.0)
        self.ssim = SSIM(data_range=1.0, size_average=True, channel=3)
        self.lpips = LazyLPIPS()
        self.step = 0
        self.crop_box = None
        self.background_color = (
            torch.tensor([0.1490, 0.1647, 0.2157])  # viser's background, used when rendering for the viewer
            if self.config.background_color == "random"
            else FIXED_BACKGROUNDS[self.config.background_color]
        )
        if self.config.use_bilateral_grid:
            self.bil_grids = BilateralGrid(
                num=self.num_train_data,
                grid_X=self.config.grid_shape[0],
                grid_Y=self.config.grid_shape[1],
                grid_W=self.config.grid_shape[2],
            )
        self.strategy = self._densification_strategy()
        self.strategy_state = self.strategy.initialize_state(scene_scale=1.0)
        self._render_params: Optional[Dict[str, torch.Tensor]] = None
        self._fixed_background: Optional[torch.Tensor] = None

    def size_intersections_ahead(self) -> bool:
        """Turn on presized intersections (``presized_intersections``), for a captured step; False where the renderer
        is not gsplat's (nothing to size)."""
        if self.renderer != "gsplat":
            return False
        if self._presized is None:
            self._presized = PresizedIntersections()
        return True

    @contextmanager
    def rendering_from(self, params: Dict[str, torch.Tensor]) -> Iterator[None]:
        """Render from ``params`` (Odin's private views of the shared tensors) instead of ``gauss_params``."""
        previous, self._render_params = self._render_params, params
        try:
            yield
        finally:
            self._render_params = previous

    def _initial_gaussians(self) -> Dict[str, torch.nn.Parameter]:
        tensors = initial_gaussians(self.config, self.seed_points)
        return {name: torch.nn.Parameter(tensor) for name, tensor in tensors.items()}

    def _densification_strategy(self) -> OdinStrategy:
        """Splatfacto's DefaultStrategy; plain-gradient threshold where the renderer has no absgrad."""
        absgrad = self.config.use_absgrad and self.renderer == "gsplat"
        if self.config.use_absgrad and not absgrad:
            CONSOLE.log(
                f"renderer '{self.renderer}' has no absgrad: densifying on the plain 2D gradient with threshold "
                f"{self.config.densify_grad_thresh_without_absgrad}"
            )
        return OdinStrategy(
            prune_opa=self.config.cull_alpha_thresh,
            grow_grad2d=self.config.densify_grad_thresh if absgrad else self.config.densify_grad_thresh_without_absgrad,
            grow_scale3d=self.config.densify_size_thresh,
            grow_scale2d=self.config.split_screen_size,
            prune_scale3d=self.config.cull_scale_thresh,
            prune_scale2d=self.config.cull_screen_size,
            refine_scale2d_stop_iter=self.config.stop_screen_size_at,
            refine_start_iter=self.config.warmup_length,
            refine_stop_iter=self.config.stop_split_at,
            reset_every=self.config.reset_alpha_every * self.config.refine_every,
            refine_every=self.config.refine_every,
            pause_refine_after_reset=self.num_train_data // self.config.views_per_step + self.config.refine_every,
            absgrad=absgrad,
            revised_opacity=False,
        )

    def _training_backgrounds(self, camera: Cameras) -> torch.Tensor:
        """[C, 3]: per training view, a random colour drawn from (step, view) or the configured colour.
        ``self.background_color`` is the viewer's (it overwrites it on rank 0 only), so training never reads it."""
        views = training_views(camera)
        if self.config.background_color == "random":
            colours = []
            for view in views:  # drawn on the device where they are used: no copy, no host wait
                generator = torch.Generator(self.device).manual_seed(self.step * 65_537 + view)
                colours.append(torch.rand(3, generator=generator, device=self.device))
            return torch.stack(colours) if len(colours) > 1 else colours[0][None]
        if self._fixed_background is None or self._fixed_background.device != self.device:
            self._fixed_background = FIXED_BACKGROUNDS[self.config.background_color].to(self.device)
        return self._fixed_background.expand(len(views), 3)

    def camera_to_worlds(self, camera: Cameras) -> torch.Tensor:
        """[C, 3, 4] poses of training ``camera`` with the camera optimizer's corrections (nerfstudio's
        ``apply_to_camera``, for several views at once)."""
        if self.camera_optimizer.config.mode == "off":
            return camera.camera_to_worlds
        views = torch.tensor(training_views(camera), dtype=torch.long)
        correction = self.camera_optimizer(views).to(camera.device)
        rotations = torch.bmm(correction[..., :3, :3], camera.camera_to_worlds[..., :3, :3])
        return torch.cat([rotations, camera.camera_to_worlds[..., :3, 3:] + correction[..., :3, 3:]], dim=-1)

    def view_matrices(self, camera: Cameras) -> torch.Tensor:
        """[C, 4, 4] world-to-camera matrices of ``camera`` as gsplat takes them: the datamanager's, built once per
        unit of views, while training poses are fixed (no camera optimizer); else from the (corrected) poses."""
        fixed_poses = self.training and self.camera_optimizer.config.mode == "off"
        viewmats = (camera.metadata or {}).get("viewmats") if fixed_poses else None
        if viewmats is not None:
            return viewmats.to(self.device)
        camera_to_world = self.camera_to_worlds(camera) if self.training else camera.camera_to_worlds
        return splatfacto_view_matrices(camera_to_world.to(self.device))

    def full_resolution_intrinsics(self, camera: Cameras) -> torch.Tensor:
        """[C, 3, 3] pinhole intrinsics of ``camera`` at its full resolution: the datamanager's, built once per unit
        of views, else built here."""
        intrinsics = (camera.metadata or {}).get("intrinsics")
        return intrinsics.to(self.device) if intrinsics is not None else scaled_intrinsics(camera, 1.0)

    def _get_downscale_factor(self) -> int:
        """Splatfacto's warm-up factor, halved until the rendered long side is at least MIN_RENDER_LONG_SIDE."""
        factor = super()._get_downscale_factor()
        long_side = getattr(self, "_image_long_side", None)
        while long_side is not None and factor > 1 and long_side / factor < MIN_RENDER_LONG_SIDE:
            factor //= 2
        return factor

    def _gaussian_inputs(self) -> Dict:
        """gsplat ``rasterization`` keyword arguments of the (cropped) Gaussians: means, quats, activated scales and
        opacities, colours and the SH degree in use."""
        crop_ids = self.crop_box.within(self.means).squeeze() if self.crop_box is not None and not self.training else None
        source = self.gauss_params if self._render_params is None else self._render_params
        params = {name: (p if crop_ids is None else p[crop_ids]) for name, p in source.items()}
        colors = torch.cat((params["features_dc"][:, None, :], params["features_rest"]), dim=1)
        if self.config.sh_degree > 0:
            sh_degree = self._sh_degree_in_use()
        else:
            colors, sh_degree = torch.sigmoid(colors).squeeze(1), None
        return dict(
            means=params["means"],
            quats=params["quats"],
            scales=torch.exp(params["scales"]),
            opacities=torch.sigmoid(params["opacities"]).squeeze(-1),
            colors=colors,
            sh_degree=sh_degree,
        )

    def _sh_degree_in_use(self) -> Optional[int]:
        """Splatfacto's SH degree at this step (None: colours are plain RGB)."""
        if self.config.sh_degree == 0:
            return None
        return min(self.step // self.config.sh_degree_interval, self.config.sh_degree)

    def _rendered_size(self, camera: Cameras) -> Tuple[int, int, torch.Tensor]:
        """(width, height, intrinsics [C, 3, 3]) at which ``camera`` renders now (training: after the resolution
        warm-up, whose long side it records; the ground truth is downscaled by the same factor)."""
        full_width, full_height = image_size(camera)
        if self.training:
            self._image_long_side = max(full_width, full_height)
        scale = 1 / self._get_downscale_factor()
        width, height = int(full_width * scale), int(full_height * scale)  # as Cameras.rescale_output_resolution
        Ks = self.full_resolution_intrinsics(camera) if scale == 1.0 else scaled_intrinsics(camera, scale)
        return width, height, Ks

    def _rasterization_inputs(self, camera: Cameras) -> Dict:
        """gsplat ``rasterization`` keyword arguments for the (cropped) Gaussians seen from ``camera``."""
        width, height, Ks = self._rendered_size(camera)
        return dict(
            **self._gaussian_inputs(),
            viewmats=self.view_matrices(camera),
            Ks=Ks,
            width=width,
            height=height,
            near_plane=NEAR_PLANE,
            far_plane=1e10,
        )

    def _rasterize(self, inputs: Dict, render_mode: Literal["RGB", "RGB+ED"]) -> Tuple[torch.Tensor, torch.Tensor, Dict]:
        """gsplat's ``rasterization`` (or the reference's) of ``inputs``: (colors, alphas, info)."""
        return rasterize_fn(self.renderer)(
            **inputs,
            packed=False,
            render_mode=render_mode,
            sparse_grad=False,
            absgrad=self.strategy.absgrad,
            rasterize_mode=self.config.rasterize_mode,
        )

    def training_unit(
        self, camera: Cameras, batch: Optional[Dict[str, torch.Tensor]], shared_capacity: bool = False
    ) -> TrainingUnit:
        """The host's part of a training step of ``camera``'s views (``batch``: their images, None to render only):
        the decisions it takes (``TrainingShape``) and the device tensors it renders and scores with. The poses, the
        resolution warm-up's intrinsics and the random backgrounds (drawn per step and view) are made here, so that
        ``unit_losses`` is a function of these tensors and the Gaussians alone.

        ``shared_capacity``: with presized intersections, size the render's tile intersections for any views of the
        capture at this resolution (``IntersectionBudget.shared_capacity``), so that units of one shape launch the
        same work whatever their views; such a unit's shape is its ``key`` for a captured step, None where its
        launches depend on more (a view without a count yet, the camera optimizer, the bilateral grid)."""
        views = training_views(camera)
        width, height, Ks = self._rendered_size(camera)
        inputs = {"Ks": Ks, "backgrounds": self._training_backgrounds(camera)}
        fixed_poses = self.camera_optimizer.config.mode == "off"
        if fixed_poses:
            inputs["viewmats"] = self.view_matrices(camera)
            inverse = (camera.metadata or {}).get("camtoworlds")
            if inverse is not None and inputs["viewmats"] is (camera.metadata or {}).get("viewmats"):
                inputs["camtoworlds"] = inverse
        for name in ("image", "mask"):
            if batch is not None and name in batch:
                inputs[name] = batch[name].to(self.device, non_blocking=True)
        capacity = None
        if shared_capacity and self._presized is not None:
            size = (width, height, len(views))
            capacity = self._presized.budget.shared_capacity(width, height, self.num_train_data, len(views),
                                                             self.num_points, self._shared_capacities.get(size))
            if capacity is not None:
                self._shared_capacities[size] = capacity
        shape = TrainingShape(
            width=width,
            height=height,
            gaussians=self.num_points,
            sh_degree=self._sh_degree_in_use(),
            render_mode="RGB+ED" if self.config.output_depth_during_training else "RGB",
            scale_regularization=self.regularizes_scales,
            capacity=capacity,
            inputs=tuple((name, tuple(tensor.shape), str(tensor.dtype)) for name, tensor in sorted(inputs.items())),
        )
        capturable = capacity is not None and fixed_poses and not self.config.use_bilateral_grid
        return TrainingUnit(shape, inputs, views, camera, key=shape if capturable else None)

    def unit_losses(self, unit: TrainingUnit, inputs: Dict[str, torch.Tensor]) -> Tuple[Dict, Dict[str, torch.Tensor]]:
        """The training outputs and losses of ``unit`` rendered from ``inputs`` (``unit.inputs`` or copies of them):
        a function of these tensors and the Gaussians, whatever the step (what a captured step replays)."""
        outputs = self._training_outputs(unit, inputs)
        batch = {name: inputs[name] for name in ("image", "mask") if name in inputs}
        return outputs, self.get_loss_dict(outputs, batch)

    def observe_intersections(self, unit: TrainingUnit) -> None:
        """Hand the budget the intersection counts of ``unit``'s render with a shared capacity (read late, never
        waited for; a render sized per view observed its own)."""
        if unit.shape.capacity is not None:
            self._presized.budget.observe(unit.render_keys(), unit.shape.capacity, self.info["intersection_counts"])

    def _training_outputs(self, unit: TrainingUnit, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Render ``unit``'s views from ``inputs``, composite them over their backgrounds; the render's info goes to
        ``self.info`` for the densification strategy."""
        shape = unit.shape
        self.last_size = (shape.height, shape.width)
        viewmats = inputs["viewmats"] if "viewmats" in inputs else self.view_matrices(unit.camera)
        render_inputs = dict(**self._gaussian_inputs(), viewmats=viewmats, Ks=inputs["Ks"], width=shape.width,
                             height=shape.height, near_plane=NEAR_PLANE, far_plane=1e10)
        with known_view_inverse(viewmats, inputs.get("camtoworlds")):
            if self._presized is None:
                with unchecked_view_inverse():
                    render, alpha, info = self._rasterize(render_inputs, shape.render_mode)
            elif shape.capacity is not None:
                with self._presized.render_shared(shape.capacity) as counts:
                    render, alpha, info = self._rasterize(render_inputs, shape.render_mode)
                info["intersection_counts"] = counts.counts
            else:
                with self._presized.render(unit.render_keys()):
                    render, alpha, info = self._rasterize(render_inputs, shape.render_mode)
        self.info = info
        self.strategy.step_pre_backward(self.gauss_params, self.optimizers, self.strategy_state, self.step, info)
        depth = None
        if shape.render_mode == "RGB+ED":
            depth = torch.where(alpha > 0, render[..., 3:4], render[..., 3:4].detach().max())
        backgrounds = inputs["backgrounds"]
        rgb = torch.clamp(render[..., :3] + (1 - alpha) * backgrounds[:, None, None, :], 0.0, 1.0)
        if self.config.use_bilateral_grid:
            rgb = torch.cat([self._apply_bilateral_grid(rgb[i : i + 1], view, shape.height, shape.width)
                             for i, view in enumerate(unit.views)])
        return {"rgb": rgb, "depth": depth, "accumulation": alpha, "background": backgrounds}

    @torch.no_grad()
    def visible_gaussians(self, camera: Cameras) -> torch.Tensor:
        """bool [N]: the Gaussians ``camera`` would render (radius > 0), by projection only (Odin's read scope)."""
        inputs = self._rasterization_inputs(camera)
        for unused in ("opacities", "colors", "sh_degree"):
            inputs.pop(unused)
        return project_visibility(self.renderer, **inputs)

    def get_outputs(self, camera: Cameras) -> Dict[str, Union[torch.Tensor, List]]:
        """Training: this rank's C views in one call, ``rgb`` [C, H, W, 3] and ``background`` [C, 3]; otherwise one
        camera, as splatfacto's outputs."""
        if not isinstance(camera, Cameras):
            raise TypeError(f"get_outputs needs a Cameras object, got {type(camera).__name__}")
        if not self.training and camera.shape[0] != 1:
            raise ValueError(f"evaluation renders one camera per call, got {camera.shape[0]}")
        if self.config.rasterize_mode not in ("antialiased", "classic"):
            raise ValueError(f"unknown rasterize_mode: {self.config.rasterize_mode}")
        if self.training:
            unit = self.training_unit(camera, None)
            return self._training_outputs(unit, unit.inputs)
        if self.crop_box is not None and self.crop_box.within(self.means).sum() == 0:
            return self.get_empty_outputs(int(camera.width.item()), int(camera.height.item()), self.background_color)

        inputs = self._rasterization_inputs(camera)
        self.last_size = (inputs["height"], inputs["width"])
        render, alpha, self.info = self._rasterize(inputs, "RGB+ED")
        depth = torch.where(alpha > 0, render[..., 3:4], render[..., 3:4].detach().max())
        background = self.background_color.to(self.device)
        rgb = torch.clamp(render[..., :3] + (1 - alpha) * background, 0.0, 1.0)
        return {"rgb": rgb.squeeze(0), "depth": depth.squeeze(0), "accumulation": alpha.squeeze(0),
                "background": background.expand(inputs["height"], inputs["width"], 3)}

    def _training_targets(self, outputs: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        """[C, H, W, 3] ground truth of the training views at the rendered resolution, composited over each view's
        background where the images have alpha; kept in ``outputs`` (``target``), so the loss and the metrics of a
        logging step build it once."""
        if "target" not in outputs:
            outputs["target"] = self._composited_targets(batch, outputs["background"])
        return outputs["target"]

    def _composited_targets(self, batch: Dict[str, torch.Tensor], backgrounds: torch.Tensor) -> torch.Tensor:
        images = batch["image"]
        images = images.float() / 255.0 if images.dtype == torch.uint8 else images
        if self._get_downscale_factor() > 1:  # splatfacto's resize is per image
            images = torch.stack([self._downscale_if_required(image) for image in images])
        images = images.to(self.device)
        if images.shape[-1] == 4:
            alpha = images[..., 3:]
            return images[..., :3] * alpha + backgrounds[:, None, None, :] * (1.0 - alpha)
        return images

    def get_metrics_dict(self, outputs, batch) -> Dict[str, torch.Tensor]:
        """Splatfacto's training metrics over the step's views, left on the device (read only when logged); PSNR
        computed here rather than by torchmetrics, whose update copies a count to the device every call."""
        if not self.training:
            return super().get_metrics_dict(outputs, batch)
        error = (outputs["rgb"] - self._training_targets(outputs, batch)).square().mean()
        metrics = {"psnr": -10.0 * torch.log10(error), "gaussian_count": self.num_points}
        self.camera_optimizer.get_metrics_dict(metrics)
        return metrics

    def get_loss_dict(self, outputs, batch, metrics_dict=None) -> Dict[str, torch.Tensor]:
        """Splatfacto's loss, the mean over the step's views (L1 and SSIM over the batch of images)."""
        if not self.training:
            return super().get_loss_dict(outputs, batch, metrics_dict)
        target = self._training_targets(outputs, batch)
        predicted = outputs["rgb"]
        if "mask" in batch:
            mask = torch.stack([self._downscale_if_required(mask) for mask in batch["mask"]]).to(self.device)
            target, predicted = target * mask, predicted * mask
        l1 = torch.abs(target - predicted).mean()
        ssim = 1 - fused_ssim(predicted, target)  # Triton on CUDA; on the CPU the same pytorch_msssim call as before
        losses = {"main_loss": (1 - self.config.ssim_lambda) * l1 + self.config.ssim_lambda * ssim}
        if self.regularizes_scales:
            ratio = self._scale_ratios()
            losses["scale_reg"] = 0.1 * (ratio.clamp_min(self.config.max_gauss_ratio) - self.config.max_gauss_ratio).mean()
        self.camera_optimizer.get_loss_dict(losses)
        if self.config.use_bilateral_grid:
            losses["tv_loss"] = 10 * total_variation_loss(self.bil_grids.grids)
        return losses

    @property
    def regularizes_scales(self) -> bool:
        """Whether this training step's loss holds splatfacto's scale regularization (every tenth step)."""
        return self.config.use_scale_regularization and self.step % 10 == 0

    def _scale_ratios(self) -> torch.Tensor:
        """Each Gaussian's largest over smallest scale, from the tensors this step renders from."""
        source = self.gauss_params if self._render_params is None else self._render_params
        scales = torch.exp(source["scales"])
        return scales.amax(dim=-1) / scales.amin(dim=-1)

    @torch.no_grad()
    def updated_rows(self) -> torch.Tensor:
        """bool [N]: the Gaussians this training step's loss can give a gradient: those its views saw and, on a scale
        regularization step, those whose scale ratio reaches ``max_gauss_ratio`` (the regularizer's gradient is zero
        below it), seen or not."""
        rows = (self.info["radii"] > 0).any(dim=0)
        if self.regularizes_scales:
            rows |= self._scale_ratios() >= self.config.max_gauss_ratio
        return rows

    def get_image_metrics_and_images(
        self, outputs: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor]
    ) -> Tuple[Dict[str, float], Dict[str, torch.Tensor]]:
        """PSNR, SSIM and (when its weights load) LPIPS of one evaluation view."""
        gt_rgb = self.composite_with_background(self.get_gt_img(batch["image"]), outputs["background"])
        predicted_rgb = outputs["rgb"]
        combined_rgb = torch.cat([gt_rgb, predicted_rgb], dim=1)
        gt_chw = torch.moveaxis(gt_rgb, -1, 0)[None, ...]
        predicted_chw = torch.moveaxis(predicted_rgb, -1, 0)[None, ...]
        metrics: Dict[str, float] = {
            "psnr": float(self.psnr(gt_chw, predicted_chw).item()),
            "ssim": float(self.ssim(gt_chw, predicted_chw)),
        }
        lpips = self.lpips(gt_chw, predicted_chw)
        if lpips is not None:
            metrics["lpips"] = lpips
        return metrics, {"img": combined_rgb}
