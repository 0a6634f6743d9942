"""Each held-out view of cup77 in the seed 7 and 8 runs: how far it is from the nearest training camera, each
configuration's PSNR on it at the last evaluation every run reached, and a plot of every held-out view's PSNR
against views seen. Run from the repository root with data/cup77: python per_view.py data/cup77 OUT_DIR"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from odin_ns.data.dataparser import OdinDataParserConfig  # noqa: E402

HERE = Path(__file__).parent
CONFIGS = {"stock": "stock splatfacto", "b1": "odin, 1 view per step", "b4": "odin, 4 views per step"}


def curves(seed: int) -> dict:
    runs = {}
    for config in CONFIGS:
        (entry,) = json.loads((HERE / f"seed{seed}_{config}" / "results.json").read_text()).values()
        runs[config] = {point["views"]: point["psnr_per_view"] for point in entry["curve"]}
    return runs


def main(data: str, out: str) -> None:
    parser = OdinDataParserConfig(data=Path(data)).setup()
    train, held_out = parser.get_dataparser_outputs("train"), parser.get_dataparser_outputs("test")
    train_centres = train.cameras.camera_to_worlds[:, :3, 3]
    names = [Path(name).name for name in held_out.image_filenames]
    distance = [float((train_centres - c2w[:3, 3]).norm(dim=1).min()) for c2w in held_out.cameras.camera_to_worlds]
    seeds = {seed: curves(seed) for seed in (7, 8)}
    print("| held-out view | to the nearest training camera | "
          + " | ".join(f"seed {s} at {min(max(r[c]) for c in r):,} views: stock / odin 1 - stock / odin 4 - stock"
                       for s, r in seeds.items()) + " |")
    print("|---|---|" + "---|" * len(seeds))
    for view, name in enumerate(names):
        cells = []
        for runs in seeds.values():
            last = min(max(runs[config]) for config in runs)
            stock = runs["stock"][last][view]
            cells.append(" / ".join([f"{stock:.2f}"] + [f"{runs[c][last][view] - stock:+.2f}" for c in ("b1", "b4")]))
        print(f"| {name} | {distance[view]:.3f} | " + " | ".join(cells) + " |")
    figure, axes = plt.subplots(len(seeds), len(names), figsize=(2.2 * len(names), 2.6 * len(seeds)), sharex=True)
    for row, (seed, runs) in enumerate(seeds.items()):
        for view, name in enumerate(names):
            axis = axes[row][view]
            for config, label in CONFIGS.items():
                views = sorted(runs[config])
                axis.plot(views, [runs[config][v][view] for v in views], label=label)
            axis.set_title(f"seed {seed}: {name} ({distance[view]:.2f})", fontsize=8)
            axis.set_xticks([0, 15000, 30000], ["0", "15k", "30k"])
            axis.tick_params(labelsize=7)
    figure.legend(*axes[0][0].get_legend_handles_labels(), loc="upper center", ncol=3, fontsize=8)
    figure.supxlabel("views seen")
    figure.supylabel("held-out PSNR (dB)")
    figure.tight_layout(rect=(0, 0, 1, 0.93))
    Path(out).mkdir(parents=True, exist_ok=True)
    figure.savefig(Path(out) / "per_view_psnr.png", dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
