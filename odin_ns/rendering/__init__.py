"""Renderer backends: gsplat's CUDA rasterizer on GPU, the pure-torch reference elsewhere.

Both take gsplat's ``rasterization`` keyword arguments and return ``(colors, alphas, info)`` with the ``info``
fields gsplat's densification strategy reads, so the model switches backend by function only.
"""

from __future__ import annotations

from typing import Callable, Literal

import torch

RendererName = Literal["auto", "gsplat", "reference"]


def gsplat_cuda_available() -> bool:
    """True when gsplat's compiled CUDA extension can be used on this machine."""
    if not torch.cuda.is_available():
        return False
    from gsplat.cuda._backend import _C

    return _C is not None


def resolve_renderer(requested: RendererName, device: torch.device) -> Literal["gsplat", "reference"]:
    """Pick the backend for ``device``: gsplat for CUDA tensors, the torch reference otherwise."""
    if requested == "reference":
        return "reference"
    on_cuda = device.type == "cuda"
    if requested == "gsplat":
        if not (on_cuda and gsplat_cuda_available()):
            raise ValueError(f"renderer 'gsplat' needs CUDA tensors and gsplat's CUDA extension; got device {device}")
        return "gsplat"
    return "gsplat" if on_cuda and gsplat_cuda_available() else "reference"


def rasterize_fn(renderer: Literal["gsplat", "reference"]) -> Callable:
    """The rasterization function of a resolved backend."""
    if renderer == "gsplat":
        from gsplat.rendering import rasterization

        return rasterization
    from odin_ns.rendering.reference import rasterize_reference

    return rasterize_reference
