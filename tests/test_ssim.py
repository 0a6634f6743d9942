"""fused_ssim against pytorch_msssim: float64 reference values and gradients, and the CPU path left unchanged.

The Triton kernels run on CUDA when present and, on CPU, through Triton's interpreter:
``test_triton_ssim_under_interpreter`` re-runs this file's Triton cases in a subprocess with ``TRITON_INTERPRET=1``
(it must be set before triton is imported). The interpreter is slow (seconds per small image), so its sizes are
small but awkward: not multiples of the 128-value column block or the 32-row blocks, spanning several blocks, and
exactly the window's size.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pytorch_msssim import SSIM

from odin_ns.kernels.dispatch import BACKEND_ENV_VAR, triton_available, triton_interpreting
from odin_ns.kernels.ssim import fused_ssim, gaussian_window

_gpu = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
_TRITON_CASES = [pytest.param("cuda", id="triton-cuda", marks=_gpu)]
if triton_available() and triton_interpreting():
    _TRITON_CASES.append(pytest.param("cpu", id="triton-cpu"))

# (B, H, W), noisy copy (else unrelated images), incoming gradient. 37 x 53 spans two column blocks (43 pixel columns
# x 3 channels = 129 values out, 159 in) and two backward row blocks; 45 rows span two forward row blocks; 11 rows
# leave a single output row.
SMALL_CASES = [((1, 37, 53), True, 1.0), ((3, 11, 24), False, -0.2), ((1, 45, 16), False, 3.0)]
GPU_SHAPES = [(3, 120, 90), (1, 11, 11), (4, 600, 800)]


@pytest.fixture(params=_TRITON_CASES)
def device(request) -> str:
    return request.param


def _images(shape: tuple[int, int, int], device: str, related: bool, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(predicted, target) [B, H, W, 3] in [0, 1]: a noisy copy of the target (SSIM near 1, as in training) or an
    unrelated image (SSIM near 0, where the structure term dominates)."""
    generator = torch.Generator().manual_seed(seed)
    target = torch.rand(*shape, 3, generator=generator, dtype=torch.float64)
    noise = torch.randn(*shape, 3, generator=generator, dtype=torch.float64)
    predicted = (target + 0.05 * noise).clamp(0, 1) if related else torch.rand(*shape, 3, generator=generator)
    return predicted.to(device, torch.float32), target.to(device, torch.float32)


