"""Embedded synthetic demo scene: a known Gaussian scene rendered into a COLMAP dataset, so training needs no download.

The scene is a few textured objects (spheres, boxes, tori made of flat Gaussians) standing apart on a Gaussian ground
plane. Most cameras sit in a ring around one object and look at it, a few wide views see everything; so each view
sees mostly one region, which is the view locality that Odin's scheduling exploits. The ground-truth Gaussians are
saved beside the dataset (`scene_gaussians.npz`) for benchmarks.

World frame: COLMAP's convention, gravity along +y (up is -y), ground plane at y = 0; cameras are OpenCV
(x right, y down, z forward). Images are RGBA PNGs whose alpha is the rendered opacity, so a trainer with any
background colour sees the true scene (nerfstudio's splatfacto composites RGBA targets onto its background).
Sizes are linear in every option, so a large preset (millions of Gaussians, hundreds of views) is just options;
on CUDA it renders with gsplat, elsewhere with the pure-torch reference rasterizer (same arguments, same rules).
"""

from __future__ import annotations

import colorsys
import math
import os
import shutil
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Callable, Iterator, Literal

import numpy as np
import torch
import tyro
from PIL import Image
from tqdm import tqdm

from odin_ns.colmap.writer import write_colmap_model
from odin_ns.rendering import rasterize_fn, resolve_renderer

SCENE_GAUSSIANS_FILE = "scene_gaussians.npz"
IMAGES_DIR = "images"
COLMAP_MODEL_DIR = Path("sparse") / "0"

OBJECT_RADIUS = 1.0
"""Bounding radius of each region's object (world units)."""
REGION_SPACING = 6.0
"""Distance between neighbouring region centres: far enough that a ring view of one region mostly misses the others."""
GROUND_CHECKER_SIZE = REGION_SPACING / 4
"""Side of the ground's checker squares, large enough to stay readable after the Gaussians blur them."""
RING_DISTANCE = 3.6
"""Distance of ring cameras from the object they look at."""
RING_ELEVATIONS_DEG = (35.0, 50.0)
"""Ring cameras alternate between these elevations so each object is seen from two heights; steep enough that the
objects of other regions mostly stay above the top of the image."""
WIDE_ELEVATION_DEG = 50.0
FOCAL_PER_WIDTH = 1.1
"""Focal length in pixels divided by image width (about 49 degrees horizontal field of view)."""
GAUSSIAN_SIZE_PER_SPACING = 0.6
"""In-plane standard deviation of a surface Gaussian relative to the mean spacing of Gaussians on its surface."""
GAUSSIAN_FLATNESS = 0.2
"""Thickness of a surface Gaussian along the surface normal relative to its in-plane size."""
MIN_VISIBLE_ALPHA = 0.5
"""A point counts as observed only where the rendered pixel is mostly opaque."""
DEPTH_TOLERANCE = 0.03
"""A point is unoccluded when its camera depth is within this fraction of the rendered expected depth."""
NEAR_PLANE = 0.05
"""Points closer to a camera than this (in depth) are not projected."""
RENDER_BATCH_VIEWS = 8
"""Views per reference-rasterizer call: batching amortizes its per-call overhead (about 5x faster)."""
GSPLAT_RENDER_BATCH_VIEWS = 16
"""Views per gsplat call: ~1M Gaussians at 1280x720 take well under 1 GiB a view, and bigger batches keep the GPU
busy between the host-side steps (observations, PNG hand-off)."""
FAST_PNG_MIN_PIXELS = 1 << 18
"""From this image size on, PNGs use zlib level 1: at 1280x720, level 6 (PIL's default) is several times slower
and would dominate generation; smaller images keep the default so their bytes stay as they were."""
FAST_PNG_COMPRESS_LEVEL = 1


