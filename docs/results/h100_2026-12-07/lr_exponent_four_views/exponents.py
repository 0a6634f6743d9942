"""Four views per step on cup77 at each learning-rate exponent (B ** exponent, B = 4) against stock splatfacto, seeds 3,
5 and 7: a table per run (printed, markdown; what the time-to-quality report leaves out: the PSNR at 3,000 views,
61.jpg's and the Gaussian count) and a plot of PSNR against views seen per seed, with each run's final PSNR minus its
seed's stock run's against the exponent (means over the seeds: docs/results/cpu_2026-12-07/lr_exponent_report). The
square-root rule's runs (0.5, the default) and the stock runs are those of ../held_out_61_four_views. Run from the
repository root: python exponents.py OUT.png"""

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
SQUARE_ROOT_RUNS = HERE.parent / "held_out_61_four_views"
SEEDS = (3, 5, 7)
EXPONENTS = ("0", "0.25", "0.5", "0.75", "1")
HELD_OUT_61 = 7
"""Index of 61.jpg among the held-out views' PSNRs (``psnr_per_view``)."""
LAST = 4
"""Evaluations averaged at the end (the report's "mean of the last 4")."""


def curve(exponent: str, seed: int) -> list:
    folder = SQUARE_ROOT_RUNS / f"seed{seed}" if exponent == "0.5" else HERE / f"exponent_{exponent}" / f"seed_{seed}"
    return json.loads((folder / "results.json").read_text())["odin-b4"]["curve"]


def stock_curve(seed: int) -> list:
    return json.loads((SQUARE_ROOT_RUNS / f"seed{seed}" / "against_stock.json").read_text())["stock"]["curve"]


def tail_mean(points: list) -> float:
    return statistics.mean(point["psnr"] for point in points[-LAST:])


def table() -> dict:
    rows = {}
    print("| exponent | seed | final PSNR | - stock's | mean of the last 4 - stock's | at 3,000 views | 61.jpg at 3,000 / "
          "30,000 views | Gaussians at the end |\n|---|---|---|---|---|---|---|---|")
    for exponent in EXPONENTS:
        for seed in SEEDS:
            points, stock = curve(exponent, seed), stock_curve(seed)
            final, last = points[-1]["psnr"] - stock[-1]["psnr"], tail_mean(points) - tail_mean(stock)
            rows.setdefault(exponent, []).append((final, last))
            print(f"| {exponent} | {seed} | {points[-1]['psnr']:.3f} | {final:+.3f} | {last:+.3f} | "
                  f"{points[0]['psnr']:.2f} | {points[0]['psnr_per_view'][HELD_OUT_61]:.1f} / "
                  f"{points[-1]['psnr_per_view'][HELD_OUT_61]:.1f} | {points[-1]['gaussians']:,} |")
    return rows


def plot(rows: dict, out: Path) -> None:
    figure, axes = plt.subplots(1, len(SEEDS) + 1, figsize=(5 * (len(SEEDS) + 1), 4.2))
    colours = dict(zip(EXPONENTS, plt.cm.viridis([0.0, 0.25, 0.5, 0.72, 0.9])))
    for axis, seed in zip(axes, SEEDS):
        stock = stock_curve(seed)
        axis.plot([p["views"] for p in stock], [p["psnr"] for p in stock], "k--", label="stock splatfacto")
        for exponent in EXPONENTS:
            points = curve(exponent, seed)
            axis.plot([p["views"] for p in points], [p["psnr"] for p in points], "o-", markersize=3,
                      color=colours[exponent], label=f"4 views, lr x 4^{exponent}")
        axis.set(title=f"seed {seed}", xlabel="views seen", ylabel="held-out PSNR (dB)", ylim=(26.4, 30.4))
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    summary = axes[-1]
    for index, exponent in enumerate(EXPONENTS):
        finals = [pair[0] for pair in rows[exponent]]
        summary.scatter([float(exponent)] * len(finals), finals, color=colours[exponent], s=18)
        summary.plot([float(exponent) - 0.06, float(exponent) + 0.06], [statistics.mean(finals)] * 2, color="k")
    summary.axhline(0.0, color="k", linestyle="--", linewidth=1)
    summary.set(title="final PSNR - its seed's stock run (bar: mean)", xlabel="learning-rate exponent",
                ylabel="dB", xticks=[float(e) for e in EXPONENTS])
    summary.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(out, dpi=110)


if __name__ == "__main__":
    plot(table(), Path(sys.argv[1]))
