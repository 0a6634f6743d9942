"""Figures of a bench run: throughput bars (min/median/max), a step timeline (compute vs exposed wait), quality
(PSNR delta to sync per seed, mean and worst, where sync ran with quality)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def configuration_label(row: dict) -> str:
    """A summary row's name in plots: mode, ranks and, beyond one, views per rank."""
    views = row.get("views_per_rank", 1)
    return f"{row['config']}\nx{row['ranks']}" + (f" b{views}" if views > 1 else "")


def plot_results(results: Dict, out: Path) -> List[Path]:
    """Write throughput.png, timeline.png and quality.png under ``out``; returns their paths."""
    rows = results["summary"]
    labels = [configuration_label(row) for row in rows]
    paths = [out / "throughput.png", out / "timeline.png", out / "quality.png"]

    figure, axis = plt.subplots(figsize=(1.6 * len(rows) + 2, 4))
    medians = [row["views_per_s_median"] for row in rows]
    errors = [[m - row["views_per_s_min"] for m, row in zip(medians, rows)],
              [row["views_per_s_max"] - m for m, row in zip(medians, rows)]]
    axis.bar(labels, medians, yerr=errors, capsize=4, color="tab:blue")
    axis.set_ylabel("views / s (median, min-max)")
    axis.set_title(f"Throughput, {results['steps']} steps on {Path(results['data']).name}")
    figure.tight_layout()
    figure.savefig(paths[0], dpi=120)
    plt.close(figure)

    timelines = [(f"{run['name']} x{run['ranks']} rank {rank}", units) for run in results["runs"]
                 for rank, units in enumerate(run.get("timelines_by_rank") or [run.get("timeline")]) if units]
    figure, axis = plt.subplots(figsize=(9, 0.45 * max(len(timelines), 1) + 1.5))
    for lane, (_, units) in enumerate(timelines):
        start = 0.0
        for unit in units:
            axis.barh(lane, unit["compute_s"] * 1e3, left=start, color="tab:green", height=0.6)
            start += unit["compute_s"] * 1e3
            axis.barh(lane, unit["exposed_wait_s"] * 1e3, left=start, color="tab:red", height=0.6)
            start += unit["exposed_wait_s"] * 1e3 + unit["publish_s"] * 1e3
    axis.set_yticks(range(len(timelines)), [label for label, _ in timelines])
    axis.set_xlabel("ms (last 20 units of each rank): green compute, red exposed wait")
    axis.set_title("Step timeline")
    figure.tight_layout()
    figure.savefig(paths[1], dpi=120)
    plt.close(figure)

    quality_rows = [row for row in rows if "psnr" in row]
    figure, axis = plt.subplots(figsize=(1.6 * max(len(quality_rows), 1) + 2, 4))
    quality_labels = [configuration_label(row) for row in quality_rows]
    if any("psnr_delta_mean" in row for row in quality_rows):
        axis.bar(quality_labels, [row.get("psnr_delta_mean", 0.0) for row in quality_rows], color="tab:purple",
                 label="mean over seeds")
        axis.scatter(quality_labels, [row.get("psnr_delta_worst", 0.0) for row in quality_rows], color="black",
                     marker="v", zorder=3, label="worst seed")
        axis.axhline(0.0, color="grey", linewidth=0.8)
        axis.set_ylabel("held-out PSNR minus sync's, same seed (dB)")
        axis.legend()
    else:
        axis.bar(quality_labels, [row["psnr"] for row in quality_rows], color="tab:purple")
        axis.set_ylabel("held-out PSNR (dB, median over seeds)")
    axis.set_title("Quality")
    figure.tight_layout()
    figure.savefig(paths[2], dpi=120)
    plt.close(figure)
    return paths
