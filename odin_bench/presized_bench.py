"""Benchmark of the presized tile intersections against gsplat's ``isect_tiles`` (prints a markdown table).

    python -m odin_bench.cli bench-presized                          # GPU: 0.3M, 1M, 3M visible Gaussians at 1280x720
    python -m odin_bench.cli bench-presized --device cpu --sizes 2000   # smoke test (the reference renderer's pairs)

Screen-space Gaussians are uniform over the image with log-normal radii (median ``radius_px``), the shape of a
projected scene. Both columns build the sorted (camera, tile, depth) keys and Gaussian ids and encode the tile
offsets: gsplat's sized by its host read of the count, the presized ones into ``1 + headroom`` times the count,
rounded as the budget rounds, by ``presized_isect_tiles`` with the backend training gets (``auto``: the Triton fill of
the slots on CUDA, the torch fill on the CPU; ``ODIN_KERNELS=torch`` times the torch fill on CUDA; the header names
the one timed). "latency" is launch to result; "host" is what the issuing thread spends per call in
back-to-back calls, which for gsplat includes waiting for its count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import tyro
from tqdm import tqdm

from odin_bench.kernels_bench import Timer, describe, print_table
from odin_ns.kernels import resolve_backend
from odin_ns.rendering.presized import ROUND_TO, presized_isect_tiles, tile_key_bits


@dataclass
class PresizedBenchCommand:
    """Time the presized tile intersections against gsplat's, at several numbers of visible Gaussians."""

    device: str = "cuda"
    """Device to run on ("cpu" only as a smoke test: gsplat's column is then the reference renderer's pairs)."""
    sizes: tuple[int, ...] = (300_000, 1_000_000, 3_000_000)
    """Visible Gaussians per camera."""
    width: int = 1280
    height: int = 720
    radius_px: float = 4.0
    """Median radius on screen, in pixels."""
    headroom: float = 0.25
    """Slots beyond the count, as a fraction of it (the budget's default)."""
    repeats: int = 20
    """Timed repetitions per measurement (the median is reported)."""
    seed: int = 0

    def main(self) -> None:
        device = torch.device(self.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda requested but CUDA is not available; use --device cpu for a smoke test")
        generator = torch.Generator(device=device).manual_seed(self.seed)
        timer = Timer(device, self.repeats)
        tiles_x, tiles_y = -(-self.width // 16), -(-self.height // 16)
        rows = []
        for n in tqdm(self.sizes, desc="presized intersections", unit="size"):
            means2d = torch.rand(1, n, 2, device=device, generator=generator)
            means2d *= torch.tensor([self.width, self.height], device=device, dtype=means2d.dtype)
            radii = torch.exp(torch.randn(1, n, device=device, generator=generator) * 0.6)
            radii = (radii * self.radius_px).ceil().int()
            depths = torch.rand(1, n, device=device, generator=generator) + 0.5
            gsplat_way, encode_offsets = _gsplat_intersections(device, means2d, radii, depths, tiles_x, tiles_y)
            count = int(presized_isect_tiles(means2d, radii, depths, 16, tiles_x, tiles_y, 1)[3].sum())
            capacity = max(ROUND_TO, -(-int(count * (1 + self.headroom)) // ROUND_TO) * ROUND_TO)

            def presized_way():
                _, keys, _, _ = presized_isect_tiles(means2d, radii, depths, 16, tiles_x, tiles_y, capacity)
                return encode_offsets(keys, tiles_x, tiles_y + 1)

            gsplat_us, presized_us = timer(gsplat_way), timer(presized_way)
            rows.append({
                "visible Gaussians": n, "pairs": count, "slots": capacity,
                "gsplat latency (us)": f"{gsplat_us:.0f}", "presized latency (us)": f"{presized_us:.0f}",
                "presized / gsplat": f"{presized_us / gsplat_us:.2f}",
                "gsplat host (us)": f"{timer.host_time(gsplat_way):.0f}",
                "presized host (us)": f"{timer.host_time(presized_way):.0f}",
            })
            if device.type == "cuda":
                torch.cuda.empty_cache()
        print(f"# presized tile intersections against gsplat's on {describe(device)}, {self.width}x{self.height}, "
              f"median radius {self.radius_px} px, headroom {self.headroom}, presized slots filled by "
              f"{resolve_backend('auto', torch.empty(0, device=device))}\n")
        print_table("Sorted tile intersections and offsets for one camera (us, median)", rows)


def _gsplat_intersections(device: torch.device, means2d, radii, depths, tiles_x: int, tiles_y: int):
    """gsplat's sized-by-host-read intersections and its offset encoding on CUDA; on CPU the reference renderer's
    pairs and a searchsorted over the tile ids stand in."""
    if device.type == "cuda":
        from gsplat.cuda._wrapper import isect_offset_encode, isect_tiles

        def gsplat_way():
            _, keys, _ = isect_tiles(means2d, radii, depths, 16, tiles_x, tiles_y)
            return isect_offset_encode(keys, 1, tiles_x, tiles_y)

        return gsplat_way, lambda keys, width, height: isect_offset_encode(keys, 1, width, height)
    from odin_ns.rendering.reference import _intersect_tiles, _TileGrid

    def offsets(keys: torch.Tensor, width: int, height: int) -> torch.Tensor:
        tiles = (keys >> 32) & ((1 << tile_key_bits(1, width, height - 1)) - 1)
        return torch.searchsorted(tiles, torch.arange(width * height, device=keys.device))

    grid = _TileGrid(1, tiles_x * 16, tiles_y * 16, 16)
    return (lambda: _intersect_tiles(means2d, radii, depths, grid)), offsets


def entrypoint() -> None:
    tyro.cli(PresizedBenchCommand).main()


if __name__ == "__main__":
    entrypoint()
