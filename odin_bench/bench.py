"""``odin-bench bench``: every configuration trained side by side through ns-train, interleaved, in one invocation.

Each configuration is a real training run (``ns-train odin-splatfacto`` under torchrun, or stock ``splatfacto``);
runs are interleaved over seeds so machine drift hits all alike. Speed comes from nerfstudio's own per-iteration
timer in the run's tensorboard log (median over the second half of the steps, i.e. after warm-up), Odin's wait and
admission figures from rank 0's unit log and the step timeline from every rank's, quality from the held-out views
scored after the last step (nerfstudio's all-images evaluation, the metrics ns-eval computes). ``no-exchange`` is
measurement only: sync's training with every rank training alone (``odin_bench.train --no-exchange``), so nothing
crosses ranks (replicas diverge); its time is the compute-only floor that the exchange modes are compared against.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, TypeVar

from tqdm import tqdm

from odin_ns.runtime.config import MODES
from odin_ns.runtime.records import UnitRecord, read_unit_log, summarize, unit_log

STOCK = "splatfacto"
GSPLAT_PEER = "gsplat-distributed"
"""gsplat's own multi-GPU path (Gaussians sharded over ranks), see :mod:`odin_bench.gsplat_distributed`."""
NO_EXCHANGE = "no-exchange"
ODIN_VARIANTS = {
    NO_EXCHANGE: ("--pipeline.odin.mode", "sync"),
    "quality-first-predicted": ("--pipeline.odin.mode", "quality-first", "--pipeline.odin.read-scopes", "predicted"),
    "sync-eager": ("--pipeline.odin.mode", "sync", "--pipeline.odin.captured-units", "False"),
    "sync-presized": ("--pipeline.odin.mode", "sync", "--pipeline.odin.captured-units", "False",
                      "--pipeline.model.presized-intersections", "True"),
    "quality-first-predicted-presized": ("--pipeline.odin.mode", "quality-first", "--pipeline.odin.read-scopes",
                                         "predicted", "--pipeline.model.presized-intersections", "True"),
    "sync-one-bucket": ("--pipeline.odin.mode", "sync"),
}
"""Odin configurations beyond the modes, by name, with their ns-train options: sync with every rank training alone
(the compute floor); quality-first deciding its windows from predicted read scopes; sync with every unit launched
eagerly (sync captures them on one GPU), with gsplat's sizing or with tile intersections sized ahead (a forward with
no host read); quality-first predicted with them sized ahead; sync with its exchange in as few buckets as ``bucket-mb`` allows (fewer
collectives per unit). ``LAUNCHER_OPTIONS`` adds what ns-train's options cannot say."""
LAUNCHER_OPTIONS = {NO_EXCHANGE: ("--no-exchange",), "sync-one-bucket": ("--fewest-buckets",)}
"""Configurations trained through the lab's launcher (``odin_bench.train``), with its options."""
ODIN_CONFIGURATIONS = (*MODES, *ODIN_VARIANTS)
ITERATION_TIME_TAG = "Train Iter (time)"
QUALITY_METRICS = {"psnr": min, "ssim": min, "lpips": max}
"""Held-out metrics compared against a reference run, each with how its worst delta is picked (lower LPIPS is
better)."""
T = TypeVar("T")


