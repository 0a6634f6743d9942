"""Evidence for throughput-first mode: quality against sync over seeds, a tau sweep, and an adversarial scene.

Every run is a real ``ns-train odin-splatfacto`` under torchrun (2 ranks; gloo on CPU-only machines), evaluated on
every held-out view after its last step. Per scene and seed it trains sync, quality-first and throughput-first, and reports PSNR/SSIM (and LPIPS
where its weights load) deltas against sync with the seed's mean and worst case; on the demo scene it sweeps tau
(admission rate, delayed rows, quality, step time: ``--plot``); on the adversarial scene it also trains throughput-first
with the bound switched off (tau only), to show what the bound holds back. Results accumulate in
``OUT/results.json`` after every run and finished runs are not repeated, so an interrupted invocation resumes.
docs/throughput_first.md holds the numbers and the exact command.

Usage: ``python -m odin_bench.throughput_first_quality --cup77 /work/shared/data/cup77`` (about an hour on
two CPU cores).
"""

from __future__ import annotations

import json
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import tyro
from tqdm import tqdm

from odin_bench.bench import (
    QUALITY_METRICS,
    evaluate,
    iteration_times,
    paired_quality_deltas,
    run_training,
    steady_state,
    training_command,
)
from odin_ns.data.demo_scene import generate_demo_scene
from odin_ns.runtime.config import Mode
from odin_ns.runtime.records import UnitRecord, read_unit_log, summarize, unit_log

RANKS = 2
REFERENCE: Mode = "sync"
QUALITY_FIRST: Mode = "quality-first"
UNGATED = "ungated"
"""throughput-first with only the tau condition (every bound limit infinite): the paper's gate at best."""
AVERAGED = ("admission_rate", "waited_bucket_fraction", "delayed_rows_per_window", "step_s_median")
"""Run statistics the summary averages over seeds."""
QUIET = ("--pipeline.model.num-downscales", "0")
"""Train at full resolution from the first step (splatfacto's warm-up would spend a short run downscaled)."""
DEMO_SCENE = dict(num_views=24, width=64, height=48)
ADVERSARIAL_SCENE = dict(num_views=24, width=64, height=48, num_regions=8, wide_view_fraction=0.25, seed=1)
"""Eight objects for 18 ring views: each object is trained from two or three close views only, while six wide
views see every object small, so a wide view reads a few stale rows of whichever object the previous unit trained,
every time (a small delayed ratio that tau admits), and held-out ring views judge exactly those objects."""


def throughput_first(tau: float) -> str:
    return f"throughput-first tau={tau:g}"


def odin_mode_and_arguments(config: str) -> Tuple[str, List[str]]:
    """``--pipeline.odin.mode`` and the other ``--pipeline.odin.*`` arguments of a configuration name."""
    if config in (REFERENCE, QUALITY_FIRST):
        return config, []
    if config == UNGATED:
        limits = ("max-pixels", "max-opacity", "max-param-step")
        return "throughput-first", ["--pipeline.odin.delay.tau", "0.4",
                                    *(f"--pipeline.odin.delay.{name}=inf" for name in limits)]
    return "throughput-first", ["--pipeline.odin.delay.tau", config.rsplit("=", 1)[1]]


def window_statistics(records: Sequence[UnitRecord]) -> Dict[str, float]:
    """Over a run's overlap windows (rank 0's records): share admitted without waiting, share of the exchange
    waited for, delayed rows, and the largest bound that admitted a delayed read. Sync has no windows: it waits for
    every bucket of every unit (admission 0, everything waited for)."""
    summary = summarize(records)
    windows = summary.windows
    overlapped = summary.buckets_overlapped_fraction
    bound = summary.delay_bound_max
    return {
        "windows": windows,
        "admission_rate": summary.windows_admitted / windows if windows else 0.0,
        "waited_bucket_fraction": 1.0 - overlapped if overlapped is not None else 1.0,
        "delayed_windows": summary.delayed_windows,
        "delayed_rows_per_window": summary.delayed_rows / windows if windows else 0.0,
        "delayed_ratio_max": summary.delayed_ratio_max,
        "bound_pixels_max": bound.pixels if bound else 0.0,
        "bound_opacity_max": bound.opacity if bound else 0.0,
        "reruns": summary.reruns,
        "exposed_wait_s": summary.exposed_wait_s,
    }


