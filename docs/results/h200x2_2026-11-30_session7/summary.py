"""Views/s of every run of this session, per seed, and the ratios the issues ask for (medians with min-max).

    python3 docs/results/h200x2_2026-11-30_session7/summary.py   # from the repository root

Reads the bench results (callN/*.json) next to this script; each file is one invocation of ``odin-ns bench`` with
one seed, its configurations run back to back (callN/command.sh)."""

import glob
import json
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent


def spread(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f}), n={len(values)}"


def main():
    views = defaultdict(dict)  # (scene label, gpus, steps) -> {(config, seed): views/s}
    for path in sorted(glob.glob(str(HERE / "call*" / "*.json"))):
        bench = json.load(open(path))
        scene = "cup77" if "cup77" in bench["data"] else "large"
        for run in bench["runs"]:
            views[(scene, bench["gpus"], bench["steps"])][(run["name"], run["seed"])] = run["views_per_s"]
    for (scene, gpus, steps), runs in sorted(views.items()):
        print(f"\n## {scene}, {gpus} GPU(s), {steps} steps")
        configs = sorted({name for name, _ in runs})
        seeds = sorted({seed for _, seed in runs})
        print("| configuration | " + " | ".join(f"seed {s}" for s in seeds) + " |")
        print("|---|" + "---|" * len(seeds))
        for config in configs:
            print(f"| {config} | " + " | ".join(f"{runs[(config, s)]:.1f}" if (config, s) in runs else "-"
                                                  for s in seeds) + " |")
        base = "splatfacto" if gpus == 1 else "sync"
        for config in configs:
            ratios = [runs[(config, s)] / runs[(base, s)] for s in seeds if (config, s) in runs and (base, s) in runs]
            if config != base and ratios:
                print(f"- {config} / {base}: {spread(ratios)}")
    one_gpu = views[("cup77", 1, 300)]
    two_gpu = views[("cup77", 2, 300)]
    odin_one = statistics.median(v for (name, _), v in one_gpu.items() if name == "sync")
    sync_two = [v for (name, _), v in two_gpu.items() if name == "sync"]
    print(f"\ncup77 2-GPU sync scaling against twice odin's 1-GPU median ({odin_one:.1f}): "
          f"{spread([v / (2 * odin_one) for v in sync_two])}")


if __name__ == "__main__":
    main()