@dataclass
class BenchCommand:
    """Train each configuration side by side and write results.json and plots (throughput, timeline, quality)."""

    data: Path
    """Dataset (COLMAP capture or transforms.json scene)."""
    gpus: int = 2
    """Ranks per Odin configuration (GPUs; CPU ranks with gloo where CUDA is absent)."""
    steps: int = 1000
    """Training steps per configuration."""
    modes: str = ",".join((*MODES, NO_EXCHANGE))
    """Comma-separated configurations on --gpus ranks: Odin modes (sync, quality-first, throughput-first),
    no-exchange (every rank training alone: the compute floor), quality-first-predicted (quality-first with predicted
    read scopes), sync-eager (no captured units), sync-presized (eager, tile intersections sized ahead, gsplat only),
    quality-first-predicted-presized,
    sync-one-bucket (sync with the fewest collectives per unit) and gsplat-distributed (gsplat's sharded multi-GPU
    training, CUDA only)."""
    seeds: int = 1
    """Repetitions per configuration (seeds 42 + first_seed, 43 + first_seed, ...). A seed sets both the machine seed
    and the view sequence (``train_cameras_sampling_seed``, which stock's and odin's datamanagers otherwise keep at 42
    whatever the machine seed), so repetitions differ in the views' order as well."""
    first_seed: int = 0
    """Offset of the first repetition's seed: extends an earlier bench (same --out names runs apart) with more seeds."""
    stock: bool = True
    """Also train stock nerfstudio splatfacto and Odin with one rank, the single-GPU references."""
    out: Path = Path("outputs/bench")
    """Folder for runs, results.json and plots."""
    quality: bool = True
    """Evaluate held-out PSNR/SSIM (every held-out view, after each run's last step); off: speed only."""
    full_resolution: bool = True
    """Train at full image resolution from the first step (splatfacto otherwise renders at 1/4 then 1/2 resolution
    for its first 3,000 and 6,000 steps, which short benchmark runs would measure instead)."""
    views_per_rank: Tuple[int, ...] = (1,)
    """Views each rank renders per step in the Odin configurations: every value is a configuration of its own,
    interleaved with the others in each seed's round (stock splatfacto and the gsplat peer render one). Every
    configuration trains on the same views: --steps // views-per-rank steps, so quality compares at equal views
    seen."""
    steps_per_log: int = 10
    """Steps between logging steps in the Odin and stock runs (nerfstudio's default, 10). A logging step reads the
    loss and the unit records on the host and, with several ranks, checks for NaN and agrees on stopping with
    collectives; at 1 every step waits for the GPU and the peers, which is not how anyone trains."""
    extra: str = ""
    """Extra ns-train arguments for every Odin and stock run, one quoted string (split like a shell would), e.g.
    --extra="--pipeline.model.stop-split-at 0" (with "=": a value starting with "--" would read as an option) to
    compare with gsplat-distributed, which does not densify."""
    alternating_cost: bool = False
    """Train the Odin configurations on the alternating-cost workload (odin_bench.workloads: every rank alternates
    costly and cheap views out of phase with its neighbour), what overlap can hide and sync cannot; stock splatfacto
    and the gsplat peer deal their own views."""

    def main(self) -> None:
        modes = [mode for mode in self.modes.split(",") if mode]
        unknown = sorted(set(modes) - set(ODIN_CONFIGURATIONS) - {GSPLAT_PEER})
        if unknown:
            raise SystemExit(f"error: unknown mode(s) {unknown}; choose from {(*ODIN_CONFIGURATIONS, GSPLAT_PEER)}")
        if not self.data.exists():
            raise SystemExit(f"error: data directory does not exist: {self.data}")
        if self.steps_per_log < 1:
            raise SystemExit(f"error: --steps-per-log must be at least 1, got {self.steps_per_log}")
        if not self.views_per_rank or min(self.views_per_rank) < 1:
            raise SystemExit(f"error: views per rank must be at least 1, got {self.views_per_rank}")
        self.out.mkdir(parents=True, exist_ok=True)
        runs = []
        seeds = range(self.first_seed, self.first_seed + self.seeds)
        plan = [(seed, *configuration) for seed in seeds for configuration in self.configurations(modes)]
        for seed, name, ranks, views in tqdm(plan, desc="bench runs", unit="run"):
            runs.append(self._run(name, ranks, seed, views))
            results = {"data": str(self.data), "steps": self.steps, "steps_per_log": self.steps_per_log,
                       "alternating_cost": self.alternating_cost, "gpus": self.gpus, "runs": runs,
                       "summary": summarize_configurations(runs), "environment": environment()}
            (self.out / "results.json").write_text(json.dumps(results, indent=2))  # after every run: partial results survive
        report(results, self.out)


    def configurations(self, modes: List[str]) -> List[Tuple[str, int, int]]:
        """(name, ranks, views per rank) of one seed's round, in the order they run."""
        odin = [(mode, self.gpus) for mode in modes if mode != GSPLAT_PEER]
        if self.stock:  # odin on one GPU beside stock; once, when the modes asked for it already (--gpus 1)
            odin = list(dict.fromkeys([("sync", 1)] + odin))
        configurations = [(STOCK, 1, 1)] if self.stock else []
        configurations += [(name, ranks, views) for views in self.views_per_rank for name, ranks in odin]
        return configurations + ([(GSPLAT_PEER, self.gpus, 1)] if GSPLAT_PEER in modes else [])

    def _run(self, name: str, ranks: int, seed: int, views: int = 1) -> Dict:
        label = f"{name}-w{ranks}-b{views}-s{seed}"
        run_root = self.out / "runs" / label
        extra = tuple(shlex.split(self.extra))
        if self.full_resolution:
            extra += ("--pipeline.model.num-downscales", "0")
        if name in ODIN_CONFIGURATIONS:
            extra += ("--pipeline.datamanager.views-per-rank", str(views))
        evaluated = self.quality and name not in (GSPLAT_PEER, NO_EXCHANGE)
        command = training_command(name, ranks, self.data, run_root, max(2, self.steps // views), seed, extra,
                                   self.steps_per_log, evaluate=evaluated, alternating_cost=self.alternating_cost)
        started = time.time()
        run_dir = run_training(command, run_root, label)
        run = {"name": name, "ranks": ranks, "seed": seed, "wall_s": time.time() - started, "run_dir": str(run_dir)}
        if name == GSPLAT_PEER:
            peer = json.loads((run_dir / "peer.json").read_text())
            iteration_s = peer["step_s"]
            run.update(num_gaussians=peer["num_gaussians"], image_size=peer["image_size"])
        else:
            iteration_s = iteration_times(run_dir)
        run["step_s"] = statistics.median(steady_state(iteration_s))
        run["views_per_rank"] = views
        run["views_per_s"] = ranks * run["views_per_rank"] / run["step_s"]
        logs = [unit_log(run_dir, rank) for rank in range(ranks)]
        if logs[0].exists():
            records_by_rank = [read_unit_log(log) for log in logs if log.exists()]
            run.update(summarize(steady_state(records_by_rank[0])).to_json())
            run["timeline"] = unit_timeline(records_by_rank[0])
            run["timelines_by_rank"] = [unit_timeline(records) for records in records_by_rank]
            run.update(per_rank_medians(records_by_rank))
        if self.quality and name == GSPLAT_PEER:
            run["quality"] = json.loads((run_dir / "eval.json").read_text())["results"]
        elif evaluated:
            run["quality"] = evaluate(run_dir)
        return run


@dataclass
class BenchReportCommand:
    """Merge the runs of several ``odin-bench bench`` results (say, seeds run in separate invocations with
    ``--first-seed``) into one results.json, table and set of plots."""

    results: Tuple[Path, ...]
    """results.json files of benches on the same data and steps."""
    out: Path = Path("outputs/bench-report")
    """Folder for the merged results.json and plots."""

    def main(self) -> None:
        loaded = [json.loads(path.read_text()) for path in self.results]
        if not loaded:
            raise SystemExit("error: give at least one results.json")
        setups = {(Path(result["data"]).name, result["steps"], result.get("steps_per_log"),
                   result.get("alternating_cost", False)) for result in loaded}
        if len(setups) > 1:
            raise SystemExit(f"error: the results differ in data, steps, logging cadence (steps per log; None: an "
                             f"older bench's) or workload (alternating cost): {sorted(setups, key=str)}")
        runs = [run for result in loaded for run in result["runs"]]
        keys = [(run["name"], run["ranks"], run.get("views_per_rank", 1), run["seed"]) for run in runs]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise SystemExit(f"error: the same (configuration, ranks, views per rank, seed) appears twice: {repeated}")
        merged = {**loaded[0], "runs": runs, "summary": summarize_configurations(runs),
                  "merged_from": [str(p) for p in self.results],
                  "environments": [result["environment"] for result in loaded]}
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "results.json").write_text(json.dumps(merged, indent=2))
        report(merged, self.out)