def runs_of(runs: Dict[str, Dict], scene: str, config: str) -> List[Dict]:
    """The runs of one configuration on one scene, each with its seed (kept in its label ``scene/config/s<seed>``)."""
    prefix = f"{scene}/{config}/s"
    return [{**run, "seed": int(label[len(prefix):])} for label, run in runs.items() if label.startswith(prefix)]


@dataclass
class ThroughputFirstQualityCommand:
    """Train sync, quality-first and throughput-first side by side on CPU or GPU ranks and compare their quality."""

    out: Path = Path("outputs/throughput_first")
    """Folder for scenes, runs and results.json."""
    steps: int = 300
    """Training steps of every demo-scene run."""
    seeds: int = 3
    """Seeds per configuration (--machine.seed 42, 43, ...)."""
    taus: Tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.4)
    """Swept on the demo scene; the middle comparison uses tau = 0.2 (the default)."""
    sweep_seeds: int = 3
    """Seeds of the sweep's other taus (tau = 0.2 has ``seeds``)."""
    cup77: Optional[Path] = None
    """The real capture (COLMAP layout with images_4/); trained at 200x150 when given."""
    cup77_steps: int = 200
    """Training steps of every cup77 run (a step costs about 6x a demo step on the CPU)."""
    adversarial: bool = True
    """Also train the adversarial scene (with the bound off as well)."""
    plot: Path = Path("docs/img/throughput_first_tau.png")

    def main(self) -> None:
        if self.cup77 is not None and not (self.cup77 / "sparse" / "0").is_dir():
            raise SystemExit(f"error: no COLMAP model at {self.cup77 / 'sparse' / '0'}")
        self.out.mkdir(parents=True, exist_ok=True)
        results_path = self.out / "results.json"
        runs: Dict[str, Dict] = json.loads(results_path.read_text())["runs"] if results_path.exists() else {}
        plan = self._plan()
        for scene, config, seed, data, steps, dataparser in tqdm(plan, desc="throughput-first evidence", unit="run"):
            label = f"{scene}/{config}/s{seed}"
            if label not in runs:
                runs[label] = self._run(label, config, seed, data, steps, dataparser)
                results_path.write_text(json.dumps({"runs": runs}, indent=2))  # partial results survive
        summary = self._summary(runs)
        results_path.write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))
        plot_tau_sweep(summary["tau_sweep"], self.plot)
        print(json.dumps(summary, indent=2))

    def _plan(self) -> List[Tuple[str, str, int, Path, int, Tuple[str, ...]]]:
        """(scene, config, seed, data, steps, dataparser arguments) of every run, seeds interleaved."""
        scenes = [("demo", self._scene("demo", DEMO_SCENE), self.steps, ())]
        if self.cup77 is not None:
            scenes.append(("cup77", self.cup77, self.cup77_steps, ("odin-data", "--downscale-factor", "4")))
        if self.adversarial:
            scenes.append(("adversarial", self._scene("adversarial", ADVERSARIAL_SCENE), self.steps, ()))
        plan = []
        for seed in range(self.seeds):
            for scene, data, steps, dataparser in scenes:
                configs = [REFERENCE, QUALITY_FIRST, throughput_first(0.2)]
                if scene == "demo" and seed < self.sweep_seeds:
                    configs += [throughput_first(tau) for tau in self.taus if tau != 0.2]
                if scene == "adversarial":  # the question is the bound at a loose tau
                    configs = [REFERENCE, QUALITY_FIRST, throughput_first(0.4), UNGATED]
                plan += [(scene, config, seed, data, steps, dataparser) for config in configs]
        return plan

    def _scene(self, name: str, options: Dict) -> Path:
        path = self.out / "scenes" / name
        if not (path / "sparse" / "0").is_dir():
            generate_demo_scene(path, overwrite=True, **options)
        return path

    def _run(
        self, label: str, config: str, seed: int, data: Path, steps: int, dataparser: Tuple[str, ...]
    ) -> Dict:
        run_root = self.out / "runs" / label.replace("/", "_").replace(" ", "_")
        shutil.rmtree(run_root, ignore_errors=True)  # what an interrupted attempt left
        mode, odin_arguments = odin_mode_and_arguments(config)
        command = training_command(mode, RANKS, data, run_root, steps, seed, (*QUIET, *odin_arguments), evaluate=True)
        command += dataparser
        run_dir = run_training(command, run_root, label)
        return {
            "command": " ".join(command),
            "run_dir": str(run_dir),
            "step_s_median": statistics.median(steady_state(iteration_times(run_dir))),
            "quality": evaluate(run_dir),
            **window_statistics(read_unit_log(unit_log(run_dir, 0))),
        }

    def _summary(self, runs: Dict[str, Dict]) -> Dict:
        """Quality deltas against sync per scene and configuration, and the demo scene's tau sweep."""
        configurations = sorted({tuple(label.split("/")[:2]) for label in runs})
        table = []
        for scene, config in configurations:
            seeds = runs_of(runs, scene, config)
            row = {"scene": scene, "config": config,
                   **{key: statistics.mean(run[key] for run in seeds) for key in AVERAGED},
                   "bound_pixels_max": max(run["bound_pixels_max"] for run in seeds),
                   "bound_opacity_max": max(run["bound_opacity_max"] for run in seeds),
                   **quality_means(seeds),
                   **paired_quality_deltas(seeds, runs_of(runs, scene, REFERENCE))}
            table.append(row)
        sweep = [row for row in table if row["scene"] == "demo" and row["config"].startswith("throughput-first")]
        sweep.sort(key=lambda row: float(row["config"].rsplit("=", 1)[1]))
        reference = [row for row in table if row["scene"] == "demo" and row["config"] == QUALITY_FIRST]
        return {"table": table, "tau_sweep": reference + sweep}


