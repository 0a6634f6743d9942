"""Replica checks: every rank must hold bit-identical Gaussians and optimizer state after a barrier.

``fingerprint`` hashes a tensor's bits on its device (int64 arithmetic that wraps, each word weighted by its
position), so comparing ranks costs one small collective and catches any flipped bit or permuted row; NaNs with the
same bits compare equal, so a NaN every rank shares is not mistaken for divergence. ``digests`` are SHA-256 of the
bytes, for a record of a run's final state that other runs and ranks can be compared with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import torch

from odin_ns.comm.context import DistContext

_MULTIPLIER = 0x9E3779B97F4A7C15 - 2**64
"""Odd 64-bit constant (golden-ratio hashing) as a signed int64: position weights that spread every word's bits."""


class ReplicaDivergenceError(RuntimeError):
    """Ranks that must hold identical Gaussians and optimizer state (after a barrier) do not."""


def fingerprint(tensor: torch.Tensor) -> torch.Tensor:
    """0-d int64 on ``tensor``'s device: a hash of its bits (dtype-agnostic, bitwise sensitive)."""
    data = tensor.detach().contiguous().reshape(-1)
    if data.element_size() == 8:
        words = data.view(torch.int64)
    else:
        data = data.view(torch.uint8)
        padding = (-data.numel()) % 4
        if padding:
            data = torch.cat([data, data.new_zeros(padding)])
        words = data.view(torch.int32).to(torch.int64)
    positions = torch.arange(1, words.numel() + 1, device=words.device, dtype=torch.int64)
    return (words * (positions * _MULTIPLIER + 1)).sum()


def optimizer_tensors(params: Mapping[str, torch.Tensor], state_of) -> dict[str, torch.Tensor]:
    """``params`` and every tensor of their optimizer state (moments, step count), named ``name`` and
    ``name.key``; ``state_of(name)`` is the parameter's optimizer state dict."""
    tensors = {}
    for name, param in params.items():
        tensors[name] = param
        for key, value in sorted(state_of(name).items()):
            if isinstance(value, torch.Tensor):
                tensors[f"{name}.{key}"] = value
    return tensors


def verify_replicas(context: DistContext, tensors: Mapping[str, torch.Tensor]) -> None:
    """Raise ReplicaDivergenceError unless every rank holds bitwise the same ``tensors``."""
    if context.world_size == 1:
        return
    local = torch.stack([fingerprint(tensor).to(context.device) for tensor in tensors.values()])
    equal = context.all_equal(local, "replica check").tolist()
    diverged = [name for name, same in zip(tensors, equal) if not same]
    if diverged:
        raise ReplicaDivergenceError(f"rank {context.rank}: {diverged} differ between ranks after a barrier")


def digests(tensors: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """SHA-256 of each tensor's dtype, shape and bytes."""
    out = {}
    for name, tensor in tensors.items():
        data = tensor.detach().cpu().contiguous()
        digest = hashlib.sha256(f"{data.dtype}{tuple(data.shape)}".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
        out[name] = digest.hexdigest()
    return out
