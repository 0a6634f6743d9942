"""Run stock nerfstudio (``ns-train`` or ``ns-eval``) on a machine without torchvision's AlexNet weights.

Stock splatfacto builds LPIPS while constructing the model, which downloads AlexNet and crashes offline (every machine
here), and ns-eval cannot load its checkpoints under torch >= 2.6. For benchmarking, LPIPS is replaced by a
stand-in that reports NaN and numpy scalars are allow-listed for loading; nothing else of stock nerfstudio changes,
so its training speed and PSNR/SSIM are the stock ones. Usage: ``python -m odin_ns.benchmarks.stock_splatfacto
{splatfacto ARGS | eval ARGS}``.
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
    import numpy as np
    import torchmetrics.image.lpip

    torchmetrics.image.lpip.LearnedPerceptualImagePatchSimilarity = UnavailableLPIPS
    # stock checkpoints hold numpy.float64 learning rates, which torch >= 2.6's weights_only loading refuses
    torch.serialization.add_safe_globals([np.core.multiarray.scalar, np.dtype, type(np.dtype(np.float64))])
    if sys.argv[1] == "eval":
        from nerfstudio.scripts.eval import entrypoint

        sys.argv = ["ns-eval", *sys.argv[2:]]
    else:
        from nerfstudio.scripts.train import entrypoint

        sys.argv = ["ns-train", *sys.argv[1:]]
    entrypoint()


if __name__ == "__main__":
    main()
