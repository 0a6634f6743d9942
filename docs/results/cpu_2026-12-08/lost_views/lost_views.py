"""Which held-out views single cup77 runs lose by 30,000 views, per configuration: every stored time-to-quality run
that recorded each held-out view's PSNR (seeds 7-11, 2026-12-06 to 2026-12-08), a view counted lost where the run
ends it more than LOST_DB below the median final PSNR of that view over the runs with the default settings (stock,
one view per step, four views per step with the square-root rule). Prints a markdown table. Run from the repository
root: python docs/results/cpu_2026-12-08/lost_views/lost_views.py"""

import json
import statistics
from pathlib import Path

RESULTS = Path("docs/results")
LOST_DB = 3.0
SHARED_7_8 = RESULTS / "h100_2026-12-06" / "time_to_quality_cup77_shared"
AGAIN_3_5_7 = RESULTS / "h100_2026-12-07" / "held_out_61_four_views"
SWEEP = RESULTS / "h100_2026-12-07" / "lr_exponent_four_views"
MORE_SEEDS = RESULTS / "h100_2026-12-08" / "four_view_rates_more_seeds"
RUNS = [  # (configuration, seed, results.json, entry)
    ("stock", 7, SHARED_7_8 / "seed_7" / "results.json", "stock"),
    ("stock", 8, SHARED_7_8 / "seed8_stock" / "results.json", "stock"),  # stopped at 24,000 views
    ("stock", 9, MORE_SEEDS / "stock_seed_9" / "results.json", "stock"),
    ("1 view per step", 7, SHARED_7_8 / "seed_7" / "results.json", "odin-b1"),
    ("1 view per step", 8, SHARED_7_8 / "seed8_b1" / "results.json", "odin-b1"),
    ("1 view per step", 9, MORE_SEEDS / "b1_seed_9" / "results.json", "odin-b1"),
    ("4 views per step", 7, SHARED_7_8 / "seed_7" / "results.json", "odin-b4"),
    ("4 views per step", 8, SHARED_7_8 / "seed8_b4" / "results.json", "odin-b4"),
    *[("4 views per step", seed, AGAIN_3_5_7 / f"seed{seed}" / "results.json", "odin-b4") for seed in (3, 5, 7)],
    *[("4 views per step", seed, MORE_SEEDS / "exponent_0.5" / f"seed_{seed}" / "results.json", "odin-b4")
      for seed in (9, 10, 11)],
    *[(f"4 views per step, lr x 4^{exponent}", seed, SWEEP / f"exponent_{exponent}" / f"seed_{seed}" / "results.json",
       "odin-b4") for exponent in ("0", "0.25", "0.75", "1") for seed in (3, 5, 7)],
    *[("4 views per step, lr x 4^0", seed, MORE_SEEDS / "exponent_0" / f"seed_{seed}" / "results.json", "odin-b4")
      for seed in (9, 10, 11)],
]
DEFAULTS = ("stock", "1 view per step", "4 views per step")
HELD_OUT = ["1.jpg", "18.jpg", "25.jpg", "32.jpg", "4.jpg", "47.jpg", "54.jpg", "61.jpg", "69.jpg", "78.jpg"]
"""cup77's held-out images in evaluation order (the order of ``psnr_per_view``)."""


def main() -> None:
    finals = [(configuration, seed, json.loads(path.read_text())[entry]["curve"][-1]["psnr_per_view"])
              for configuration, seed, path, entry in RUNS]
    default_finals = [views for configuration, _, views in finals if configuration in DEFAULTS]
    medians = [statistics.median(views[index] for views in default_finals) for index in range(len(HELD_OUT))]
    print("median final PSNR per view over the default runs: "
          + ", ".join(f"{name} {median:.1f}" for name, median in zip(HELD_OUT, medians)) + "\n")
    print(f"| configuration | runs | runs that lost a view (> {LOST_DB:g} dB below its median) | views lost: seed, "
          "dB below the median |\n|---|---|---|---|")
    for configuration in dict.fromkeys(configuration for configuration, *_ in RUNS):
        lost = [(seed, [(HELD_OUT[index], psnr - medians[index]) for index, psnr in enumerate(views)
                        if psnr < medians[index] - LOST_DB])
                for name, seed, views in finals if name == configuration]
        described = "; ".join(f"seed {seed}: " + ", ".join(f"{name} {gap:+.1f}" for name, gap in views)
                              for seed, views in lost if views)
        print(f"| {configuration} | {len(lost)} | {sum(bool(views) for _, views in lost)} | {described} |")


if __name__ == "__main__":
    main()
