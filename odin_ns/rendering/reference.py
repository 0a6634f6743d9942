"""Pure-torch, differentiable 3D Gaussian rasterizer with gsplat 1.4.0's ``rasterization`` contract.

Why it exists: gsplat's rasterizer is CUDA-only, so training, tests and CI on machines without a GPU need a
renderer that takes the same arguments, follows the same compositing rules and returns the same ``meta``
fields gsplat's densification strategy reads (``means2d`` with a true gradient, ``radii``, ...). Projection and
spherical harmonics reuse gsplat's own torch implementations so the two backends agree on every number that
is not an order-of-summation rounding.

Compositing is tile-based and vectorized (no Python loop over Gaussians or pixels):

1. every visible Gaussian is paired with each tile its 3-sigma square overlaps (gsplat's ``isect_tiles`` rule),
   pairs ordered by (camera, tile, depth);
2. without autograd, sigmas are evaluated densely for [tile pixels, pairs] in chunks of whole tiles; reading the
   hits (sigma >= 0, alpha >= 1/255) out pixel-major yields one depth-ordered run per pixel without a sort;
3. the per-pixel transmittance (an exclusive cumulative sum of log(1 - alpha), in float64 so long runs keep
   their precision) drops the hits after a pixel saturates (gsplat stops before the Gaussian that would bring
   the transmittance to 1e-4 or below);
4. the remaining hits are blended front to back by an autograd Function whose backward is gsplat's analytic
   one (checked against finite differences and against gsplat's CUDA kernels in the tests).
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Tuple

import torch
from gsplat.cuda._torch_impl import _fully_fused_projection, _quat_scale_to_covar_preci, _spherical_harmonics
from torch import Tensor

ALPHA_MIN = 1.0 / 255.0
"""gsplat skips a Gaussian at a pixel when its alpha is below this."""
ALPHA_MAX = 0.999
"""gsplat clamps alpha to this so that 1 - alpha never reaches zero."""
TRANSMITTANCE_MIN = 1e-4
"""gsplat stops blending a pixel before the Gaussian that would bring its transmittance to this or below."""
RENDER_MODES = ("RGB", "D", "ED", "RGB+D", "RGB+ED")
CANDIDATES_PER_CHUNK = 1 << 20
"""(pair, pixel) sigma evaluations per chunk of tiles: bounds the memory of the search for hits."""


def rasterize_reference(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    colors: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    radius_clip: float = 0.0,
    eps2d: float = 0.3,
    sh_degree: Optional[int] = None,
    packed: bool = False,
    tile_size: int = 16,
    backgrounds: Optional[Tensor] = None,
    render_mode: str = "RGB",
    sparse_grad: bool = False,
    absgrad: bool = False,
    rasterize_mode: str = "classic",
    channel_chunk: int = 32,
    distributed: bool = False,
    camera_model: str = "pinhole",
    covars: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor, Dict]:
    """Render Gaussians [N] into C images; same arguments, outputs and ``meta`` layout as gsplat's ``rasterization``.

    Args follow ``gsplat.rendering.rasterization`` (quats are wxyz and need not be normalized; colors are [N, D]
    or [C, N, D], or SH coefficients [N, K, 3] or [C, N, K, 3] when ``sh_degree`` is given). Results are always
    unpacked ([C, N] per-Gaussian meta, ``gaussian_ids`` None). ``sparse_grad`` and ``channel_chunk`` only change
    gsplat's memory layout, not its results, so they are accepted and have no effect here. ``packed=True``,
    ``absgrad=True`` and ``distributed=True`` are not supported and raise ValueError.

    Returns:
        render_colors [C, H, W, D'] (D' = D, 1 for "D"/"ED", D + 1 for "RGB+D"/"RGB+ED"), render_alphas
        [C, H, W, 1] and meta with ``means2d`` [C, N, 2] (a non-leaf tensor: ``retain_grad()`` it before
        backward to read d loss / d means2d), ``radii`` [C, N] int32 (0 = not rendered), ``depths`` [C, N],
        ``conics`` [C, N, 3], ``opacities`` [C, N], ``tiles_per_gauss`` [C, N], ``camera_ids`` and
        ``gaussian_ids`` (None), ``width``, ``height``, ``tile_size``, ``tile_width``, ``tile_height``, ``n_cameras``.
    """
    _check_supported(packed=packed, absgrad=absgrad, distributed=distributed, rasterize_mode=rasterize_mode)
    n_cameras = _check_shapes(means, quats, scales, opacities, colors, viewmats, Ks, sh_degree, covars)
    if render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be one of {RENDER_MODES}, got {render_mode!r}")
    if width <= 0 or height <= 0 or tile_size <= 0:
        raise ValueError(f"width, height and tile_size must be positive, got {width}, {height}, {tile_size}")

    if covars is None:
        covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=False, triu=False)
    radii, means2d, depths, conics, compensations = _project_in_depth_range(
        means, covars, viewmats, Ks, width, height, eps2d, near_plane, far_plane, rasterize_mode == "antialiased",
        camera_model,
    )
    radii = torch.where(radii > radius_clip, radii, torch.zeros_like(radii))
    opacities = opacities.repeat(n_cameras, 1)
    if compensations is not None:
        opacities = opacities * compensations

    colors = _view_colors(colors, means, viewmats, sh_degree)
    if backgrounds is not None and backgrounds.shape != (n_cameras, colors.shape[-1]):
        raise ValueError(f"backgrounds must be [C, D] = {[n_cameras, colors.shape[-1]]}, got {list(backgrounds.shape)}")
    if render_mode in ("RGB+D", "RGB+ED"):
        colors = torch.cat([colors, depths[..., None]], dim=-1)
        if backgrounds is not None:
            backgrounds = torch.cat([backgrounds, backgrounds.new_zeros(n_cameras, 1)], dim=-1)
    elif render_mode in ("D", "ED"):
        colors = depths[..., None]
        if backgrounds is not None:
            backgrounds = backgrounds.new_zeros(n_cameras, 1)

    render_colors, render_alphas, tiles_per_gauss = rasterize_to_pixels_reference(
        means2d, conics, colors, opacities, radii, depths, width, height, tile_size, backgrounds
    )
    if render_mode in ("ED", "RGB+ED"):
        expected_depth = render_colors[..., -1:] / render_alphas.clamp(min=1e-10)
        render_colors = torch.cat([render_colors[..., :-1], expected_depth], dim=-1)

    meta = {
        "camera_ids": None,
        "gaussian_ids": None,
        "radii": radii,
        "means2d": means2d,
        "depths": depths,
        "conics": conics,
        "opacities": opacities,
        "tiles_per_gauss": tiles_per_gauss,
        "tile_width": math.ceil(width / tile_size),
        "tile_height": math.ceil(height / tile_size),
        "width": width,
        "height": height,
        "tile_size": tile_size,
        "n_cameras": n_cameras,
    }
    return render_colors, render_alphas, meta


def _project_in_depth_range(
    means: Tensor,
    covars: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    eps2d: float,
    near_plane: float,
    far_plane: float,
    calc_compensations: bool,
    camera_model: str,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Optional[Tensor]]:
    """gsplat's torch projection, camera by camera, with every Gaussian outside the near and far planes projected from
    a stand-in point on the camera's axis, and culled (radius 0) as gsplat culls it.

    Projecting a Gaussian on the camera plane divides by its depth of 0: its outputs are infinite, and although
    culling gives them no gradient, the backward multiplies that zero by the infinite partials and the Gaussian's
    gradient is NaN (gsplat's CUDA kernels never project what they cull). The stand-in keeps every partial finite,
    so a culled Gaussian's gradient is exactly zero; and every camera still projects all N rows, so the sums of the
    backward (into the view matrices, for the camera optimizer) have one shape whatever is culled: runs whose culled
    Gaussians differ (quality-first reading rows not yet published) add the same terms the same way."""
    per_camera = []
    for camera in range(viewmats.shape[0]):
        view = viewmats[camera : camera + 1]
        rotation, translation = view[0, :3, :3].detach(), view[0, :3, 3].detach()
        depth = means.detach() @ rotation[2] + translation[2]
        in_range = (depth > near_plane) & (depth < far_plane)
        on_axis = rotation.T @ (torch.tensor([0.0, 0.0, 1.0], dtype=means.dtype, device=means.device) - translation)
        radii, *rest = _fully_fused_projection(
            torch.where(in_range[:, None], means, on_axis), covars, view, Ks[camera : camera + 1], width, height,
            eps2d=eps2d, near_plane=near_plane, far_plane=far_plane, calc_compensations=calc_compensations,
            camera_model=camera_model,
        )
        per_camera.append((torch.where(in_range, radii[0], torch.zeros_like(radii[0])), *(part[0] if part is not None
                                                                                          else None for part in rest)))
    radii, means2d, depths, conics, compensations = zip(*per_camera)
    return (torch.stack(radii), torch.stack(means2d), torch.stack(depths), torch.stack(conics),
            None if compensations[0] is None else torch.stack(compensations))


def rasterize_to_pixels_reference(
    means2d: Tensor,
    conics: Tensor,
    colors: Tensor,
    opacities: Tensor,
    radii: Tensor,
    depths: Tensor,
    width: int,
    height: int,
    tile_size: int = 16,
    backgrounds: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """Alpha-composite projected Gaussians front to back with gsplat's rules; differentiable in every float input.

    Args:
        means2d [C, N, 2] (pixel coordinates, pixel centres at +0.5), conics [C, N, 3] (upper triangle of the
        inverse 2D covariance), colors [C, N, D], opacities [C, N], radii [C, N] (only radii > 0 are drawn),
        depths [C, N] (blending order, nearest first), width, height, tile_size, backgrounds [C, D] or None.

    Returns:
        render_colors [C, H, W, D], render_alphas [C, H, W, 1] and tiles_per_gauss [C, N] (int32: how many
        tiles each Gaussian was tested against).
    """
    grid = _TileGrid(means2d.shape[0], width, height, tile_size)
    pair_gauss, pair_tile, tiles_per_gauss = _intersect_tiles(means2d, radii, depths, grid)
    n_channels = colors.shape[-1]
    # rows (mean x, mean y, conic a, b, c, opacity): one gather and one scatter-add per hit (at most 6 columns,
    # which torch gathers several times faster than wider rows)
    geometry = torch.cat([means2d.reshape(-1, 2), conics.reshape(-1, 3), opacities.reshape(-1, 1)], 1)
    with torch.no_grad():
        hits = _find_hits(pair_gauss, pair_tile, geometry, grid)
        transmittance = _exclusive_transmittance(hits.alphas, hits.run_starts())
        blended = transmittance * (1.0 - hits.alphas) > TRANSMITTANCE_MIN
        if not blended.all():  # drop the hits behind saturated pixels (a suffix of each pixel's run)
            blended = torch.nonzero(blended).squeeze(1)
            hits = _Hits(*(column.index_select(0, blended) for column in hits))
            transmittance = transmittance.index_select(0, blended)

    slot_values = _BlendHits.apply(geometry, colors.reshape(-1, n_channels), hits, transmittance, grid.n_slots)
    slot_colors, slot_alphas = slot_values.split([n_channels, 1], 1)
    render_colors = grid.to_images(slot_colors)
    render_alphas = grid.to_images(slot_alphas)
    if backgrounds is not None:
        render_colors = render_colors + (1.0 - render_alphas) * backgrounds[:, None, None, :]
    return render_colors, render_alphas, tiles_per_gauss


class _TileGrid:
    """Pixel slots of C images cut into square tiles; slot = (camera * tiles_per_camera + tile) * tile_area + pixel."""

    def __init__(self, n_cameras: int, width: int, height: int, tile_size: int):
        self.n_cameras, self.width, self.height, self.tile_size = n_cameras, width, height, tile_size
        self.tiles_x = math.ceil(width / tile_size)
        self.tiles_y = math.ceil(height / tile_size)
        self.tiles_per_camera = self.tiles_x * self.tiles_y
        self.tile_area = tile_size * tile_size
        self.n_slots = n_cameras * self.tiles_per_camera * self.tile_area

    def tile_origins(self, tiles: Tensor) -> Tensor:
        """[..., 2] (x, y) pixel coordinates of the top-left corner of global tile ids [...]."""
        tile = tiles % self.tiles_per_camera
        row = torch.div(tile, self.tiles_x, rounding_mode="floor")
        return torch.stack([tile - row * self.tiles_x, row], dim=-1) * self.tile_size

    def pixel_offsets(self, dtype: torch.dtype, device: torch.device) -> Tensor:
        """[tile_area, 2] pixel-centre offsets inside a tile, as gsplat samples pixels (+0.5)."""
        pixel = torch.arange(self.tile_area, device=device)
        offsets = torch.stack([pixel % self.tile_size, torch.div(pixel, self.tile_size, rounding_mode="floor")], -1)
        return offsets.to(dtype) + 0.5

    def to_images(self, slot_values: Tensor) -> Tensor:
        """Rearrange per-slot values [n_slots, D] into images [C, H, W, D] (padding pixels of edge tiles dropped)."""
        size, depth = self.tile_size, slot_values.shape[-1]
        tiled = slot_values.view(self.n_cameras, self.tiles_y, self.tiles_x, size, size, depth)
        rows = tiled.permute(0, 1, 3, 2, 4, 5)  # [C, tile row, pixel row, tile column, pixel column, D]
        images = rows.reshape(self.n_cameras, self.tiles_y * size, self.tiles_x * size, depth)
        return images[:, : self.height, : self.width].contiguous()


@torch.no_grad()
def _intersect_tiles(means2d: Tensor, radii: Tensor, depths: Tensor, grid: _TileGrid) -> Tuple[Tensor, Tensor, Tensor]:
    """(Gaussian, tile) pairs sorted by (camera, tile, depth), as gsplat's ``isect_tiles`` + sort build them.

    A Gaussian is tested against every tile its square of half-side ``radius`` touches; ties in depth keep
    input order (gsplat's radix sort is stable too). Returns flat Gaussian ids (into C * N), global tile ids and
    tiles_per_gauss [C, N] int32.
    """
    n_gaussians = means2d.shape[1]
    visible = torch.nonzero(radii.reshape(-1) > 0).squeeze(1)
    visible = visible[torch.sort(depths.reshape(-1)[visible], stable=True).indices]
    centre = means2d.reshape(-1, 2)[visible] / grid.tile_size
    half_side = (radii.reshape(-1)[visible] / grid.tile_size).to(centre.dtype)[:, None]
    tile_limits = torch.tensor([grid.tiles_x, grid.tiles_y], device=means2d.device)
    lowest = torch.minimum(torch.floor(centre - half_side).long().clamp(min=0), tile_limits)
    span = torch.minimum(torch.ceil(centre + half_side).long().clamp(min=0), tile_limits) - lowest

    tile_counts = span[:, 0] * span[:, 1]
    tiles_per_gauss = torch.zeros(radii.numel(), dtype=torch.int32, device=radii.device)
    tiles_per_gauss[visible] = tile_counts.int()

    pair_source = torch.repeat_interleave(torch.arange(len(visible), device=means2d.device), tile_counts)
    first_pair = torch.cumsum(tile_counts, 0) - tile_counts
    index_in_rect = torch.arange(len(pair_source), device=means2d.device) - first_pair[pair_source]
    rect_width = span[pair_source, 0]
    tile_x = lowest[pair_source, 0] + index_in_rect % rect_width
    tile_y = lowest[pair_source, 1] + torch.div(index_in_rect, rect_width, rounding_mode="floor")
    pair_gauss = visible[pair_source]
    camera = torch.div(pair_gauss, n_gaussians, rounding_mode="floor")
    pair_tile = camera * grid.tiles_per_camera + tile_y * grid.tiles_x + tile_x
    pair_tile, by_tile = torch.sort(pair_tile, stable=True)
    return pair_gauss[by_tile], pair_tile, tiles_per_gauss.view(radii.shape)


class _Hits(NamedTuple):
    """(Gaussian, pixel slot) pairs that blend, grouped by slot, nearest first within a slot."""

    gauss: Tensor
    """flat Gaussian ids (into C * N)"""
    slots: Tensor
    centers: Tensor
    """[hits, 2] pixel centres"""
    alphas: Tensor

    def run_starts(self) -> Tensor:
        """For each hit, the index of the first hit of its slot."""
        positions = torch.arange(len(self.slots), device=self.slots.device)
        starts_run = torch.ones_like(self.slots, dtype=torch.bool)
        starts_run[1:] = self.slots[1:] != self.slots[:-1]
        return torch.where(starts_run, positions, torch.zeros_like(positions)).cummax(0).values


def _find_hits(pair_gauss: Tensor, pair_tile: Tensor, geometry: Tensor, grid: _TileGrid) -> _Hits:
    """All (Gaussian, pixel slot) hits with sigma >= 0 and alpha >= 1/255, each slot's hits contiguous, nearest first.

    Sigmas are evaluated densely for [tile pixels, pairs of a chunk of whole tiles], as sums of per-row and
    per-column terms so each candidate costs three dense operations. Reading the hits out
    pixel-major groups them by (pixel, tile) while keeping the pairs' (tile, depth) order inside a group, so the
    (large) hit list needs no sort. Pixels of edge tiles that lie outside the image are kept: they only fill
    slots that ``to_images`` drops. ``geometry`` rows are (mean x, mean y, conic a, b, c, opacity).
    """
    pixel_offsets = grid.pixel_offsets(geometry.dtype, pair_tile.device)
    axis_offsets = pixel_offsets[: grid.tile_size, 0]
    _, pairs_per_tile = torch.unique_consecutive(pair_tile, return_counts=True)
    hits = []
    for start, end in _chunk_bounds(pairs_per_tile.tolist(), max(1, CANDIDATES_PER_CHUNK // grid.tile_area)):
        gauss, tiles = pair_gauss[start:end], pair_tile[start:end]
        pair_geometry = geometry[gauss]
        origins = grid.tile_origins(tiles).to(geometry.dtype)
        mean_in_tile = pair_geometry[:, 0:2] - origins
        # [tile_size (y), tile_size (x), pairs] by broadcasting a row of dx against a column of dy
        dx = mean_in_tile[:, 0] - axis_offsets[:, None]
        dy = mean_in_tile[:, 1] - axis_offsets[:, None]
        sigmas = _splat_sigmas(dx[None, :, :], dy[:, None, :], pair_geometry[:, 2:5]).reshape(grid.tile_area, -1)
        hit = (sigmas >= 0) & (sigmas <= torch.log(pair_geometry[:, 5] / ALPHA_MIN))
        pixels, pairs = torch.nonzero(hit, as_tuple=True)
        hit_sigmas = sigmas.view(-1).index_select(0, pixels * sigmas.shape[1] + pairs)
        alphas = _alphas_from_sigmas(pair_geometry[:, 5].index_select(0, pairs), hit_sigmas)
        centers = origins.index_select(0, pairs) + pixel_offsets.index_select(0, pixels)
        slots = tiles.index_select(0, pairs) * grid.tile_area + pixels
        hits.append((gauss.index_select(0, pairs), slots, centers, alphas))
    if not hits:  # nothing visible
        return _Hits(pair_gauss, pair_tile, geometry.new_zeros(0, 2), geometry.new_zeros(0))
    return _Hits(*(torch.cat(columns) for columns in zip(*hits)))


def _chunk_bounds(pairs_per_tile: List[int], max_pairs: int) -> List[Tuple[int, int]]:
    """[start, end) pair ranges made of whole tiles, each holding at most ``max_pairs`` pairs (or one tile)."""
    bounds, start, end = [], 0, 0
    for count in pairs_per_tile:
        if end > start and end - start + count > max_pairs:
            bounds.append((start, end))
            start = end
        end += count
    if end > start:
        bounds.append((start, end))
    return bounds


def _splat_sigmas(dx: Tensor, dy: Tensor, conics: Tensor) -> Tensor:
    """gsplat's sigma = 0.5 (a dx^2 + c dy^2) + b dx dy for offsets mean - pixel and conics (a, b, c) [..., 3]."""
    a, b, c = conics.unbind(-1)
    return dx * (0.5 * a * dx + b * dy) + 0.5 * c * dy * dy


def _alphas_from_sigmas(opacities: Tensor, sigmas: Tensor) -> Tensor:
    """gsplat's alpha = min(0.999, opacity * exp(-sigma))."""
    return torch.clamp(opacities * torch.exp(-sigmas), max=ALPHA_MAX)


def _exclusive_transmittance(alphas: Tensor, run_starts: Tensor) -> Tensor:
    """Product of (1 - alpha) over the earlier hits of the same pixel (hits grouped by pixel, nearest first).

    exp of a per-pixel exclusive cumulative sum of log(1 - alpha), kept in float64 so it stays exact across
    millions of hits.
    """
    log_transmittance = torch.log(1.0 - alphas)  # alphas <= 0.999; log1p has no vectorized CPU kernel
    before = torch.cumsum(log_transmittance, 0, dtype=torch.float64) - log_transmittance
    return torch.exp((before - before.index_select(0, run_starts)).to(alphas.dtype))


def _exclusive_suffix_sums(values: Tensor, run_starts: Tensor, slots: Tensor, n_slots: int) -> Tensor:
    """Sum of ``values`` over the later hits of the same pixel, in float64 (same layout as above)."""
    values = values.double()
    before = torch.cumsum(values, 0) - values
    totals = values.new_zeros(n_slots).index_add(0, slots, values)
    return totals.index_select(0, slots) - (before - before.index_select(0, run_starts)) - values


class _BlendHits(torch.autograd.Function):
    """Front-to-back blending of the hits into per-slot (colors, alpha), with gsplat's analytic backward.

    Forward sums w_k (color_k, 1) per slot, w_k = alpha_k T_k, from the alphas and transmittances found without
    autograd. Backward differentiates T_k = prod_{j<k} (1 - alpha_j):
    dL/dalpha_k = T_k v_k - sum_{j>k} w_j v_j / (1 - alpha_k) with v_k = dL/dw_k, then alpha = min(0.999,
    opacity exp(-sigma)) down to means2d, conics and opacities (no gradient where alpha is clamped), and
    scatter-adds per Gaussian. Doing this by hand avoids autograd's bookkeeping on millions of hits.
    """

    @staticmethod
    def forward(ctx, geometry: Tensor, colors: Tensor, hits: _Hits, transmittance: Tensor, n_slots: int) -> Tensor:
        weights = (hits.alphas * transmittance)[:, None]
        hit_colors = colors.index_select(0, hits.gauss)
        blended = weights * torch.cat([hit_colors, torch.ones_like(weights)], 1)
        ctx.save_for_backward(geometry, colors, *hits, transmittance)
        ctx.n_slots = n_slots
        return colors.new_zeros(n_slots, colors.shape[1] + 1).index_add(0, hits.slots, blended)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_slots: Tensor):
        geometry, colors, gauss, slots, centers, alphas, transmittance = ctx.saved_tensors
        hits = _Hits(gauss, slots, centers, alphas)
        grad_hit_colors, grad_hit_alphas = grad_slots.index_select(0, slots).split([colors.shape[1], 1], 1)
        weights = alphas * transmittance
        grad_weights = (grad_hit_colors * colors.index_select(0, gauss)).sum(1) + grad_hit_alphas.squeeze(1)
        later = _exclusive_suffix_sums(weights * grad_weights, hits.run_starts(), slots, ctx.n_slots)
        grad_alphas = transmittance * grad_weights - later.to(alphas.dtype) / (1.0 - alphas)
        grad_alphas = torch.where(alphas < ALPHA_MAX, grad_alphas, torch.zeros_like(grad_alphas))
        grad_sigmas = -grad_alphas * alphas
        half_grad_sigmas = 0.5 * grad_sigmas

        means_x, means_y, a, b, c, opacities = geometry.index_select(0, gauss).unbind(1)
        dx, dy = means_x - centers[:, 0], means_y - centers[:, 1]
        grad_hit_geometry = torch.stack(
            [
                grad_sigmas * (a * dx + b * dy),
                grad_sigmas * (b * dx + c * dy),
                half_grad_sigmas * dx * dx,
                grad_sigmas * dx * dy,
                half_grad_sigmas * dy * dy,
                grad_alphas * alphas / opacities,
            ]
        )
        grad_geometry = geometry.new_zeros(geometry.shape[::-1]).index_add(1, gauss, grad_hit_geometry).t()
        grad_colors = torch.zeros_like(colors).index_add(0, gauss, weights[:, None] * grad_hit_colors)
        return grad_geometry, grad_colors, None, None, None


def _view_colors(colors: Tensor, means: Tensor, viewmats: Tensor, sh_degree: Optional[int]) -> Tensor:
    """Per-camera colors [C, N, D]: given colors broadcast, or SH evaluated toward each camera (gsplat's +0.5, >= 0)."""
    n_cameras = viewmats.shape[0]
    if sh_degree is None:
        return colors.expand(n_cameras, -1, -1) if colors.dim() == 2 else colors
    coeffs = colors.expand(n_cameras, -1, -1, -1) if colors.dim() == 3 else colors
    camera_centers = torch.inverse(viewmats)[:, :3, 3]
    directions = means[None, :, :] - camera_centers[:, None, :]
    return torch.clamp_min(_spherical_harmonics(sh_degree, directions, coeffs) + 0.5, 0.0)


def _check_supported(packed: bool, absgrad: bool, distributed: bool, rasterize_mode: str) -> None:
    """Reject gsplat options whose results this renderer cannot reproduce."""
    if packed:
        raise ValueError("the reference rasterizer renders unpacked only: pass packed=False (meta is [C, N])")
    if absgrad:
        raise ValueError("absgrad=True is not supported by the reference rasterizer: use absgrad=False")
    if distributed:
        raise ValueError("distributed=True is not supported by the reference rasterizer")
    if rasterize_mode not in ("classic", "antialiased"):
        raise ValueError(f"rasterize_mode must be 'classic' or 'antialiased', got {rasterize_mode!r}")


def _check_shapes(
    means: Tensor,
    quats: Optional[Tensor],
    scales: Optional[Tensor],
    opacities: Tensor,
    colors: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    sh_degree: Optional[int],
    covars: Optional[Tensor],
) -> int:
    """Validate argument shapes like gsplat's asserts, as ValueErrors naming the argument; return C."""
    if means.dim() != 2 or means.shape[1] != 3:
        raise ValueError(f"means must be [N, 3], got {list(means.shape)}")
    n_gaussians = means.shape[0]
    if viewmats.dim() != 3 or viewmats.shape[1:] != (4, 4):
        raise ValueError(f"viewmats must be [C, 4, 4], got {list(viewmats.shape)}")
    n_cameras = viewmats.shape[0]
    expected = {"opacities": (opacities, (n_gaussians,)), "Ks": (Ks, (n_cameras, 3, 3))}
    if covars is None:
        expected.update(quats=(quats, (n_gaussians, 4)), scales=(scales, (n_gaussians, 3)))
    else:
        expected.update(covars=(covars, (n_gaussians, 3, 3)))
    for name, (tensor, shape) in expected.items():
        if tensor is None or tuple(tensor.shape) != shape:
            got = None if tensor is None else list(tensor.shape)
            raise ValueError(f"{name} must have shape {list(shape)}, got {got}")
    if sh_degree is None:
        if colors.shape[:-1] not in ((n_gaussians,), (n_cameras, n_gaussians)):
            raise ValueError(f"colors must be [N, D] or [C, N, D] without sh_degree, got {list(colors.shape)}")
    else:
        if colors.shape[:-2] not in ((n_gaussians,), (n_cameras, n_gaussians)) or colors.shape[-1] != 3:
            raise ValueError(f"SH colors must be [N, K, 3] or [C, N, K, 3], got {list(colors.shape)}")
        if (sh_degree + 1) ** 2 > colors.shape[-2]:
            needed = (sh_degree + 1) ** 2
            raise ValueError(f"sh_degree {sh_degree} needs {needed} SH coefficients, got {colors.shape[-2]}")
    return n_cameras