def report(results: Dict, out: Path) -> None:
    """Plots under ``out`` and the summary table on stdout."""
    from odin_bench.plots import plot_results

    plot_results(results, out)
    print(format_table(results["summary"]))


def run_training(command: List[str], run_root: Path, label: str) -> Path:
    """Run one training command with its output in ``<run_root>.log``; returns the run directory (with config.yml).
    A folder left at ``run_root`` by an earlier, interrupted bench of the same configuration and seed is removed
    first: its run would otherwise stand beside this one's."""
    shutil.rmtree(run_root, ignore_errors=True)
    log = run_root.parent / f"{run_root.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as handle:
        status = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT).returncode
    if status != 0:
        raise SystemExit(f"error: {label} failed with status {status}; see {log}")
    if (run_root / "peer.json").exists():
        return run_root
    (config,) = run_root.glob("*/*/*/config.yml")
    return config.parent


def training_command(
    name: str, ranks: int, data: Path, out: Path, steps: int, seed: int, extra: Tuple[str, ...], steps_per_log: int = 10,
    evaluate: bool = False, alternating_cost: bool = False,
) -> List[str]:
    """The ns-train command line of one configuration (gsplat-distributed: its own driver under torchrun).
    ``evaluate``: after the last step the run scores every held-out view (what ``evaluate`` reads back), in the
    training process: a separate ns-eval would start nerfstudio again and reload the checkpoint.
    ``alternating_cost``: an Odin configuration trains on the alternating-cost workload. Either, and the
    configurations of ``LAUNCHER_OPTIONS``, train through the lab's launcher (``odin_bench.train``)."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
                "--master-port", str(29500 + os.getpid() % 1000)]
    if name == GSPLAT_PEER:
        return [*launcher, "-m", "odin_bench.gsplat_distributed", "--data", str(data), "--output-dir",
                str(out), "--steps", str(steps), "--seed", str(42 + seed)]
    common = ["--data", str(data), "--output-dir", str(out), "--max-num-iterations", str(steps),
              "--machine.seed", str(42 + seed), "--pipeline.datamanager.train-cameras-sampling-seed", str(42 + seed),
              "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True",
              "--steps-per-eval-image", "1000000", "--steps-per-eval-all-images", str(steps - 1 if evaluate else 1000000),
              "--steps-per-eval-batch", "0",
              "--logging.steps-per-log", str(steps_per_log), "--logging.local-writer.enable", "False", *extra]
    if name == STOCK:
        return [sys.executable, "-m", "odin_bench.stock_splatfacto", "splatfacto", *common,
                "colmap", "--colmap-path", "sparse/0", "--downscale-factor", "1"]
    odin = ODIN_VARIANTS.get(name, ("--pipeline.odin.mode", name))
    variants = [*(["--alternating-cost"] if alternating_cost else []), *LAUNCHER_OPTIONS.get(name, ())]
    ns_train = ["-m", "odin_bench.train", *variants] if variants else [installed_script("ns-train")]
    return [*launcher, *ns_train, "odin-splatfacto", *common, *odin]


def installed_script(name: str) -> str:
    """Path of a console script of the environment (nerfstudio's ns-train)."""
    beside_python = Path(sys.executable).parent / name  # this environment's, before any other on PATH
    path = str(beside_python) if beside_python.exists() else shutil.which(name)
    if path is None:
        raise SystemExit(f"error: {name} not found on PATH: install nerfstudio in this environment")
    return path


def iteration_times(run_dir: Path) -> List[float]:
    """nerfstudio's per-iteration train time (seconds) from the run's tensorboard log."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [event.value for event in events.Scalars(ITERATION_TIME_TAG)]


def steady_state(values: Sequence[T]) -> Sequence[T]:
    """The second half of a run's per-step values: speed and unit figures describe training after its warm-up."""
    return values[len(values) // 2 :]


def per_rank_medians(records_by_rank: Sequence[Sequence[UnitRecord]]) -> Dict[str, List[float]]:
    """Each rank's steady-state median host time per unit (in ``run_unit`` and before it) and exposed wait, in ms:
    with several ranks, the one whose host takes longest paces the others, whose GPUs then wait."""
    def median_ms(records: Sequence[UnitRecord], value) -> float:
        return 1e3 * statistics.median(value(record) for record in steady_state(records))

    return {
        "host_ms_by_rank": [median_ms(records, lambda r: r.host_run_s + r.host_between_s) for records in records_by_rank],
        "exposed_wait_ms_by_rank": [median_ms(records, lambda r: r.exposed_wait_s) for records in records_by_rank],
    }


def unit_timeline(records: Sequence[UnitRecord]) -> List[Dict]:
    """The last 20 units' spans, for the step-timeline plot."""
    return [{"unit_id": record.unit_id, "compute_s": record.compute_s, "exposed_wait_s": record.exposed_wait_s,
             "comm_s": record.comm_s, "publish_s": record.publish_s} for record in records[-20:]]


HELD_OUT_METRICS = "Eval Images Metrics Dict (all images)"
"""nerfstudio's tensorboard group for the mean metrics over every held-out view (what ns-eval computes, by the same
pipeline method, from the same final parameters)."""


def evaluate(run_dir: Path) -> Dict[str, float]:
    """PSNR, SSIM (and LPIPS where its weights are available) over the held-out views, as a run trained with
    ``training_command(..., evaluate=True)`` logged them after its last step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    logged = set(events.Tags()["scalars"])
    results = {key: events.Scalars(f"{HELD_OUT_METRICS}/{key}")[-1].value for key in ("psnr", "ssim", "lpips")
               if f"{HELD_OUT_METRICS}/{key}" in logged}
    if not results:
        return {"error": f"no held-out evaluation logged in {run_dir}"}
    return {key: value for key, value in results.items() if value == value}  # NaN: LPIPS without its weights


def summarize_configurations(runs: List[Dict]) -> List[Dict]:
    """Per configuration: median/min/max views/s, ratios to sync and to no-exchange, wait hidden, quality."""
    by_config: Dict[Tuple[str, int, int], List[Dict]] = {}
    for run in runs:
        by_config.setdefault((run["name"], run["ranks"], run.get("views_per_rank", 1)), []).append(run)

    def median_of(name: str, ranks: int, key: str, batch: int = 1) -> Optional[float]:
        group = by_config.get((name, ranks, batch))
        return statistics.median(run[key] for run in group) if group else None

    rows = []
    for (name, ranks, batch), group in by_config.items():
        views = [run["views_per_s"] for run in group]
        row = {"config": name, "ranks": ranks, "views_per_rank": batch,
               "views_per_s_median": statistics.median(views),
               "views_per_s_min": min(views), "views_per_s_max": max(views), "runs": len(group)}
        sync_views = median_of("sync", ranks, "views_per_s", batch)
        floor_views = median_of(NO_EXCHANGE, ranks, "views_per_s", batch)
        single = median_of(STOCK, 1, "views_per_s")
        one_view = median_of(name, ranks, "views_per_s") if batch > 1 else None
        if one_view:
            row["ratio_to_one_view"] = row["views_per_s_median"] / one_view
        if sync_views:
            row["ratio_to_sync"] = row["views_per_s_median"] / sync_views
        if floor_views:
            row["step_time_vs_no_exchange"] = floor_views / row["views_per_s_median"]
        if single:
            row["scaling_efficiency"] = row["views_per_s_median"] / (ranks * single)
        sync_wait = median_of("sync", ranks, "exposed_wait_s", batch) if name != "sync" else None
        if "exposed_wait_s" in group[0]:
            row["exposed_wait_ms"] = 1e3 * statistics.median(run["exposed_wait_s"] for run in group)
            if sync_wait:
                row["wait_hidden"] = 1 - statistics.median(run["exposed_wait_s"] for run in group) / sync_wait
            row["buckets_overlapped_fraction"] = group[0].get("buckets_overlapped_fraction")
        for key in ("host_ms_by_rank", "exposed_wait_ms_by_rank"):
            if ranks > 1 and all(len(run.get(key, ())) == ranks for run in group):
                row[key] = " / ".join(f"{statistics.median(run[key][rank] for run in group):.2f}" for rank in range(ranks))
        qualities = [run["quality"] for run in group if "psnr" in run.get("quality", {})]
        if qualities:
            row["psnr"] = statistics.median(q["psnr"] for q in qualities)
            row["ssim"] = statistics.median(q["ssim"] for q in qualities)
            reference = ("sync", ranks, batch) if name != "sync" else ("sync", ranks, 1)
            if reference != (name, ranks, batch):
                row["quality_reference"] = f"{reference[0]}, {reference[1]} rank(s), {reference[2]} view(s) per rank"
                row.update(paired_quality_deltas(group, by_config.get(reference, [])))
        rows.append(row)
    return rows


def paired_quality_deltas(runs: List[Dict], reference_runs: List[Dict]) -> Dict[str, float]:
    """Each metric of ``QUALITY_METRICS`` minus the reference run's of the same seed, in its units and in %: mean and
    worst over the seeds both evaluated. Pairing by seed takes the seed's own variation out of the comparison."""
    reference_by_seed = {run["seed"]: run["quality"] for run in reference_runs if "psnr" in run.get("quality", {})}
    pairs = [(run["quality"], reference_by_seed[run["seed"]]) for run in runs
             if "psnr" in run.get("quality", {}) and run["seed"] in reference_by_seed]
    if not pairs:
        return {}
    deltas: Dict[str, float] = {"quality_seeds": len(pairs)}
    for metric, worst in QUALITY_METRICS.items():
        both = [(mine[metric], theirs[metric]) for mine, theirs in pairs if metric in mine and metric in theirs]
        if not both:
            continue
        differences = [mine - theirs for mine, theirs in both]
        relative = [100 * (mine - theirs) / theirs for mine, theirs in both]
        deltas.update({f"{metric}_delta_mean": statistics.mean(differences),
                       f"{metric}_delta_worst": worst(differences),
                       f"{metric}_delta_pct_mean": statistics.mean(relative),
                       f"{metric}_delta_pct_worst": worst(relative)})
    return deltas


def format_table(rows: List[Dict]) -> str:
    """Markdown table of the summary."""
    columns = ["config", "ranks", "views_per_rank", "views_per_s_median", "views_per_s_min", "views_per_s_max",
               "ratio_to_sync", "ratio_to_one_view",
               "step_time_vs_no_exchange", "scaling_efficiency", "exposed_wait_ms", "wait_hidden",
               "host_ms_by_rank", "exposed_wait_ms_by_rank",
               "buckets_overlapped_fraction", "psnr", "ssim", "psnr_delta_mean", "psnr_delta_worst",
               "psnr_delta_pct_worst", "ssim_delta_mean", "ssim_delta_worst"]

    def cell(value) -> str:
        return f"{value:.3f}" if isinstance(value, float) else ("" if value is None else str(value))

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(column)) for column in columns) + " |" for row in rows]
    return "\n".join(lines)


def environment() -> Dict[str, str]:
    """Versions and hardware, recorded with every result."""
    import gsplat
    import nerfstudio
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "torch": torch.__version__, "gsplat": gsplat.__version__,
            "nerfstudio": getattr(nerfstudio, "__version__", "1.1.5"), "gpu": gpu,
            "gpu_count": str(torch.cuda.device_count())}
