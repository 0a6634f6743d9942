"""Packed Gaussian bitmaps: the representation of read/update scopes.

A scope over N Gaussians is an int32 tensor of ``ceil(N / 32)`` words; bit ``i`` of word ``w`` is Gaussian
``32 * w + i``. Bits at positions >= N are always 0, so word-wise set algebra and popcounts need no masking.
Packing makes a scope 32x smaller than a bool mask (and 256x smaller than an index list of a dense scope), so hazard
checks (popcounts of intersections) stream a few hundred KB even at 10M Gaussians, and an exchanged scope is cheap.
Counts are returned as 0-d device tensors so hazard checks never force a host sync.
"""

from __future__ import annotations

import math

import torch

from odin_ns.kernels.dispatch import resolve_backend, triton_kernels

BITS_PER_WORD = 32


def num_words(n: int) -> int:
    """Number of int32 words in the bitmap of ``n`` Gaussians."""
    return (n + BITS_PER_WORD - 1) // BITS_PER_WORD


def check_bitmap(bitmap: torch.Tensor, name: str = "bitmap", n: int | None = None) -> None:
    """Raise ValueError unless ``bitmap`` is a contiguous 1-D int32 tensor (of ``num_words(n)`` words when given)."""
    if bitmap.dtype != torch.int32 or bitmap.dim() != 1 or not bitmap.is_contiguous():
        raise ValueError(
            f"{name} must be a contiguous 1-D int32 bitmap, got dtype={bitmap.dtype} shape={tuple(bitmap.shape)}"
        )
    if n is not None and bitmap.numel() != num_words(n):
        raise ValueError(f"{name} has {bitmap.numel()} words but {n} Gaussians need {num_words(n)}")


def _check_same_shape(a: torch.Tensor, b: torch.Tensor) -> None:
    check_bitmap(a, "a")
    check_bitmap(b, "b")
    if a.shape != b.shape or a.device != b.device:
        raise ValueError(f"bitmaps differ: {tuple(a.shape)} on {a.device} vs {tuple(b.shape)} on {b.device}")


def _bit_positions(device: torch.device) -> torch.Tensor:
    return torch.arange(BITS_PER_WORD, dtype=torch.int32, device=device)


def _word_bits_torch(bitmap: torch.Tensor) -> torch.Tensor:
    """[W] words -> [W, 32] int32 tensor of 0/1 bits (torch fallback helper)."""
    return (bitmap.unsqueeze(-1) >> _bit_positions(bitmap.device)) & 1


def _popcount_words_torch(words: torch.Tensor) -> torch.Tensor:
    """Per-word popcount (SWAR on the unsigned 32-bit value held in int64, so no intermediate overflows)."""
    x = words.to(torch.int64) & 0xFFFFFFFF
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return ((x * 0x01010101) & 0xFFFFFFFF) >> 24


def pack_bitmap(mask: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Pack a bool mask ``[..., N]`` into an int32 bitmap of ``ceil(N/32)`` words, OR-ing over leading dims.

    E.g. ``pack_bitmap(radii > 0)`` with radii ``[C, N]`` gives the Gaussians visible in any of the C cameras.
    """
    if mask.dtype != torch.bool or mask.dim() == 0:
        raise ValueError(
            f"pack_bitmap needs a bool mask of shape [..., N], got dtype={mask.dtype} shape={tuple(mask.shape)}"
        )
    n = mask.shape[-1]
    rows = mask.reshape(math.prod(mask.shape[:-1]), n)
    if resolve_backend(backend, mask) == "triton":
        return triton_kernels().pack_bitmap(rows.contiguous())
    flat = rows.any(dim=0) if rows.shape[0] > 0 else torch.zeros(n, dtype=torch.bool, device=mask.device)
    padded = torch.zeros(num_words(n) * BITS_PER_WORD, dtype=torch.int32, device=mask.device)
    padded[:n] = flat
    # Distinct bits never carry, so the int32 sum equals the OR (bit 31 contributes INT32_MIN).
    return (padded.view(-1, BITS_PER_WORD) << _bit_positions(mask.device)).sum(dim=1, dtype=torch.int32)


def _binary(a: torch.Tensor, b: torch.Tensor, op: str, backend: str) -> torch.Tensor:
    _check_same_shape(a, b)
    if resolve_backend(backend, a) == "triton":
        return triton_kernels().bitmap_binary(a, b, op)
    if op == "or":
        return a | b
    if op == "and":
        return a & b
    return a & ~b


def bitmap_or(a: torch.Tensor, b: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Union of two scopes."""
    return _binary(a, b, "or", backend)


def bitmap_and(a: torch.Tensor, b: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Intersection of two scopes."""
    return _binary(a, b, "and", backend)


def bitmap_andnot(a: torch.Tensor, b: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Gaussians in ``a`` but not in ``b`` (one fused pass; torch needs a temporary for ``~b``)."""
    return _binary(a, b, "andnot", backend)


def _counts(a: torch.Tensor, b: torch.Tensor, backend: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """0-d tensors (|a|, |a & b|, |a & b| / |a| or 0 when a is empty), from one pass over both bitmaps."""
    _check_same_shape(a, b)
    if resolve_backend(backend, a) == "triton":
        return triton_kernels().bitmap_counts(a, b)
    read_count, shared_count = _popcount_words_torch(a).sum(), _popcount_words_torch(a & b).sum()
    ratio = shared_count.to(torch.float32) / read_count.clamp_min(1).to(torch.float32)
    return read_count, shared_count, torch.where(read_count > 0, ratio, torch.zeros_like(ratio))


def bitmap_count(a: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Number of set bits, as a 0-d int64 tensor on ``a``'s device (no host sync)."""
    check_bitmap(a, "a")
    if resolve_backend(backend, a) == "triton":
        return triton_kernels().bitmap_count(a)
    return _popcount_words_torch(a).sum()


def bitmap_and_count(a: torch.Tensor, b: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """|a ∩ b| as a 0-d int64 tensor: the size of a conflict between two scopes, without materialising ``a & b``."""
    return _counts(a, b, backend)[1]


def overlap_ratio(read: torch.Tensor, update: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """|read ∩ update| / |read| as a 0-d float32 tensor (0 when ``read`` is empty), in one launch on Triton."""
    return _counts(read, update, backend)[2]


def bitmap_to_mask(a: torch.Tensor, n: int, backend: str = "auto") -> torch.Tensor:
    """Unpack a bitmap of ``n`` Gaussians into a bool mask ``[n]``."""
    check_bitmap(a, "a", n)
    if resolve_backend(backend, a) == "triton":
        return triton_kernels().bitmap_to_mask(a, n)
    return _word_bits_torch(a).reshape(-1)[:n].bool()


def bitmap_indices(a: torch.Tensor, n: int, backend: str = "auto") -> torch.Tensor:
    """Ascending int64 indices of the set bits of a bitmap of ``n`` Gaussians.

    The output size is data dependent, so this is the one bitmap op that synchronises with the host.
    """
    check_bitmap(a, "a", n)
    if resolve_backend(backend, a) == "triton":
        return triton_kernels().bitmap_indices(a)
    return torch.nonzero(bitmap_to_mask(a, n, backend="torch")).squeeze(1)
