"""``odin-bench time-to-quality``: held-out PSNR against training wall-clock and views seen, stock against odin.

Each configuration trains in this process (stock nerfstudio ``splatfacto``, and ``odin-splatfacto`` at one or more
views per step) through nerfstudio's own training step and callbacks, for the same number of views (stock's steps:
at B views per step odin runs steps / B steps, its schedules counted in views). Every ``eval_every_views`` views the
held-out views are scored outside the training clock: the clock runs only over training steps, and the GPU is
synchronised before it is read. The curves, the time each configuration takes to reach stock's final PSNR, and its
final PSNR go to ``results.json``, a table on stdout and a plot (PSNR against seconds and against views).

A configuration that has not finished when ``budget_s`` of this invocation have passed saves a checkpoint and its
curve, and the next invocation resumes it (nerfstudio's ``--load-dir``): a long run can span several invocations on
a machine that keeps ``out``. Configurations run one after another in one process, so they share the machine's state.
"""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
import tyro
from tqdm import tqdm

from odin_ns.in_process import run_step

STOCK = "stock"


@dataclass
class TimeToQualityCommand:
    """Train stock splatfacto and odin-splatfacto to the same number of views, scoring held-out views on the way."""

    data: Path
    """COLMAP capture (``images/`` and ``sparse/0``)."""
    views: int = 30_000
    """Views each configuration trains on (stock's steps; splatfacto's schedules end at 30,000)."""
    views_per_step: Tuple[int, ...] = (1, 4)
    """odin-splatfacto configurations, by views per step; stock always trains one view per step."""
    stock: bool = True
    """Train stock splatfacto (its final PSNR is the target line)."""
    stock_from: Optional[Path] = None
    """Take stock splatfacto's finished curve from this earlier results.json (same data, views and seed, on the same
    machine kind) instead of training it: odin configurations can then be measured in later invocations against one
    stock run. The entry keeps the file's path."""
    eval_every_views: int = 2_000
    """Score the held-out views after every this many training views (and after the last)."""
    seed: int = 0
    """Machine seed and view-sequence seed (42 + seed), alike for every configuration."""
    budget_s: Optional[float] = None
    """Stop training after this many seconds of this invocation (checkpointing the configuration in progress, to
    resume on the next invocation with the same ``out``); None: run to the end."""
    out: Path = Path("outputs/time_to_quality")
    """Where runs, results.json and the plot go."""

    def main(self) -> None:
        started = time.perf_counter()
        results_path = self.out / "results.json"
        results: Dict[str, Dict] = json.loads(results_path.read_text()) if results_path.exists() else {}
        self.out.mkdir(parents=True, exist_ok=True)
        if self.stock_from is not None:
            results[STOCK] = earlier_stock(self.stock_from, self.views)
            results_path.write_text(json.dumps(results, indent=2))
        names = ([STOCK] if self.stock or self.stock_from else []) + [f"odin-b{views}" for views in self.views_per_step]
        for name in names:
            left = None if self.budget_s is None else self.budget_s - (time.perf_counter() - started)
            if results.get(name, {}).get("done"):
                continue
            if left is not None and left <= 0:
                break
            results[name] = self._train(name, results.get(name), left)
            results_path.write_text(json.dumps(results, indent=2))
        finished = [name for name in names if results.get(name, {}).get("done")]
        print(summary_table(results, finished))
        if STOCK in finished:
            plot(results, finished, self.out / "time_to_quality.png")

    def _train(self, name: str, progress: Optional[Dict], budget_s: Optional[float]) -> Dict:
        views_per_step = 1 if name == STOCK else int(name.split("-b")[1])
        steps = self.views // views_per_step
        eval_every = max(1, self.eval_every_views // views_per_step)
        progress = progress or {"curve": [], "train_s": 0.0, "step": 0, "views_per_step": views_per_step}
        trainer = self._trainer(name, views_per_step, steps, progress)
        step, clock = progress["step"], progress["train_s"]
        started = time.perf_counter()
        bar = tqdm(total=steps, initial=step, desc=name, unit="step")
        while step < steps:
            chunk_end = min(steps, (step // eval_every + 1) * eval_every)
            synchronize()
            chunk_start = time.perf_counter()
            for step in range(step, chunk_end):
                run_step(trainer, step)
            step = chunk_end
            synchronize()
            clock += time.perf_counter() - chunk_start
            bar.update(chunk_end - bar.n)
            progress["curve"].append({"step": step, "views": step * views_per_step, "train_s": clock,
                                      "gaussians": int(trainer.pipeline.model.num_points),
                                      **held_out_metrics(trainer, step)})
            progress.update(step=step, train_s=clock, num_gaussians=int(trainer.pipeline.model.num_points))
            if budget_s is not None and time.perf_counter() - started > budget_s and step < steps:
                trainer.save_checkpoint(step - 1)  # nerfstudio resumes at the step after the one saved
                progress["load_dir"] = str(trainer.checkpoint_dir)
                bar.close()
                return progress
        bar.close()
        progress["done"] = True
        return progress

    def _trainer(self, name: str, views_per_step: int, steps: int, progress: Dict):
        """The configuration's trainer, set up in this process (from its checkpoint when resuming)."""
        from nerfstudio.configs.method_configs import AnnotatedBaseConfigUnion

        common = ["--data", str(self.data), "--output-dir", str(self.out / "runs" / name),
                  "--max-num-iterations", str(steps), "--machine.seed", str(42 + self.seed),
                  "--pipeline.datamanager.train-cameras-sampling-seed", str(42 + self.seed),
                  "--vis", "tensorboard", "--logging.local-writer.enable", "False",
                  "--steps-per-eval-image", "1000000", "--steps-per-eval-all-images", "1000000",
                  "--steps-per-eval-batch", "0", "--steps-per-save", "1000000",
                  "--pipeline.model.num-downscales", "0"]
        if name == STOCK:
            stand_in_for_lpips()
            args = ["splatfacto", *common, "colmap", "--colmap-path", "sparse/0", "--downscale-factor", "1"]
        else:
            args = ["odin-splatfacto", *common, "--pipeline.datamanager.views-per-rank", str(views_per_step)]
        config = tyro.cli(AnnotatedBaseConfigUnion, args=args)
        config.pipeline.datamanager.data = config.data  # what ns-train does with its --data alias
        if "load_dir" in progress:
            config.load_dir = Path(progress["load_dir"])
        config.set_timestamp()
        trainer = config.setup(local_rank=0, world_size=1)
        trainer.setup()
        return trainer


def earlier_stock(path: Path, views: int) -> Dict:
    """Stock's finished entry of the time-to-quality results at ``path``, trained to ``views`` views (SystemExit in
    one line otherwise)."""
    try:
        entry = json.loads(Path(path).read_text()).get(STOCK)
    except (OSError, ValueError) as error:
        raise SystemExit(f"error: --stock-from {path}: {error}") from None
    if not entry or not entry.get("done"):
        raise SystemExit(f"error: --stock-from {path}: no finished stock run in it")
    if entry["curve"][-1]["views"] != views:
        raise SystemExit(f"error: --stock-from {path}: stock trained to {entry['curve'][-1]['views']:,} views, this "
                         f"run to {views:,}")
    return {**entry, "from": str(path)}


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@torch.no_grad()
def held_out_metrics(trainer, step: int) -> Dict[str, float]:
    """PSNR and SSIM over every held-out view (odin publishes what is in flight first)."""
    pipeline = trainer.pipeline
    if hasattr(pipeline, "drain"):
        pipeline.drain()
    pipeline.eval()
    metrics = pipeline.get_average_eval_image_metrics(step=step)
    pipeline.train()
    return {key: float(metrics[key]) for key in ("psnr", "ssim") if key in metrics}


def stand_in_for_lpips() -> None:
    """Stock splatfacto downloads AlexNet for LPIPS at construction, which fails offline: score NaN instead."""
    import torchmetrics.image.lpip

    from odin_bench.stock_splatfacto import UnavailableLPIPS

    torchmetrics.image.lpip.LearnedPerceptualImagePatchSimilarity = UnavailableLPIPS


def time_to_reach(curve: List[Dict], psnr: float) -> Optional[Tuple[float, int]]:
    """(training seconds, views) of the first evaluation at or above ``psnr``; None if never reached."""
    return next(((point["train_s"], point["views"]) for point in curve if point["psnr"] >= psnr), None)


def summary_table(results: Dict[str, Dict], finished: List[str]) -> str:
    """Markdown: each configuration's final PSNR, training time, and time to stock's final PSNR against stock's."""
    target = results[STOCK]["curve"][-1]["psnr"] if STOCK in finished else None
    lines = ["| configuration | views | final PSNR | train s | to stock's final PSNR: s | views | of stock's time |",
             "|---|---|---|---|---|---|---|"]
    stock_time = results[STOCK]["curve"][-1]["train_s"] if target is not None else None
    for name, run in results.items():
        last = run["curve"][-1] if run["curve"] else None
        if last is None:
            continue
        state = "" if run.get("done") else " (in progress)"
        reached = time_to_reach(run["curve"], target) if target is not None else None
        to_target = ("not reached", "", "") if reached is None else (
            f"{reached[0]:.1f}", f"{reached[1]:,}", f"{reached[0] / stock_time:.2f}")
        lines.append(f"| {name}{state} | {last['views']:,} | {last['psnr']:.3f} | {last['train_s']:.1f} | "
                     + " | ".join(to_target) + " |")
    return "\n".join(lines)


def plot(results: Dict[str, Dict], names: List[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = results[STOCK]["curve"][-1]["psnr"]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for axis, key, label in ((axes[0], "train_s", "training wall-clock (s)"), (axes[1], "views", "views seen")):
        for name in names:
            curve = results[name]["curve"]
            axis.plot([point[key] for point in curve], [point["psnr"] for point in curve], marker=".", label=name)
        axis.axhline(target, color="grey", linestyle="--", label=f"stock's final PSNR ({target:.2f} dB)")
        axis.set_xlabel(label)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("held-out PSNR (dB)")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=min(len(labels), 3), frameon=False)  # below: off the curves
    low = min(point["psnr"] for name in names for point in results[name]["curve"])
    axes[0].set_ylim(max(low, target - 8.0), target + 1.5 if math.isfinite(target) else None)
    figure.tight_layout(rect=(0, 0.07 * math.ceil((len(names) + 1) / 3), 1, 1))
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    tyro.cli(TimeToQualityCommand).main()