def resolve_device(name: str) -> torch.device:
    """"auto" -> cuda when available, else cpu; any other name is parsed by torch."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(name)
    except RuntimeError as error:
        raise ValueError(f"device must be 'auto' or a torch device, got {name!r}") from error


@dataclass(frozen=True)
class DemoSceneOptions:
    """Size and randomness of the demo scene; every size grows the work linearly."""

    num_views: int = 48
    """Number of rendered views (about 1/8 are wide views of the whole scene, the rest ring views of one region)."""
    width: int = 128
    """Image width in pixels."""
    height: int = 96
    """Image height in pixels."""
    num_regions: int = 4
    """Number of separate objects, laid out on a grid on the ground."""
    gaussians_per_region: int = 768
    """Gaussians on each object's surface."""
    ground_gaussians_per_region: int = 64
    """Ground-plane Gaussians in each region's ground cell."""
    num_points3d: int = 4000
    """Candidate 3D points sampled on the Gaussians; those seen by fewer than two views are dropped."""
    wide_view_fraction: float = 0.125
    """Fraction of views that look at the whole scene from above instead of at one region."""
    dense_region_factor: int = 1
    """Even-numbered regions get this many times gaussians_per_region (and so about that many times the 3D points
    per region): their views cost more to render than the others', an uneven workload for the overlap benchmarks
    (``odin-bench bench --alternating-cost``); 1: every region alike."""
    seed: int = 0
    """Seed of everything random; a seed gives byte-identical output (for a given device)."""
    max_track_length: int = 0
    """Observations kept per 3D point in the COLMAP model, evenly spread over its views (0: all). Training reads
    only the points, but nerfstudio parses every observation in Python at startup."""
    device: str = "auto"
    """Torch device to render on: "auto" is cuda when available (gsplat's rasterizer), else cpu (the reference)."""

    def __post_init__(self) -> None:
        resolve_device(self.device)  # fail early on a bad device name
        for name in ("num_views", "num_regions", "gaussians_per_region", "num_points3d"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.width < 8 or self.height < 8:
            raise ValueError(f"image size must be at least 8x8 pixels, got {self.width}x{self.height}")
        if self.max_track_length < 0 or self.max_track_length == 1:
            raise ValueError(f"max_track_length must be 0 (all) or at least 2, got {self.max_track_length}")
        if self.ground_gaussians_per_region < 0:
            raise ValueError(f"ground_gaussians_per_region must be >= 0, got {self.ground_gaussians_per_region}")
        if self.dense_region_factor < 1:
            raise ValueError(f"dense_region_factor must be at least 1, got {self.dense_region_factor}")
        if not 0.0 <= self.wide_view_fraction <= 1.0:
            raise ValueError(f"wide_view_fraction must be in [0, 1], got {self.wide_view_fraction}")


LARGER_DEMO_SCENE = DemoSceneOptions(
    num_views=240,
    width=1280,
    height=720,
    num_regions=8,
    gaussians_per_region=131_072,
    ground_gaussians_per_region=4096,
    num_points3d=1_300_000,
    max_track_length=8,
)
"""Benchmark-sized preset: about 1.08M Gaussians, 240 views at 1280x720 (needs CUDA: too slow for the CPU reference).
splatfacto starts with one Gaussian per COLMAP point, so num_points3d is chosen for >= 1M points seen by 2+ views."""
PRESETS = {"default": DemoSceneOptions(), "large": LARGER_DEMO_SCENE}
"""`odin-ns demo-scene --preset NAME` starts from these options."""


@dataclass
class SceneGaussians:
    """The ground-truth scene in plain arrays: actual scales and opacities (not log / logit), RGB colours in [0, 1]."""

    means: np.ndarray  # [N, 3] float32
    scales: np.ndarray  # [N, 3] float32, standard deviations along the rotated axes
    quats: np.ndarray  # [N, 4] float32, unit quaternions (w, x, y, z)
    opacities: np.ndarray  # [N] float32 in (0, 1)
    colors: np.ndarray  # [N, 3] float32 in [0, 1]
    region_ids: np.ndarray  # [N] int32: the object a Gaussian belongs to, or the region cell a ground Gaussian lies in
    is_ground: np.ndarray  # [N] bool
    region_centers: np.ndarray  # [R, 3] float32, centre of each object

    def save(self, path: Path) -> None:
        np.savez(path, **vars(self))

    @classmethod
    def load(cls, path: Path) -> SceneGaussians:
        if not Path(path).is_file():
            raise FileNotFoundError(f"no scene Gaussians file at {path}")
        with np.load(path) as arrays:
            return cls(**{field.name: arrays[field.name] for field in fields(cls)})


@dataclass
class DemoCameras:
    """Shared pinhole intrinsics and one world-to-camera pose per view (OpenCV convention)."""

    intrinsics: np.ndarray  # [3, 3]
    world_to_cameras: np.ndarray  # [V, 4, 4]
    target_regions: np.ndarray  # [V] region a ring view looks at, -1 for wide views


def region_layout(num_regions: int) -> np.ndarray:
    """Ground-plane (x, z) centres of the regions on a near-square grid centred at the origin, [R, 2]."""
    columns = math.ceil(math.sqrt(num_regions))
    rows = math.ceil(num_regions / columns)
    index = np.arange(num_regions)
    x = (index % columns - (columns - 1) / 2) * REGION_SPACING
    z = (index // columns - (rows - 1) / 2) * REGION_SPACING
    return np.stack([x, z], axis=1)


def _sphere_surface(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    normals = rng.standard_normal((count, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    return normals * OBJECT_RADIUS, normals, 4 * math.pi * OBJECT_RADIUS**2


def _box_surface(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    half = OBJECT_RADIUS / math.sqrt(3)  # corners on the bounding sphere
    face = rng.integers(0, 6, count)
    axis, sign = face // 2, np.where(face % 2 == 0, 1.0, -1.0)
    points = rng.uniform(-half, half, (count, 3))
    points[np.arange(count), axis] = sign * half
    normals = np.zeros((count, 3))
    normals[np.arange(count), axis] = sign
    return points, normals, 6 * (2 * half) ** 2


def _torus_surface(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """A torus lying on the ground (axis vertical)."""
    tube = 0.3 * OBJECT_RADIUS
    ring = OBJECT_RADIUS - tube
    around, across = rng.uniform(0, 2 * math.pi, (2, count))
    normals = np.stack(
        [np.cos(across) * np.cos(around), np.sin(across), np.cos(across) * np.sin(around)], axis=1
    )
    centres = np.stack([ring * np.cos(around), np.zeros(count), ring * np.sin(around)], axis=1)
    return centres + tube * normals, normals, 4 * math.pi**2 * ring * tube


OBJECT_SHAPES: tuple[Callable[[int, np.random.Generator], tuple[np.ndarray, np.ndarray, float]], ...] = (
    _sphere_surface,
    _box_surface,
    _torus_surface,
)
"""Region r gets shape r % len(OBJECT_SHAPES): each returns surface points, outward normals and the surface area."""


def _quats_from_normals(normals: np.ndarray) -> np.ndarray:
    """Unit quaternions (w, x, y, z) rotating +z onto each normal, so a Gaussian's thin axis follows the surface."""
    quats = np.stack([1.0 + normals[:, 2], -normals[:, 1], normals[:, 0], np.zeros(len(normals))], axis=1)
    norms = np.linalg.norm(quats, axis=1, keepdims=True)
    facing_down = norms[:, 0] < 1e-6  # normal is -z: any half turn about a horizontal axis
    quats[facing_down] = (0.0, 1.0, 0.0, 0.0)
    norms[facing_down] = 1.0
    return quats / norms


def _surface_scales(count: int, area: float) -> np.ndarray:
    in_plane = GAUSSIAN_SIZE_PER_SPACING * math.sqrt(area / max(count, 1))
    return np.tile([in_plane, in_plane, GAUSSIAN_FLATNESS * in_plane], (count, 1))


def _region_color(region: int, num_regions: int) -> np.ndarray:
    hue = (region / num_regions + 0.05) % 1.0
    return np.array(colorsys.hsv_to_rgb(hue, 0.75, 0.95))


def build_scene_gaussians(options: DemoSceneOptions) -> SceneGaussians:
    """The procedural scene: one textured object per region plus a checkered ground plane of flat Gaussians."""
    rng = np.random.default_rng(options.seed)
    centres_xz = region_layout(options.num_regions)
    means, normals, scales, colors, region_ids, centres = [], [], [], [], [], []
    for region, (x, z) in enumerate(centres_xz):
        count = options.gaussians_per_region * (options.dense_region_factor if region % 2 == 0 else 1)
        local, region_normals, area = OBJECT_SHAPES[region % len(OBJECT_SHAPES)](count, rng)
        centre = np.array([x, -local[:, 1].max(), z])  # rest the object on the ground (up is -y)
        stripe_direction = rng.standard_normal(3)
        stripe_direction /= np.linalg.norm(stripe_direction)
        stripes = np.sin(local @ stripe_direction * (3 * math.pi / OBJECT_RADIUS)) > 0
        shade = np.where(stripes, 1.0, 0.55)[:, None] + rng.uniform(-0.04, 0.04, (count, 1))
        means.append(local + centre)
        normals.append(region_normals)
        scales.append(_surface_scales(count, area))
        colors.append(_region_color(region, options.num_regions) * shade)
        region_ids.append(np.full(count, region))
        centres.append(centre)

    num_objects = sum(len(region_means) for region_means in means)
    ground_count = options.ground_gaussians_per_region * options.num_regions
    extent_min = centres_xz.min(axis=0) - REGION_SPACING / 2
    extent_max = centres_xz.max(axis=0) + REGION_SPACING / 2
    ground_xz = extent_min + _r2_sequence(ground_count, rng) * (extent_max - extent_min)
    ground_means = np.stack([ground_xz[:, 0], np.zeros(ground_count), ground_xz[:, 1]], axis=1)
    checker = np.floor(ground_xz / GROUND_CHECKER_SIZE).sum(axis=1) % 2 == 0
    ground_area = float(np.prod(extent_max - extent_min))
    means.append(ground_means)
    normals.append(np.tile([0.0, -1.0, 0.0], (ground_count, 1)))
    scales.append(_surface_scales(ground_count, ground_area))
    colors.append(np.where(checker[:, None], [0.72, 0.70, 0.66], [0.45, 0.44, 0.42]))
    nearest_region = np.argmin(((ground_xz[:, None, :] - centres_xz[None]) ** 2).sum(-1), axis=1)
    region_ids.append(nearest_region)

    opacities = np.concatenate([rng.uniform(0.85, 1.0, num_objects), np.full(ground_count, 0.95)])
    return SceneGaussians(
        means=np.concatenate(means).astype(np.float32),
        scales=np.concatenate(scales).astype(np.float32),
        quats=_quats_from_normals(np.concatenate(normals)).astype(np.float32),
        opacities=opacities.astype(np.float32),
        colors=np.clip(np.concatenate(colors), 0.0, 1.0).astype(np.float32),
        region_ids=np.concatenate(region_ids).astype(np.int32),
        is_ground=np.arange(num_objects + ground_count) >= num_objects,
        region_centers=np.array(centres, dtype=np.float32),
    )


def _r2_sequence(count: int, rng: np.random.Generator) -> np.ndarray:
    """Evenly spread points in the unit square (Roberts' R2 sequence, randomly shifted), [count, 2]; unlike
    uniform samples they leave no holes in the ground."""
    plastic = 1.32471795724474602596
    steps = np.array([1 / plastic, 1 / plastic**2])
    return (rng.uniform(0, 1, 2) + np.arange(1, count + 1)[:, None] * steps) % 1.0


def look_at(eyes: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """World-to-camera matrices [V,4,4] (OpenCV axes) for cameras at `eyes` looking at `targets`, image down = +y."""
    forward = targets - eyes
    forward /= np.linalg.norm(forward, axis=1, keepdims=True)
    down = np.array([0.0, 1.0, 0.0]) - forward[:, 1:2] * forward
    down /= np.linalg.norm(down, axis=1, keepdims=True)
    right = np.cross(down, forward)
    rotations = np.stack([right, down, forward], axis=1)
    world_to_cameras = np.tile(np.eye(4), (len(eyes), 1, 1))
    world_to_cameras[:, :3, :3] = rotations
    world_to_cameras[:, :3, 3] = -np.einsum("vij,vj->vi", rotations, eyes)
    return world_to_cameras


def _orbit_eyes(targets: np.ndarray, azimuths: np.ndarray, elevations: np.ndarray, distance: float) -> np.ndarray:
    offsets = np.stack(
        [np.cos(elevations) * np.cos(azimuths), -np.sin(elevations), np.cos(elevations) * np.sin(azimuths)], axis=1
    )
    return targets + distance * offsets


def build_cameras(options: DemoSceneOptions, region_centers: np.ndarray) -> DemoCameras:
    """Rings of views around each region plus a few wide views of the whole layout spread through the sequence."""
    rng = np.random.default_rng([options.seed, 1])
    focal = FOCAL_PER_WIDTH * options.width
    intrinsics = np.array([[focal, 0, options.width / 2], [0, focal, options.height / 2], [0, 0, 1]])

    num_wide = min(options.num_views, round(options.num_views * options.wide_view_fraction))
    num_ring = options.num_views - num_wide
    # Ring views are grouped by region, as a capture walking from object to object would be.
    ring_sizes = np.full(len(region_centers), num_ring // len(region_centers))
    ring_sizes[: num_ring % len(region_centers)] += 1
    ring_regions = np.repeat(np.arange(len(region_centers)), ring_sizes)
    ring_slot = np.arange(num_ring) - np.repeat(np.cumsum(ring_sizes) - ring_sizes, ring_sizes)
    ring_size = ring_sizes[ring_regions]
    ring_azimuths = 2 * math.pi * (ring_slot / ring_size + rng.uniform(0, 1, len(region_centers))[ring_regions])
    ring_elevations = np.radians(np.array(RING_ELEVATIONS_DEG))[ring_slot % len(RING_ELEVATIONS_DEG)]
    ring_targets = region_centers[ring_regions] + rng.uniform(-0.1, 0.1, (num_ring, 3)) * OBJECT_RADIUS
    ring_eyes = _orbit_eyes(ring_targets, ring_azimuths, ring_elevations, RING_DISTANCE)

    layout_centre = region_centers.mean(axis=0)
    layout_radius = np.linalg.norm(region_centers - layout_centre, axis=1).max() + 1.5 * OBJECT_RADIUS
    half_fov = math.atan(min(options.width, options.height) / (2 * focal))
    wide_distance = layout_radius / math.sin(half_fov)
    wide_azimuths = 2 * math.pi * (np.arange(num_wide) / max(num_wide, 1) + rng.uniform(0, 1))
    wide_targets = np.tile(layout_centre, (num_wide, 1))
    wide_eyes = _orbit_eyes(
        wide_targets, wide_azimuths, np.full(num_wide, math.radians(WIDE_ELEVATION_DEG)), wide_distance
    )

    # Spread wide views evenly through the sequence so every train/eval split gets some.
    is_wide = np.zeros(options.num_views, dtype=bool)
    if num_wide:
        is_wide[np.linspace(0, options.num_views - 1, num_wide).round().astype(int)] = True
    eyes, targets = np.empty((options.num_views, 3)), np.empty((options.num_views, 3))
    eyes[is_wide], targets[is_wide] = wide_eyes, wide_targets
    eyes[~is_wide], targets[~is_wide] = ring_eyes, ring_targets
    target_regions = np.full(options.num_views, -1)
    target_regions[~is_wide] = ring_regions
    return DemoCameras(intrinsics=intrinsics, world_to_cameras=look_at(eyes, targets), target_regions=target_regions)


def sample_surface_points(
    scene: SceneGaussians, count: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Points on the Gaussians' surfaces (within one standard deviation in their plane) and their 8-bit colours."""
    chosen = rng.integers(0, len(scene.means), count)
    w, x, y, z = scene.quats[chosen].T.astype(np.float64)
    first_axis = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], axis=1)
    second_axis = np.stack([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], axis=1)
    radius = np.sqrt(rng.uniform(0, 1, count))
    angle = rng.uniform(0, 2 * math.pi, count)
    scales = scene.scales[chosen].astype(np.float64)
    offsets = (radius * np.cos(angle) * scales[:, 0])[:, None] * first_axis
    offsets += (radius * np.sin(angle) * scales[:, 1])[:, None] * second_axis
    points = scene.means[chosen] + offsets
    colors = np.round(scene.colors[chosen] * 255).astype(np.uint8)
    return points, colors


def observe_points(
    points: np.ndarray | torch.Tensor,
    world_to_camera: np.ndarray | torch.Tensor,
    intrinsics: np.ndarray | torch.Tensor,
    alpha: np.ndarray | torch.Tensor,
    expected_depth: np.ndarray | torch.Tensor,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices and pixel coordinates of the points a view really sees: in front of the camera, inside the image,
    on an opaque pixel and not occluded (camera depth matches the rendered expected depth at that pixel).

    Numpy arrays on the CPU; float64 torch tensors on the render's device for ~1M points x hundreds of views on a GPU
    (the CPU keeps numpy: torch's matmul rounds differently and the scene's bytes would change). Returns numpy."""
    xp = torch if isinstance(points, torch.Tensor) else np
    height, width = alpha.shape
    camera_points = points @ world_to_camera[:3, :3].T + world_to_camera[:3, 3]
    depth = camera_points[:, 2]
    in_front = depth > NEAR_PLANE
    pixels = (camera_points @ intrinsics.T)[:, :2] / xp.where(in_front, depth, 1.0)[:, None]
    inside = in_front & (pixels[:, 0] >= 0) & (pixels[:, 0] < width) & (pixels[:, 1] >= 0) & (pixels[:, 1] < height)
    candidates = xp.where(inside)[0]
    floored = xp.floor(pixels[candidates])
    column, row = (floored.long() if xp is torch else floored.astype(int)).T
    rendered_depth = expected_depth[row, column]
    if xp is torch:
        rendered_depth = rendered_depth.double()
    visible = (alpha[row, column] > MIN_VISIBLE_ALPHA) & (
        abs(depth[candidates] - rendered_depth) < DEPTH_TOLERANCE * rendered_depth
    )
    observed = candidates[visible]
    if xp is torch:
        return observed.cpu().numpy(), pixels[observed].cpu().numpy()
    return observed, pixels[observed]


def frustum_fractions(
    means: np.ndarray, world_to_cameras: np.ndarray, intrinsics: np.ndarray, width: int, height: int
) -> np.ndarray:
    """[V]: fraction of the Gaussians whose centre projects inside each view (in front of the near plane), without
    rendering. Odin's scoped exchange pays off while views see well under half of the scene."""
    fractions = np.empty(len(world_to_cameras))
    for view, world_to_camera in enumerate(world_to_cameras.astype(means.dtype)):
        camera_points = means @ world_to_camera[:3, :3].T + world_to_camera[:3, 3]
        depth = camera_points[:, 2]
        in_front = depth > NEAR_PLANE
        u = (intrinsics[0, 0] * camera_points[:, 0] + intrinsics[0, 2] * depth) / np.where(in_front, depth, 1.0)
        v = (intrinsics[1, 1] * camera_points[:, 1] + intrinsics[1, 2] * depth) / np.where(in_front, depth, 1.0)
        fractions[view] = np.mean(in_front & (u >= 0) & (u < width) & (v >= 0) & (v < height))
    return fractions


@torch.no_grad()
def render_views(
    scene_tensors: dict[str, torch.Tensor],
    world_to_cameras: np.ndarray,
    intrinsics: np.ndarray,
    width: int,
    height: int,
    rasterize: Callable = rasterize_fn("reference"),
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """RGBA uint8 [V,H,W,4] (straight alpha), alpha [V,H,W] and expected depth [V,H,W] on the scene's device;
    `rasterize` is gsplat's `rasterization` or the reference (same arguments). The 8-bit image is made on the
    device so only a quarter of the float data crosses to the host."""
    device = scene_tensors["means"].device
    colors, alphas, _ = rasterize(
        **scene_tensors,
        viewmats=torch.from_numpy(world_to_cameras).float().to(device),
        Ks=torch.from_numpy(intrinsics).float().to(device).expand(len(world_to_cameras), 3, 3).contiguous(),
        width=width,
        height=height,
        render_mode="RGB+ED",
    )
    alpha = alphas[..., 0]
    rgb = torch.clamp(colors[..., :3] / torch.clamp(alpha, min=1e-6)[..., None], 0.0, 1.0)
    rgba = torch.round(torch.cat([rgb, alpha[..., None]], dim=-1) * 255).to(torch.uint8)
    return rgba, alpha, colors[..., 3]


class PhaseTimer:
    """Wall-clock seconds per generation phase, printed at the end so a slow phase on a new machine is obvious."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

    def summary(self) -> str:
        parts = ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in self.seconds.items())
        return f"{parts}; total {sum(self.seconds.values()):.1f} s"


def _save_png(path: Path, rgba: np.ndarray) -> None:
    large = rgba.shape[0] * rgba.shape[1] >= FAST_PNG_MIN_PIXELS
    Image.fromarray(rgba).save(path, **({"compress_level": FAST_PNG_COMPRESS_LEVEL} if large else {}))


def _write_scene_files(directory: Path, options: DemoSceneOptions) -> str:
    """Render the scene into `directory` (images, COLMAP model, ground truth); return a summary with timings."""
    timer = PhaseTimer()
    with timer("build"):
        scene = build_scene_gaussians(options)
        cameras = build_cameras(options, scene.region_centers)
        points, point_colors = sample_surface_points(
            scene, options.num_points3d, np.random.default_rng([options.seed, 2])
        )
        device = resolve_device(options.device)
        renderer = resolve_renderer("auto", device)
        rasterize = rasterize_fn(renderer)
        batch_views = GSPLAT_RENDER_BATCH_VIEWS if renderer == "gsplat" else RENDER_BATCH_VIEWS
        scene_tensors = {
            name: torch.from_numpy(getattr(scene, name)).to(device)
            for name in ("means", "quats", "scales", "opacities", "colors")
        }
        on_host = device.type == "cpu"
        if not on_host:  # observations on the device: float64 like the numpy path
            points_device = torch.from_numpy(points).to(device)
            world_to_cameras_device = torch.from_numpy(cameras.world_to_cameras).to(device)
            intrinsics_device = torch.from_numpy(cameras.intrinsics).to(device)
    (directory / IMAGES_DIR).mkdir(parents=True)
    image_names = [f"frame_{view + 1:05d}.png" for view in range(options.num_views)]
    observation_views, observation_points, observation_xys = [], [], []
    workers = min(16, os.cpu_count() or 1)
    pending: list[Future] = []
    with ThreadPoolExecutor(max_workers=workers) as png_writers, tqdm(
        total=options.num_views, desc=f"Rendering demo scene ({renderer} on {device})", unit="view"
    ) as progress:
        for first_view in range(0, options.num_views, batch_views):
            batch = range(first_view, min(first_view + batch_views, options.num_views))
            with timer("render"):
                rgbas, alphas, expected_depths = render_views(
                    scene_tensors,
                    cameras.world_to_cameras[batch.start : batch.stop],
                    cameras.intrinsics,
                    options.width,
                    options.height,
                    rasterize=rasterize,
                )
                rgbas = rgbas.cpu().numpy()
            with timer("write images"):  # hand-off; waits only when the writers fall behind by a few batches
                for view, rgba in zip(batch, rgbas):
                    pending.append(png_writers.submit(_save_png, directory / IMAGES_DIR / image_names[view], rgba))
                while len(pending) > 2 * max(workers, batch_views):
                    pending.pop(0).result()
            with timer("observe"):
                for view, alpha, expected_depth in zip(batch, alphas, expected_depths):
                    if on_host:
                        observed, pixels = observe_points(
                            points, cameras.world_to_cameras[view], cameras.intrinsics, alpha.numpy(),
                            expected_depth.numpy(),
                        )
                    else:
                        observed, pixels = observe_points(
                            points_device, world_to_cameras_device[view], intrinsics_device, alpha, expected_depth
                        )
                    observation_views.append(np.full(len(observed), view, dtype=np.int32))
                    observation_points.append(observed.astype(np.int32))
                    observation_xys.append(pixels)
            progress.update(len(batch))
        with timer("write images"):
            for future in pending:
                future.result()
    del scene_tensors, alphas, expected_depths

    with timer("write colmap"):
        num_points3d = write_colmap_model(
            directory / COLMAP_MODEL_DIR,
            intrinsics=cameras.intrinsics,
            width=options.width,
            height=options.height,
            world_to_cameras=cameras.world_to_cameras,
            image_names=image_names,
            points_xyz=points,
            points_rgb=point_colors,
            observation_views=np.concatenate(observation_views),
            observation_points=np.concatenate(observation_points),
            observation_xys=np.concatenate(observation_xys).astype(np.float64),
            max_track_length=options.max_track_length or None,
        )
    with timer("write ground truth"):
        scene.save(directory / SCENE_GAUSSIANS_FILE)
    visibility = frustum_fractions(
        scene.means[:: max(1, len(scene.means) // 100_000)],  # a strided sample: the fraction, not the exact count
        cameras.world_to_cameras,
        cameras.intrinsics,
        options.width,
        options.height,
    )
    return (
        f"{options.num_views} views of {options.width}x{options.height} px, {len(scene.means)} Gaussians "
        f"in {options.num_regions} regions, {num_points3d} 3D points seen by 2+ views; a view's frustum holds "
        f"{visibility.mean():.1%} of the Gaussians on average (max {visibility.max():.1%}); "
        f"rendered with {renderer} on {device}\nTiming: {timer.summary()}"
    )


def write_demo_scene(out_dir: Path, options: DemoSceneOptions, overwrite: bool = False) -> Path:
    """Write the scene to a temporary sibling directory, then move it into place, so a failure leaves nothing
    half-written. Only an earlier demo scene may be replaced, and only with `overwrite`."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        if not out_dir.is_dir():
            raise FileExistsError(f"{out_dir} exists and is not a directory")
        if any(out_dir.iterdir()):
            if not overwrite:
                raise FileExistsError(f"{out_dir} is not empty; pass --overwrite to replace the scene in it")
            if not (out_dir / SCENE_GAUSSIANS_FILE).is_file():
                raise FileExistsError(f"{out_dir} is not empty and is not a demo scene; refusing to replace it")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        summary = _write_scene_files(staging, options)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    print(f"Wrote demo scene to {out_dir}: {summary}")
    return out_dir


def generate_demo_scene(out_dir: Path | str, *, overwrite: bool = False, **options) -> Path:
    """Generate the demo scene in `out_dir` (options: the fields of `DemoSceneOptions`); return `out_dir`."""
    return write_demo_scene(Path(out_dir), DemoSceneOptions(**options), overwrite=overwrite)


@dataclass(frozen=True, kw_only=True)
class DemoSceneCommand(DemoSceneOptions):
    """Write a small synthetic scene in COLMAP layout (images/, sparse/0/) to train on without downloading data."""

    out_dir: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="OUT_DIR")]
    """Directory to create (must be missing or empty, unless --overwrite)."""
    overwrite: bool = False
    """Replace an existing demo scene in out_dir."""
    preset: Literal["default", "large"] = "default"
    """Starting sizes: "default" (small, CPU-friendly) or "large" (LARGER_DEMO_SCENE: ~1.08M Gaussians, 240 views
    at 1280x720, needs CUDA). Options given on the command line with a non-default value override the preset."""

    def options(self) -> DemoSceneOptions:
        """The preset with this command's non-default options applied."""
        defaults, preset = DemoSceneOptions(), PRESETS[self.preset]
        return DemoSceneOptions(
            **{
                field.name: getattr(self, field.name)
                if getattr(self, field.name) != getattr(defaults, field.name)
                else getattr(preset, field.name)
                for field in fields(DemoSceneOptions)
            }
        )

    def main(self) -> None:
        try:
            write_demo_scene(self.out_dir, self.options(), overwrite=self.overwrite)
        except FileExistsError as error:
            raise SystemExit(f"error: {error}") from None
