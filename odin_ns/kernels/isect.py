"""The fill of presized (Gaussian, tile) intersection buffers (``odin_ns.rendering.presized``), before their sort.

Every flat Gaussian ``i`` (camera-major, in [0, C * N)) with a tile rectangle of ``counts[i]`` tiles owns the run of
slots ``[ends[i] - counts[i], ends[i])``, the runs laid end to end in Gaussian order and cut at ``capacity``. Its
slots hold its rectangle's tiles row-major, keyed ``(camera << (32 + tile_bits)) | (tile << 32) | depth_bits`` (the
depth's float32 bits, sign-extended from int32 as gsplat's kernel does) with flat id ``i``; the slots past the last
run hold ``padding_key`` and flat id 0.

The Triton kernel writes each Gaussian's run in place (gsplat's ``isect_tiles`` does the same, one thread per
Gaussian), in one launch that also writes the padding. The torch fallback (CPU tensors, ``backend="torch"``) builds
the slots' owners with ``repeat_interleave`` and derives every slot from its owner; both give the same keys and ids
in the same slots, bit for bit.
"""

from __future__ import annotations

import torch

from odin_ns.kernels.dispatch import resolve_backend, triton_kernels


def fill_tile_intersections(
    lowest: torch.Tensor,
    span: torch.Tensor,
    counts: torch.Tensor,
    ends: torch.Tensor,
    depths: torch.Tensor,
    tile_width: int,
    tile_bits: int,
    padding_key: int,
    capacity: int,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unsorted intersection keys [capacity] int64 and flat Gaussian ids [capacity] int32.

    ``lowest`` and ``span`` [C * N, 2] int64: each flat Gaussian's first tile (x, y) and its rectangle's width and
    height in tiles; ``counts`` [C * N] int64: its pairs (0 for a Gaussian with no rectangle, whatever its span);
    ``ends`` [C * N] int64: the inclusive cumulative sum of ``counts``; ``depths`` [C, N] float32.
    """
    n_cameras, n_gaussians = depths.shape
    n_flat = n_cameras * n_gaussians
    for name, tensor, shape in (("lowest", lowest, (n_flat, 2)), ("span", span, (n_flat, 2)),
                                ("counts", counts, (n_flat,)), ("ends", ends, (n_flat,))):
        if tensor.shape != shape or tensor.dtype != torch.int64 or tensor.device != depths.device:
            raise ValueError(f"{name} must be int64 {shape} on {depths.device}, got {tensor.dtype} "
                             f"{tuple(tensor.shape)} on {tensor.device}")
    if depths.dtype != torch.float32:
        raise ValueError(f"depths must be float32 (their bits are the keys' low half), got {depths.dtype}")
    if n_flat == 0 or capacity < 1:
        raise ValueError(f"need at least one Gaussian and one slot, got {n_cameras}x{n_gaussians} and {capacity}")
    depth_bits = depths.reshape(-1).contiguous().view(torch.int32)
    if resolve_backend(backend, depths) == "triton":
        return triton_kernels().fill_tile_intersections(
            lowest.contiguous(), span.contiguous(), counts.contiguous(), ends.contiguous(), depth_bits,
            n_gaussians, tile_width, tile_bits, padding_key, capacity,
        )
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
