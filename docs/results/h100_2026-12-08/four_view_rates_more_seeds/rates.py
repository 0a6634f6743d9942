"""Unscaled learning rates (--pipeline.lr-batch-exponent 0) against the square-root rule (0.5, the default) at four
views per step on cup77, seed by seed: seeds 9-11 here, seeds 3, 5 and 7 from ../../h100_2026-12-07 (the exponent
sweep and the four-view runs it was set against). A seed's two runs share their initial Gaussians and view sequence.
Prints a markdown table per seed and the mean difference with its standard error, and plots each seed's difference
along the run. Run from the repository root: python rates.py OUT.png"""

import json
import math
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
EARLIER = HERE.parent.parent / "h100_2026-12-07"
LAST = 4
"""Evaluations averaged at the end (the report's "mean of the last 4")."""


def curve(exponent: str, seed: int) -> list:
    if seed in (9, 10, 11):
        folder = HERE / f"exponent_{exponent}" / f"seed_{seed}"
    elif exponent == "0":
        folder = EARLIER / "lr_exponent_four_views" / "exponent_0" / f"seed_{seed}"
    else:
        folder = EARLIER / "held_out_61_four_views" / f"seed{seed}"
    return json.loads((folder / "results.json").read_text())["odin-b4"]["curve"]


def tail_mean(points: list) -> float:
    return statistics.mean(point["psnr"] for point in points[-LAST:])


def mean_and_error(values: list) -> str:
    return f"{statistics.mean(values):+.3f} ± {statistics.stdev(values) / math.sqrt(len(values)):.3f}"


def main(out: Path) -> None:
    seeds = (3, 5, 7, 9, 10, 11)
    finals, lasts, medians = [], [], []
    print("| seed | unscaled: final PSNR | square root: final PSNR | unscaled - square root: final | mean of the last 4 "
          "| median held-out view | at 3,000 views |\n|---|---|---|---|---|---|---|")
    figure, (along, summary) = plt.subplots(1, 2, figsize=(11, 4.2))
    for index, seed in enumerate(seeds):
        unscaled, square_root = curve("0", seed), curve("0.5", seed)
        final = unscaled[-1]["psnr"] - square_root[-1]["psnr"]
        last = tail_mean(unscaled) - tail_mean(square_root)
        median = statistics.median(a - b for a, b in zip(unscaled[-1]["psnr_per_view"],
                                                         square_root[-1]["psnr_per_view"]))
        finals.append(final), lasts.append(last), medians.append(median)
        print(f"| {seed} | {unscaled[-1]['psnr']:.3f} | {square_root[-1]['psnr']:.3f} | {final:+.3f} | {last:+.3f} | "
              f"{median:+.2f} | {unscaled[0]['psnr'] - square_root[0]['psnr']:+.2f} |")
        along.plot([p["views"] for p in unscaled], [a["psnr"] - b["psnr"] for a, b in zip(unscaled, square_root)],
                   "o-", markersize=3, color=f"C{index}", label=f"seed {seed}")
        summary.scatter([final], [index], color=f"C{index}")
    print(f"\nover {len(seeds)} seeds (mean ± standard error): final {mean_and_error(finals)}, mean of the last "
          f"{LAST} {mean_and_error(lasts)}, median held-out view {mean_and_error(medians)}")
    along.axhline(0.0, color="k", linewidth=1)
    along.set(title="unscaled - square-root rule, held-out PSNR", xlabel="views seen", ylabel="dB")
    along.legend(fontsize=8, ncol=2)
    along.grid(alpha=0.3)
    summary.axvline(0.0, color="k", linewidth=1)
    summary.axvline(statistics.mean(finals), color="grey", linestyle="--", label="mean")
    summary.set(title="final PSNR, unscaled - square-root rule", xlabel="dB", yticks=range(len(seeds)),
                yticklabels=[f"seed {seed}" for seed in seeds])
    summary.legend(fontsize=8)
    summary.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(out, dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