def _reference(predicted: torch.Tensor, target: torch.Tensor, grad_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """pytorch_msssim in float64 on the same float32 inputs: (value, d(grad_scale * value)/d predicted)."""
    leaf = predicted.detach().double().requires_grad_()
    module = SSIM(data_range=1.0, size_average=True, channel=3).to(predicted.device).double()
    value = module(target.double().permute(0, 3, 1, 2), leaf.permute(0, 3, 1, 2))
    (grad_scale * value).backward()
    return value.detach(), leaf.grad


def _check_against_reference(predicted: torch.Tensor, target: torch.Tensor, grad_scale: float = 1.0) -> None:
    leaf = predicted.clone().requires_grad_()
    value = fused_ssim(leaf, target, backend="triton")
    (grad_scale * value).backward()
    reference_value, reference_grad = _reference(predicted, target, grad_scale)
    assert value.dtype == torch.float32 and value.shape == ()
    torch.testing.assert_close(value.double(), reference_value, rtol=1e-5, atol=1e-7)
    tolerance = 1e-5 * reference_grad.abs().max().item()
    torch.testing.assert_close(leaf.grad.double(), reference_grad, rtol=1e-5, atol=tolerance)


@pytest.mark.parametrize(
    ("shape", "related", "grad_scale"), SMALL_CASES,
    ids=["x".join(map(str, shape)) + ("-noisy-copy" if related else "-unrelated") for shape, related, _ in SMALL_CASES],
)
def test_triton_matches_float64_reference(device, shape, related, grad_scale):
    """Value and gradient; the backward multiplies by the incoming gradient (read on the device)."""
    predicted, target = _images(shape, device, related, seed=sum(shape))
    _check_against_reference(predicted, target, grad_scale)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_triton_matches_float64_reference_on_gpu_sizes(shape):
    predicted, target = _images(shape, "cuda", related=True, seed=sum(shape))
    _check_against_reference(predicted, target)


def test_triton_without_grad_gives_the_same_value(device):
    """A call that needs no gradient skips storing the derivative maps; the value must not change."""
    predicted, target = _images((1, 12, 17), device, related=True, seed=5)
    with torch.no_grad():
        no_grad_value = fused_ssim(predicted, target, backend="triton")
    assert torch.equal(no_grad_value, fused_ssim(predicted.clone().requires_grad_(), target, backend="triton").detach())


def test_triton_rejects_target_that_requires_grad(device):
    predicted, target = _images((1, 12, 12), device, related=True, seed=1)
    with pytest.raises(ValueError, match="no gradient for target"):
        fused_ssim(predicted, target.requires_grad_(), backend="triton")


def test_triton_accepts_non_contiguous_images(device):
    """Channels-first storage viewed as [B, H, W, C] (a permute) gives the same value as contiguous images."""
    predicted, target = _images((1, 15, 21), device, related=True, seed=2)
    permuted = predicted.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1)
    assert not permuted.is_contiguous()
    assert torch.equal(fused_ssim(permuted, target, backend="triton"), fused_ssim(predicted, target, backend="triton"))


def test_torch_path_is_the_models_pytorch_msssim_call():
    """The CPU path gives bit-for-bit the value and gradient of the model's SSIM module call it replaces."""
    predicted, target = _images((2, 30, 41), "cpu", related=True, seed=3)
    ours = predicted.clone().requires_grad_()
    value = fused_ssim(ours, target, backend="torch")
    value.backward()
    theirs = predicted.clone().requires_grad_()
    module = SSIM(data_range=1.0, size_average=True, channel=3)
    expected = module(target.permute(0, 3, 1, 2), theirs.permute(0, 3, 1, 2))
    expected.backward()
    assert torch.equal(value, expected) and torch.equal(ours.grad, theirs.grad)


def test_window_is_pytorch_msssims():
    module = SSIM(data_range=1.0, size_average=True, channel=3)
    assert torch.equal(gaussian_window(torch.device("cpu")), module.win[0].flatten())


def test_triton_path_hands_images_smaller_than_the_window_to_pytorch_msssim(device):
    """pytorch_msssim skips filtering along a dimension shorter than the window (with a warning); so do we."""
    predicted, target = _images((1, 8, 30), device, related=True, seed=4)
    with pytest.warns(UserWarning, match="Skipping Gaussian Smoothing"):
        value = fused_ssim(predicted, target, backend="triton")
    with pytest.warns(UserWarning):
        expected = SSIM(data_range=1.0, size_average=True, channel=3).to(device)(
            target.permute(0, 3, 1, 2), predicted.permute(0, 3, 1, 2)
        )
    assert torch.equal(value, expected)


def test_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\[B, H, W, C\]"):
        fused_ssim(torch.zeros(1, 12, 12, 3), torch.zeros(1, 12, 13, 3))


@pytest.mark.skipif(not triton_available() or triton_interpreting(), reason="needs triton; runs the interpreter itself")
@pytest.mark.skipif(torch.cuda.is_available(), reason="the compiled Triton kernels run on CUDA here")
def test_triton_ssim_under_interpreter():
    """Run this file's Triton cases through Triton's interpreter (CI's GPU code path)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}  # the interpreter runs on CPU tensors
    env.pop(BACKEND_ENV_VAR, None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "triton and not interpreter"],
        env=env, capture_output=True, text=True, cwd=Path(__file__).parent.parent, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
