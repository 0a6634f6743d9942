"""Fused SSIM for the training loss: pytorch_msssim's SSIM value in two kernel launches forward and one backward.

pytorch_msssim filters five images (x, y, x^2, y^2, xy) with two grouped 1-D convolutions each, in NCHW, then
combines them in about ten elementwise ops; with autograd's backward that is ~30 launches per loss and, at 800x600,
over half of a training step's GPU time. The Triton path computes the same quantity (the mean over batch, channels
and valid pixels of the SSIM map, 11-tap Gaussian window of sigma 1.5, K = (0.01, 0.03), data range 1, no padding)
straight from the channels-last images the rasterizer produces, and keeps for the backward only the derivatives of
each SSIM value w.r.t. the three filtered statistics that depend on the prediction.

The torch path (CPU tensors, or ``backend="torch"``) *is* pytorch_msssim, called the way the model calls its SSIM
module, so CPU training produces bit-for-bit the numbers it did before.
"""

from __future__ import annotations

import functools

import torch

from odin_ns.kernels.dispatch import resolve_backend

WINDOW_SIZE = 11
WINDOW_SIGMA = 1.5
K1, K2 = 0.01, 0.03
DATA_RANGE = 1.0
C1 = (K1 * DATA_RANGE) ** 2
C2 = (K2 * DATA_RANGE) ** 2


@functools.cache
def gaussian_window(device: torch.device) -> torch.Tensor:
    """pytorch_msssim's 1-D window (``_fspecial_gauss_1d(11, 1.5)``), built by the same float32 ops so its taps are
    the same floats, as a contiguous [11] tensor on ``device`` (cached: the loss needs it every step)."""
    coords = torch.arange(WINDOW_SIZE, dtype=torch.float)
    coords -= WINDOW_SIZE // 2
    window = torch.exp(-(coords**2) / (2 * WINDOW_SIGMA**2))
    window /= window.sum()
    return window.to(device)


def _ssim_torch(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """pytorch_msssim on NCHW views, target first as in ``SSIM(...)(target, predicted)`` (the model's call)."""
    from pytorch_msssim import ssim

    return ssim(
        target.permute(0, 3, 1, 2), predicted.permute(0, 3, 1, 2),
        data_range=DATA_RANGE, size_average=True, win_size=WINDOW_SIZE, win_sigma=WINDOW_SIGMA, K=(K1, K2),
    )


class _FusedSSIM(torch.autograd.Function):
    """Mean SSIM with a gradient for ``predicted`` only: the loss never trains the target image."""

    @staticmethod
    def forward(ctx, predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        from odin_ns.kernels import ssim_triton

        window = gaussian_window(predicted.device)
        mean_ssim, grad_maps = ssim_triton.ssim_forward(
            predicted, target, window, C1, C2, store_grad_maps=ctx.needs_input_grad[0]
        )
        if grad_maps is not None:
            ctx.save_for_backward(predicted, target, window, *grad_maps)
        return mean_ssim

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        from odin_ns.kernels import ssim_triton

        predicted, target, window, *grad_maps = ctx.saved_tensors
        return ssim_triton.ssim_backward(predicted, target, window, tuple(grad_maps), grad_output), None


def fused_ssim(predicted: torch.Tensor, target: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Mean SSIM of channels-last [B, H, W, C] images, as ``pytorch_msssim.ssim(data_range=1.0)`` defines it.

    Differentiable w.r.t. ``predicted`` only; ``target`` must not require grad on the Triton path (its gradient is
    never computed, and silently dropping it would be wrong). Triton needs float32 and H, W >= 11; images smaller
    than the window take the torch path, where pytorch_msssim skips filtering along the short dimension.
    """
    if predicted.shape != target.shape or predicted.dim() != 4:
        raise ValueError(
            f"fused_ssim needs two [B, H, W, C] images of one shape, got {tuple(predicted.shape)} "
            f"and {tuple(target.shape)}"
        )
    fits_window = min(predicted.shape[1], predicted.shape[2]) >= WINDOW_SIZE
    if resolve_backend(backend, predicted) == "torch" or not fits_window:
        return _ssim_torch(predicted, target)
    if predicted.dtype != torch.float32 or target.dtype != torch.float32:
        raise ValueError(f"fused_ssim's Triton path needs float32 images, got {predicted.dtype} and {target.dtype}")
    if target.requires_grad:
        raise ValueError("fused_ssim computes no gradient for target; detach it (or use backend='torch')")
    return _FusedSSIM.apply(predicted.contiguous(), target.contiguous())
