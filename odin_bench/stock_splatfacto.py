"""Run stock nerfstudio ``ns-train`` on a machine without torchvision's AlexNet weights.

Stock splatfacto builds LPIPS while constructing the model, which downloads AlexNet and crashes offline (every machine
here). For benchmarking, LPIPS is replaced by a stand-in that reports NaN; nothing else of stock nerfstudio changes,
so its training speed and PSNR/SSIM are the stock ones. Usage: ``python -m odin_bench.stock_splatfacto
splatfacto ARGS``.
"""

from __future__ import annotations

import sys

import torch


class UnavailableLPIPS(torch.nn.Module):
    """Stands in for torchmetrics' LPIPS where its weights cannot be downloaded; scores NaN."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, *args, **kwargs) -> torch.Tensor:
        return torch.tensor(float("nan"))


def main() -> None:
    import torchmetrics.image.lpip
    from nerfstudio.scripts.train import entrypoint

    torchmetrics.image.lpip.LearnedPerceptualImagePatchSimilarity = UnavailableLPIPS
    sys.argv = ["ns-train", *sys.argv[1:]]
    entrypoint()


if __name__ == "__main__":
    main()
