"""Per-call choice between the Triton kernels and the plain-torch fallback.

Triton is used for CUDA tensors (and for CPU tensors under ``TRITON_INTERPRET=1``, which is how CI exercises the
GPU code path); the torch fallback serves CPU tensors and is the reference the kernels are tested against.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from types import ModuleType

import torch

BACKENDS = ("auto", "triton", "torch")
BACKEND_ENV_VAR = "ODIN_KERNELS"


@functools.cache
def triton_available() -> bool:
    """True when the triton package is installed (it is optional on platforms without a wheel)."""
    return importlib.util.find_spec("triton") is not None


def triton_interpreting() -> bool:
    """True when Triton kernels run in its CPU interpreter, so CPU tensors can take the Triton path."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def resolve_backend(backend: str, tensor: torch.Tensor) -> str:
    """Return "triton" or "torch" for an operation on ``tensor``.

    An explicit ``backend`` wins; ``"auto"`` defers to the ``ODIN_KERNELS`` env var, then picks Triton whenever it
    can run on ``tensor``'s device.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        backend = os.environ.get(BACKEND_ENV_VAR, "auto")
        if backend not in BACKENDS:
            raise ValueError(f"{BACKEND_ENV_VAR} must be one of {BACKENDS[1:]}, got {backend!r}")
    triton_runs_here = triton_available() and (tensor.is_cuda or triton_interpreting())
    if backend == "auto":
        return "triton" if triton_runs_here else "torch"
    if backend == "triton" and not triton_runs_here:
        raise ValueError(
            "Triton kernels need the triton package and CUDA tensors (or TRITON_INTERPRET=1); "
            f"got a {tensor.device} tensor"
        )
    return backend


def triton_kernels() -> ModuleType:
    """Import the Triton kernel module on first use, so CPU-only runs never import triton."""
    from odin_ns.kernels import triton_impl

    return triton_impl
