"""Splatfacto's per-Gaussian parameter table: the one place that names the row-aligned groups and their shapes."""

from __future__ import annotations

GAUSSIAN_COLUMNS: dict[str, tuple[int, ...]] = {
    "means": (3,),
    "scales": (3,),
    "quats": (4,),
    "features_dc": (3,),
    "features_rest": (15, 3),
    "opacities": (1,),
}
"""Row shape of each parameter group of one Gaussian (``features_rest`` at splatfacto's SH degree 3): the groups the
runtime exchanges and publishes by rows. Every other optimizer group (camera optimizer, bilateral grid) is dense."""
GAUSSIAN_GROUPS: tuple[str, ...] = tuple(GAUSSIAN_COLUMNS)
