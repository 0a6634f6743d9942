"""Embedded synthetic demo scene: a known Gaussian scene rendered into a COLMAP dataset, so training needs no download.

The scene is a few textured objects (spheres, boxes, tori made of flat Gaussians) standing apart on a Gaussian ground
plane. Most cameras sit in a ring around one object and look at it, a few wide views see everything; so each view
sees mostly one region, which is the view locality that Odin's scheduling exploits. The ground-truth Gaussians are
saved beside the dataset (`scene_gaussians.npz`) for benchmarks.

World frame: COLMAP's convention, gravity along +y (up is -y), ground plane at y = 0; cameras are OpenCV
(x right, y down, z forward). Images are RGBA PNGs whose alpha is the rendered opacity, so a trainer with any
background colour sees the true scene (nerfstudio's splatfacto composites RGBA targets onto its background).
Sizes are linear in every option, so a large preset (millions of Gaussians, hundreds of views) is just options.
"""

from __future__ import annotations

import colorsys
import math
import shutil
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Callable

import numpy as np
import torch
import tyro
from PIL import Image
from tqdm import tqdm

from odin_ns.data.colmap_writer import write_colmap_model
from odin_ns.rendering.reference import rasterize_reference

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
"""Views per rasterizer call: batching amortizes the reference rasterizer's per-call overhead (about 5x faster)."""


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
    seed: int = 0
    """Seed of everything random; a seed gives byte-identical output."""

    def __post_init__(self) -> None:
        for name in ("num_views", "num_regions", "gaussians_per_region", "num_points3d"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.width < 8 or self.height < 8:
            raise ValueError(f"image size must be at least 8x8 pixels, got {self.width}x{self.height}")
        if self.ground_gaussians_per_region < 0:
            raise ValueError(f"ground_gaussians_per_region must be >= 0, got {self.ground_gaussians_per_region}")
        if not 0.0 <= self.wide_view_fraction <= 1.0:
            raise ValueError(f"wide_view_fraction must be in [0, 1], got {self.wide_view_fraction}")


LARGER_DEMO_SCENE = DemoSceneOptions(
    num_views=240,
    width=1280,
    height=720,
    num_regions=8,
    gaussians_per_region=131_072,
    ground_gaussians_per_region=4096,
    num_points3d=100_000,
)
"""Benchmark-sized preset: about 1.08M Gaussians, 240 views at 1280x720 (too slow to render with the CPU reference)."""


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
    count = options.gaussians_per_region
    means, normals, scales, colors, region_ids, centres = [], [], [], [], [], []
    for region, (x, z) in enumerate(centres_xz):
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

    num_objects = count * options.num_regions
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
    points: np.ndarray,
    world_to_camera: np.ndarray,
    intrinsics: np.ndarray,
    alpha: np.ndarray,
    expected_depth: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices and pixel coordinates of the points a view really sees: in front of the camera, inside the image,
    on an opaque pixel and not occluded (camera depth matches the rendered expected depth at that pixel)."""
    height, width = alpha.shape
    camera_points = points @ world_to_camera[:3, :3].T + world_to_camera[:3, 3]
    depth = camera_points[:, 2]
    in_front = depth > NEAR_PLANE
    pixels = (camera_points @ intrinsics.T)[:, :2] / np.where(in_front, depth, 1.0)[:, None]
    inside = in_front & (pixels[:, 0] >= 0) & (pixels[:, 0] < width) & (pixels[:, 1] >= 0) & (pixels[:, 1] < height)
    candidates = np.flatnonzero(inside)
    column, row = np.floor(pixels[candidates]).astype(int).T
    rendered_depth = expected_depth[row, column]
    visible = (alpha[row, column] > MIN_VISIBLE_ALPHA) & (
        np.abs(depth[candidates] - rendered_depth) < DEPTH_TOLERANCE * rendered_depth
    )
    observed = candidates[visible]
    return observed, pixels[observed]


@torch.no_grad()
def render_views(
    scene_tensors: dict[str, torch.Tensor],
    world_to_cameras: np.ndarray,
    intrinsics: np.ndarray,
    width: int,
    height: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Straight-alpha RGB [V,H,W,3], alpha [V,H,W] and expected depth [V,H,W] of views rendered on the CPU."""
    colors, alphas, _ = rasterize_reference(
        **scene_tensors,
        viewmats=torch.from_numpy(world_to_cameras).float(),
        Ks=torch.from_numpy(intrinsics).float().expand(len(world_to_cameras), 3, 3),
        width=width,
        height=height,
        render_mode="RGB+ED",
    )
    alpha = alphas[..., 0].numpy()
    rgb = colors[..., :3].numpy() / np.maximum(alpha, 1e-6)[..., None]
    return np.clip(rgb, 0.0, 1.0), alpha, colors[..., 3].numpy()


def _write_scene_files(directory: Path, options: DemoSceneOptions) -> str:
    """Render the scene into `directory` (images, COLMAP model, ground truth); return a one-line summary."""
    scene = build_scene_gaussians(options)
    cameras = build_cameras(options, scene.region_centers)
    points, point_colors = sample_surface_points(scene, options.num_points3d, np.random.default_rng([options.seed, 2]))
    scene_tensors = {
        "means": torch.from_numpy(scene.means),
        "quats": torch.from_numpy(scene.quats),
        "scales": torch.from_numpy(scene.scales),
        "opacities": torch.from_numpy(scene.opacities),
        "colors": torch.from_numpy(scene.colors),
    }
    (directory / IMAGES_DIR).mkdir(parents=True)
    image_names = [f"frame_{view + 1:05d}.png" for view in range(options.num_views)]
    observation_views, observation_points, observation_xys = [], [], []
    with tqdm(total=options.num_views, desc="Rendering demo scene", unit="view") as progress:
        for first_view in range(0, options.num_views, RENDER_BATCH_VIEWS):
            batch = range(first_view, min(first_view + RENDER_BATCH_VIEWS, options.num_views))
            rgbs, alphas, expected_depths = render_views(
                scene_tensors,
                cameras.world_to_cameras[batch.start : batch.stop],
                cameras.intrinsics,
                options.width,
                options.height,
            )
            for view, rgb, alpha, expected_depth in zip(batch, rgbs, alphas, expected_depths):
                rgba = np.round(np.concatenate([rgb, alpha[..., None]], axis=-1) * 255).astype(np.uint8)
                Image.fromarray(rgba).save(directory / IMAGES_DIR / image_names[view])
                observed, pixels = observe_points(
                    points, cameras.world_to_cameras[view], cameras.intrinsics, alpha, expected_depth
                )
                observation_views.append(np.full(len(observed), view))
                observation_points.append(observed)
                observation_xys.append(pixels)
            progress.update(len(batch))

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
    )
    scene.save(directory / SCENE_GAUSSIANS_FILE)
    return (
        f"{options.num_views} views of {options.width}x{options.height} px, {len(scene.means)} Gaussians "
        f"in {options.num_regions} regions, {num_points3d} 3D points seen by 2+ views"
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

    def main(self) -> None:
        try:
            write_demo_scene(self.out_dir, self, overwrite=self.overwrite)
        except FileExistsError as error:
            raise SystemExit(f"error: {error}") from None