def quality_means(runs: List[Dict]) -> Dict[str, float]:
    """Each metric of ``QUALITY_METRICS`` averaged over the runs that evaluated it."""
    means = {}
    for metric in QUALITY_METRICS:
        values = [run["quality"][metric] for run in runs if metric in run["quality"]]
        if values:
            means[f"{metric}_mean"] = statistics.mean(values)
    return means


def plot_tau_sweep(rows: List[Dict], path: Path) -> None:
    """Admission and delayed rows (left) and the PSNR delta against sync (right) over tau, quality-first at left."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = ["QF" if row["config"] == QUALITY_FIRST else row["config"].rsplit("=", 1)[1] for row in rows]
    positions = range(len(rows))
    figure, (admission, quality) = plt.subplots(1, 2, figsize=(10, 3.8))
    admission.plot(positions, [row["admission_rate"] for row in rows], "o-", label="windows admitted without waiting")
    admission.plot(positions, [1 - row["waited_bucket_fraction"] for row in rows], "s-",
                   label="exchange buckets not waited for")
    admission.set_xticks(list(positions), labels)
    admission.set_xlabel("tau (QF = quality-first)")
    admission.set_ylim(0, 1.02)
    admission.legend(loc="lower right", fontsize=8)
    rows_axis = admission.twinx()
    rows_axis.bar(positions, [row["delayed_rows_per_window"] for row in rows], alpha=0.25, color="tab:gray")
    rows_axis.set_ylabel("delayed rows per window (bars)")
    admission.set_title("Admission (demo scene, 2 ranks)")
    means = [row.get("psnr_delta_mean", float("nan")) for row in rows]
    worst = [row.get("psnr_delta_worst", float("nan")) for row in rows]
    quality.axhline(0.0, color="black", linewidth=0.8)
    quality.plot(positions, means, "o-", label="mean over seeds")
    quality.plot(positions, worst, "v--", label="worst seed")
    quality.set_xticks(list(positions), labels)
    quality.set_xlabel("tau (QF = quality-first)")
    quality.set_ylabel("PSNR - sync PSNR (dB)")
    quality.set_title("Held-out quality against sync")
    quality.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    tyro.cli(ThroughputFirstQualityCommand).main()
