"""Dense Adam across ranks through heavy densification, on the CPU: held-out PSNR of one rank with dense Adam, two
ranks with quality-first and dense Adam (the default), and two ranks with quality-first and selective Adam.

Every configuration sees two views per step (one rank renders both; two ranks one each), so all see the same number
of views; the scene is a generated one of 40 views at 128x96 refining every 30 views from view 90 (the Gaussians grow
from about 6,000 to tens of thousands), trained through ns-train (torchrun with gloo for two ranks) and scored by
ns-eval. Seeds are interleaved; a run that stops (the runtime's non-finite-gradient check) is reported as stopped, and
the means are over the seeds where every configuration finished. Each run's result is kept in ROOT/results.json, so
seeds can be added by later invocations. From the repository root: ``python <this file> STEPS SEED [SEED ...]``.
"""
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, "tests")
from training import BIN, torchrun  # noqa: E402

from odin_ns.data.demo_scene import generate_demo_scene  # noqa: E402

ROOT = Path("/tmp/dense_across_ranks")
SCENE = ROOT / "scene"
DENSIFY = ("--pipeline.model.warmup-length", "90", "--pipeline.model.refine-every", "30",
           "--pipeline.model.reset-alpha-every", "10")
QUIET = ("--vis", "tensorboard", "--viewer.quit-on-train-completion", "True", "--logging.local-writer.enable", "False",
         "--steps-per-eval-image", "100000", "--steps-per-eval-all-images", "100000", "--steps-per-eval-batch", "0",
         "--pipeline.model.num-downscales", "0")
CONFIGURATIONS = {
    "1 rank, dense": ((), ("--pipeline.datamanager.views-per-rank", "2")),
    "2 ranks quality-first, dense": (2, ("--pipeline.odin.mode", "quality-first")),
    "2 ranks quality-first, selective": (2, ("--pipeline.odin.mode", "quality-first", "--pipeline.odin.adam", "selective")),
}


def train_and_score(name: str, seed: int, steps: int) -> float | str:
    """Held-out PSNR after ``steps`` steps, or why the run stopped."""
    ranks, options = CONFIGURATIONS[name]
    out = ROOT / f"{name.replace(' ', '_').replace(',', '')}_s{seed}"
    launcher = torchrun(ranks) if ranks else []
    run = subprocess.run([*launcher, str(BIN / "ns-train"), "odin-splatfacto", "--data", str(SCENE), "--output-dir",
                          str(out), "--max-num-iterations", str(steps), "--machine.seed", str(seed), *QUIET, *DENSIFY,
                          *options], capture_output=True, text=True)
    if run.returncode != 0:
        stops = [line for line in (run.stdout + run.stderr).splitlines() if "Error: " in line]
        return "stopped: " + (stops[-1].split("Error: ", 1)[1][:160] if stops else f"exit {run.returncode}")
    (config,) = out.glob("*/odin-splatfacto/*/config.yml")
    subprocess.run([str(BIN / "ns-eval"), "--load-config", str(config), "--output-path", str(out / "eval.json")],
                   check=True, capture_output=True)
    return json.loads((out / "eval.json").read_text())["results"]["psnr"]


def main() -> None:
    steps, seeds = int(sys.argv[1]), [int(seed) for seed in sys.argv[2:]]
    if not SCENE.exists():
        generate_demo_scene(SCENE, num_views=40, width=128, height=96, gaussians_per_region=1500, seed=5)
    store = ROOT / "results.json"
    results = json.loads(store.read_text()) if store.exists() else {}
    for seed in seeds:
        for name in CONFIGURATIONS:
            key = f"{name}/{seed}"
            if key not in results:
                results[key] = train_and_score(name, seed, steps)
                store.write_text(json.dumps(results, indent=1))
            print(f"seed {seed}  {name:34s} {results[key]}", flush=True)
    done = sorted({int(key.rsplit("/", 1)[1]) for key in results})
    complete = [seed for seed in done if all(isinstance(results.get(f"{name}/{seed}"), float) for name in CONFIGURATIONS)]
    reference = statistics.mean(results[f"1 rank, dense/{seed}"] for seed in complete) if complete else float("nan")
    print("\n| configuration | " + " | ".join(f"seed {seed}" for seed in done) + " | mean of complete seeds | - 1 rank |")
    print("|---|" + "---|" * (len(done) + 2))
    for name in CONFIGURATIONS:
        cells = [results.get(f"{name}/{seed}", "") for seed in done]
        mean = statistics.mean(results[f"{name}/{seed}"] for seed in complete) if complete else float("nan")
        print(f"| {name} | " + " | ".join(f"{cell:.3f}" if isinstance(cell, float) else str(cell) for cell in cells)
              + f" | {mean:.3f} | {mean - reference:+.3f} |")


if __name__ == "__main__":
    main()
