"""The presized (Gaussian, tile) intersection buffers of ``odin_ns.rendering.presized``, before their sort: each
Gaussian's tile count, then the slots.

A flat Gaussian ``i`` (camera-major, in [0, C * N)) covers the tiles of its rectangle (``tile_rectangles``: gsplat's
rule). With ``ends`` the inclusive cumulative sum of the counts, it owns the run of slots ``[ends[i] - count_i,
ends[i])``, the runs laid end to end in Gaussian order and cut at ``capacity``. Its slots hold its rectangle's tiles
row-major, keyed ``(camera << (32 + tile_bits)) | (tile << 32) | depth_bits`` (the depth's float32 bits,
sign-extended from int32 as gsplat's kernel does) with flat id ``i``; the slots past the last run hold
``padding_key`` and flat id 0.

On Triton each step is one launch that computes every Gaussian's rectangle from its centre and radius itself: the
counts (``tile_intersection_counts``), then the fill, which writes each Gaussian's run in place (gsplat's
``isect_tiles`` does the same, one thread per Gaussian) and the padding. A training step is host-bound, and the
rectangles in torch are about twenty launches per render. The torch fallback (CPU tensors, ``backend="torch"``)
builds the rectangles in torch and the slots' owners with ``repeat_interleave``; both give the same counts, keys and
ids in the same slots, bit for bit.
"""

from __future__ import annotations

import torch

from odin_ns.kernels.dispatch import resolve_backend, triton_kernels


def tile_rectangles(
    means2d: torch.Tensor, radii: torch.Tensor, tile_size: int, tile_width: int, tile_height: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per flat Gaussian [C * N]: its first tile (x, y) and its rectangle's width and height in tiles (int64 [C * N,
    2] each), and its pair count (int64 [C * N], 0 unless radius > 0): gsplat's rule, in the same float32 operations
    as its kernel."""
    radius = radii.reshape(-1).to(means2d.dtype) / tile_size
    centre = means2d.reshape(-1, 2) / tile_size
    low, high = torch.floor(centre - radius[:, None]).long(), torch.ceil(centre + radius[:, None]).long()
    lowest = torch.stack((low[:, 0].clamp(0, tile_width), low[:, 1].clamp(0, tile_height)), 1)
    highest = torch.stack((high[:, 0].clamp(0, tile_width), high[:, 1].clamp(0, tile_height)), 1)
    span = highest - lowest
    return lowest, span, torch.where(radii.reshape(-1) > 0, span[:, 0] * span[:, 1], 0)


def _check_projection(means2d: torch.Tensor, radii: torch.Tensor) -> None:
    if means2d.dim() != 3 or means2d.shape[-1] != 2 or means2d.dtype != torch.float32:
        raise ValueError(f"means2d must be float32 [C, N, 2], got {means2d.dtype} {tuple(means2d.shape)}")
    if radii.shape != means2d.shape[:2] or radii.dtype != torch.int32 or radii.device != means2d.device:
        raise ValueError(f"radii must be int32 {tuple(means2d.shape[:2])} on {means2d.device}, got {radii.dtype} "
                         f"{tuple(radii.shape)} on {radii.device}")
    if radii.numel() == 0:
        raise ValueError("need at least one Gaussian")


def tile_intersection_counts(
    means2d: torch.Tensor, radii: torch.Tensor, tile_size: int, tile_width: int, tile_height: int,
    backend: str = "auto",
) -> torch.Tensor:
    """int64 [C * N]: each flat Gaussian's pair count (``tile_rectangles``) for projected centres ``means2d`` [C, N, 2]
    float32 and ``radii`` [C, N] int32 (gsplat's projection)."""
    _check_projection(means2d, radii)
    if resolve_backend(backend, radii) == "triton":
        return triton_kernels().tile_intersection_counts(means2d.contiguous(), radii.contiguous(), tile_size,
                                                         tile_width, tile_height)
    return tile_rectangles(means2d, radii, tile_size, tile_width, tile_height)[2]


def fill_tile_intersections(
    means2d: torch.Tensor,
    radii: torch.Tensor,
    ends: torch.Tensor,
    depths: torch.Tensor,
    tile_size: int,
    tile_width: int,
    tile_height: int,
    tile_bits: int,
    padding_key: int,
    capacity: int,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unsorted intersection keys [capacity] int64 and flat Gaussian ids [capacity] int32.

    ``means2d`` [C, N, 2] float32 and ``radii`` [C, N] int32: the projection the rectangles come from; ``ends``
    [C * N] int64: the inclusive cumulative sum of their ``tile_intersection_counts``; ``depths`` [C, N] float32.
    """
    _check_projection(means2d, radii)
    n_cameras, n_gaussians = radii.shape
    n_flat = n_cameras * n_gaussians
    if ends.shape != (n_flat,) or ends.dtype != torch.int64 or ends.device != radii.device:
        raise ValueError(f"ends must be int64 ({n_flat},) on {radii.device}, got {ends.dtype} {tuple(ends.shape)} on "
                         f"{ends.device}")
    if depths.shape != radii.shape or depths.dtype != torch.float32:
        raise ValueError(f"depths must be float32 {tuple(radii.shape)} (their bits are the keys' low half), got "
                         f"{depths.dtype} {tuple(depths.shape)}")
    if capacity < 1:
        raise ValueError(f"need at least one slot, got {capacity}")
    depth_bits = depths.reshape(-1).contiguous().view(torch.int32)
    if resolve_backend(backend, depths) == "triton":
        return triton_kernels().fill_tile_intersections(
            means2d.contiguous(), radii.contiguous(), ends.contiguous(), depth_bits, n_gaussians, tile_size,
            tile_width, tile_height, tile_bits, padding_key, capacity,
        )
    lowest, span, counts = tile_rectangles(means2d, radii, tile_size, tile_width, tile_height)
    device = depths.device
    # Slot s belongs to the Gaussian whose rectangle's run of slots holds it, the runs laid end to end in Gaussian
    # order; what passes ``capacity`` is cut off and the slots after the last run go to a padding owner (``n_flat``).
    kept_ends = ends.clamp(max=capacity)
    kept = torch.diff(kept_ends, prepend=kept_ends.new_zeros(1))
    runs = torch.cat((kept, capacity - kept_ends[-1:]))
    owner = torch.repeat_interleave(torch.arange(n_flat + 1, device=device), runs, output_size=capacity)
    real = owner < n_flat
    owner = owner.clamp(max=n_flat - 1)
    slots = torch.arange(capacity, device=device)
    index_in_rect = slots - (ends - counts)[owner]
    rect_width = span[owner, 0].clamp(min=1)
    row = torch.div(index_in_rect, rect_width, rounding_mode="floor")
    tile = (lowest[owner, 1] + row) * tile_width + lowest[owner, 0] + index_in_rect - row * rect_width
    camera = torch.div(owner, n_gaussians, rounding_mode="floor")
    keys = (camera << (32 + tile_bits)) | (tile << 32) | depth_bits.long()[owner]
    keys = torch.where(real, keys, padding_key)
    flat_ids = torch.where(real, owner, 0).int()
    return keys, flat_ids
