"""Image-quality metrics that survive offline machines.

torchmetrics' LPIPS downloads torchvision's AlexNet weights when it is constructed; stock splatfacto builds it in
``populate_modules`` and so crashes on a machine without internet. Here it is built on first use, from the local
torch hub cache when the weights are there, and reported as unavailable (one warning) when they are not.
"""

from __future__ import annotations

from typing import Optional

import torch
from nerfstudio.utils.rich_utils import CONSOLE


class LazyLPIPS:
    """LPIPS (AlexNet) built on first call; ``None`` results when its weights cannot be loaded."""

    def __init__(self) -> None:
        self._metric: Optional[torch.nn.Module] = None
        self._unavailable_reason: Optional[str] = None

    @property
    def unavailable_reason(self) -> Optional[str]:
        return self._unavailable_reason

    def _build(self) -> Optional[torch.nn.Module]:
        if self._metric is None and self._unavailable_reason is None:
            from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

            try:
                self._metric = LearnedPerceptualImagePatchSimilarity(normalize=True)
            except (OSError, RuntimeError) as error:  # URLError is an OSError; a corrupt cache a RuntimeError
                self._unavailable_reason = f"AlexNet weights for LPIPS could not be loaded ({error})"
                CONSOLE.print(f"[bold yellow]WARNING: LPIPS unavailable: {self._unavailable_reason}; reporting PSNR/SSIM only")
        return self._metric

    def __call__(self, ground_truth: torch.Tensor, predicted: torch.Tensor) -> Optional[float]:
        """LPIPS of two [B, 3, H, W] images in [0, 1], or None when unavailable."""
        metric = self._build()
        if metric is None:
            return None
        metric = metric.to(predicted.device)
        return float(metric(ground_truth, predicted))
