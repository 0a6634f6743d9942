"""The training loss's SSIM term, forward + backward: pytorch_msssim (today's loss) vs the fused Triton SSIM.

    python -m odin_bench.ssim_bench                      # [1,600,800,3] and [4,600,800,3] on CUDA
    python -m odin_bench.ssim_bench --shapes 2x300x400x3 --repeats 20

Each timed call is what the loss does: ``1 - ssim`` of a prediction against its target, then backward into the
prediction. GPU time is the median over ``--repeats`` calls of CUDA events around the call; host time is the median
wall time of the Python call alone (the launches it queues), measured after a synchronize, so it is the CPU cost per
step while the GPU is busy elsewhere. Both paths also run once in float64 with pytorch_msssim, and the table gives
each float32 path's largest difference from it, in the value and in the gradient, next to the difference between
the two float32 paths.

Plain argparse (no tyro) so that it runs on a bare CUDA image with torch, triton and pytorch_msssim.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
from pytorch_msssim import SSIM

from odin_ns.kernels.ssim import fused_ssim

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _msssim_loss(module: SSIM) -> LossFn:
    """Today's loss term (odin_ns/model.py get_loss_dict): NCHW views of channels-last images, target first."""
    return lambda predicted, target: 1 - module(target.permute(0, 3, 1, 2), predicted.permute(0, 3, 1, 2))


def _fused_loss(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 1 - fused_ssim(predicted, target)


def _value_and_grad(loss_fn: LossFn, predicted: torch.Tensor, target: torch.Tensor) -> tuple[float, torch.Tensor]:
    leaf = predicted.detach().clone().requires_grad_()
    loss = loss_fn(leaf, target)
    loss.backward()
    return loss.item(), leaf.grad


def _time(
    loss_fn: LossFn, predicted: torch.Tensor, target: torch.Tensor, warmup: int, repeats: int
) -> tuple[float, float]:
    """(median GPU ms, median host ms) of forward + backward."""
    leaf = predicted.detach().clone().requires_grad_()
    for _ in range(warmup):
        loss_fn(leaf, target).backward()
    gpu_ms, host_ms = [], []
    for _ in range(repeats):
        leaf.grad = None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        host_start = time.perf_counter()
        start.record()
        loss_fn(leaf, target).backward()
        end.record()
        host_ms.append((time.perf_counter() - host_start) * 1e3)
        end.synchronize()
        gpu_ms.append(start.elapsed_time(end))
    return statistics.median(gpu_ms), statistics.median(host_ms)


def bench_shape(shape: tuple[int, ...], warmup: int, repeats: int, noise: float, seed: int) -> dict[str, float]:
    """Timings and differences for one [B, H, W, C] shape; target uniform, prediction target + Gaussian noise."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    target = torch.rand(shape, device="cuda", generator=generator)
    predicted = (target + noise * torch.randn(shape, device="cuda", generator=generator)).clamp(0, 1)
    msssim_loss = _msssim_loss(SSIM(data_range=1.0, size_average=True, channel=shape[-1]).cuda())
    reference_value, reference_grad = _value_and_grad(
        _msssim_loss(SSIM(data_range=1.0, size_average=True, channel=shape[-1]).cuda().double()),
        predicted.double(), target.double(),
    )
    msssim_value, msssim_grad = _value_and_grad(msssim_loss, predicted, target)
    fused_value, fused_grad = _value_and_grad(_fused_loss, predicted, target)
    msssim_gpu, msssim_host = _time(msssim_loss, predicted, target, warmup, repeats)
    fused_gpu, fused_host = _time(_fused_loss, predicted, target, warmup, repeats)
    return {
        "msssim_gpu_ms": msssim_gpu, "fused_gpu_ms": fused_gpu, "gpu_speedup": msssim_gpu / fused_gpu,
        "msssim_host_ms": msssim_host, "fused_host_ms": fused_host,
        "value_fused_vs_msssim": abs(fused_value - msssim_value),
        "grad_fused_vs_msssim": (fused_grad - msssim_grad).abs().max().item(),
        "value_msssim_vs_f64": abs(msssim_value - reference_value),
        "value_fused_vs_f64": abs(fused_value - reference_value),
        "grad_msssim_vs_f64": (msssim_grad.double() - reference_grad).abs().max().item(),
        "grad_fused_vs_f64": (fused_grad.double() - reference_grad).abs().max().item(),
        "grad_max_abs": reference_grad.abs().max().item(),
    }


def _parse_shape(text: str) -> tuple[int, ...]:
    return tuple(int(size) for size in text.split("x"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", type=_parse_shape, default=[(1, 600, 800, 3), (4, 600, 800, 3)],
                        help="[B, H, W, C] shapes as BxHxWxC")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--noise", type=float, default=0.05, help="std of the prediction's noise around the target")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("ssim_bench needs CUDA: it times the Triton kernels against pytorch_msssim's cudnn path")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; median of {args.repeats} after {args.warmup}")
    print("| shape | pytorch_msssim GPU ms | fused GPU ms | speedup | pytorch_msssim host ms | fused host ms |"
          " value diff (fused-msssim, msssim-f64, fused-f64) | grad max diff (fused-msssim, msssim-f64, fused-f64)"
          " | grad max |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    for shape in args.shapes:
        r = bench_shape(shape, args.warmup, args.repeats, args.noise, args.seed)
        print(f"| {'x'.join(map(str, shape))} | {r['msssim_gpu_ms']:.3f} | {r['fused_gpu_ms']:.3f} "
              f"| {r['gpu_speedup']:.1f}x | {r['msssim_host_ms']:.3f} | {r['fused_host_ms']:.3f} "
              f"| {r['value_fused_vs_msssim']:.1e}, {r['value_msssim_vs_f64']:.1e}, {r['value_fused_vs_f64']:.1e} "
              f"| {r['grad_fused_vs_msssim']:.1e}, {r['grad_msssim_vs_f64']:.1e}, {r['grad_fused_vs_f64']:.1e} "
              f"| {r['grad_max_abs']:.1e} |")


if __name__ == "__main__":
    main()
