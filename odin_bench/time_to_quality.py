"""``odin-bench time-to-quality``: held-out PSNR against training wall-clock and views seen, stock against odin.

Each configuration trains in this process (stock nerfstudio ``splatfacto``, and ``odin-splatfacto`` at one or more
views per step) through nerfstudio's own training step and callbacks, for the same number of views (stock's steps:
at B views per step odin runs steps / B steps, its schedules counted in views). Every ``eval_every_views`` views the
held-out views are scored outside the training clock: the clock runs only over training steps, and the GPU is
synchronised before it is read. The curves, the time each configuration takes to reach stock's final PSNR, and its
final PSNR go to ``results.json``, a table on stdout and a plot (PSNR against seconds and against views).

A configuration that has not finished when ``budget_s`` of this invocation have passed saves a checkpoint and its
curve, and the next invocation resumes it (nerfstudio's ``--load-dir``): a long run can span several invocations on
a machine that keeps ``out``. Configurations run one after another in one process, so they share the machine's state;
with ``seeds``, every configuration of every seed trains at once in its own process, for PSNR only.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import multiprocessing
import os
import shlex
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy
import torch
import tyro
from tqdm import tqdm

from odin_ns.in_process import run_step
from odin_ns.trainer import bind_optimizers_to_model_tensors

STOCK_CHECKPOINT_GLOBALS = [numpy.float64(0).__reduce__()[0], numpy.dtype, type(numpy.dtype(numpy.float64))]
"""What stock nerfstudio's checkpoints hold besides tensors (numpy float64 learning rates from its schedulers):
torch >= 2.6 loads with ``weights_only=True`` and refuses them unless allowed, and a run resumed from this tool's own
checkpoint must load. The scalars' reconstructor is taken from a scalar, where numpy 1 and 2 name its module apart."""

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
    stock run. The entry keeps the file's path. ``{seed}`` in the path stands for the seed: with ``seeds`` it must be
    there (``runs/seed_{seed}/results.json``), and each seed is set against its own stock run."""
    eval_every_views: int = 2_000
    """Score the held-out views after every this many training views (and after the last)."""
    seed: int = 0
    """Machine seed and view-sequence seed (42 + seed), alike for every configuration."""
    budget_s: Optional[float] = None
    """Stop training after this many seconds of this invocation (checkpointing the configuration in progress, to
    resume on the next invocation with the same ``out``); None: run to the end."""
    out: Path = Path("outputs/time_to_quality")
    """Where runs, results.json and the plot go."""
    render_views: Tuple[str, ...] = ()
    """Held-out images (file names, e.g. ``61.jpg``) whose ground truth, render and depth are written side by side at
    every evaluation, to ``out/renders/<configuration>/<views>_<name>.jpg``: where a run loses one view, what it put
    in front of that camera. A name that is not a held-out image stops the run before training, in one line."""
    render_fallen_db: Optional[float] = None
    """Also write any held-out view, as ``render_views`` does, at each evaluation where its PSNR is more than this many
    dB below its best so far in the run: which view a run loses is not known before it runs. None: named views only."""
    odin_args: str = ""
    """More ns-train arguments for every odin-splatfacto configuration, as one shell-quoted string (write
    ``--odin-args='--pipeline.datamanager.order random'``): an ablation against the defaults. A results.json
    resumes only with the arguments it was started with."""
    clock_shared: bool = False
    """Other processes train on this GPU meanwhile (several seeds or configurations at once, for their PSNR): each
    entry trained here says so, and ``time-to-quality-report`` counts its PSNR but not its time."""
    seeds: Tuple[int, ...] = ()
    """Train these seeds instead of ``seed``: every configuration of every seed at once, each in its own process on
    this GPU (so their clocks are shared: PSNR only), in ``out/seed_<N>/<configuration>/`` with its log in log.txt
    there; each seed's configurations are then joined into ``out/seed_<N>/results.json`` for
    ``time-to-quality-report``. ``budget_s`` applies to each process; invoke again with the same ``out`` to go on."""

    def main(self) -> None:
        if self.render_fallen_db is not None and not self.render_fallen_db > 0:
            raise SystemExit(f"error: --render-fallen-db must be above 0 dB, got {self.render_fallen_db}")
        if self.seeds:
            self._train_seeds_at_once()
            return
        started = time.perf_counter()
        results_path = self.out / "results.json"
        results: Dict[str, Dict] = json.loads(results_path.read_text()) if results_path.exists() else {}
        self.out.mkdir(parents=True, exist_ok=True)
        if self.stock_from is not None:
            results[STOCK] = earlier_stock(self._stock_path(self.seed), self.views)
            results_path.write_text(json.dumps(results, indent=2))
        names = self._configurations()
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

    def _configurations(self) -> List[str]:
        """The configurations this command trains, stock first."""
        return ([STOCK] if self.stock or self.stock_from else []) + [f"odin-b{views}" for views in self.views_per_step]

    def _stock_path(self, seed: int) -> Path:
        """``stock_from`` for ``seed``."""
        return Path(str(self.stock_from).replace("{seed}", str(seed)))

    def _train_seeds_at_once(self) -> None:
        stocks = {}
        if self.stock_from is not None:
            if "{seed}" not in str(self.stock_from):
                raise SystemExit("error: --stock-from with --seeds names each seed's stock run: write {seed} in its "
                                 f"path (runs/seed_{{seed}}/results.json), got {self.stock_from}")
            stocks = {seed: earlier_stock(self._stock_path(seed), self.views) for seed in self.seeds}
        names = self._configurations()
        trained = [name for name in names if not (name == STOCK and stocks)]
        spawn = multiprocessing.get_context("spawn")  # a CUDA process cannot fork
        processes = {}
        for seed in self.seeds:
            for name in trained:
                folder = self.out / f"seed_{seed}" / name
                if trained_to_the_end(folder / "results.json", name):
                    continue  # nothing to train: no process (an invocation on finished runs only joins them)
                folder.mkdir(parents=True, exist_ok=True)
                one = dataclasses.replace(self, seeds=(), seed=seed, stock=name == STOCK, stock_from=None,
                                          clock_shared=True,
                                          views_per_step=() if name == STOCK else (views_per_step_of(name),),
                                          out=folder)
                processes[seed, name] = spawn.Process(target=main_logged, args=(one, folder / "log.txt"))
                processes[seed, name].start()
        for process in processes.values():
            process.join()
        for seed in self.seeds:
            joined = {STOCK: stocks[seed]} if stocks else {}
            for name in trained:
                path = self.out / f"seed_{seed}" / name / "results.json"
                joined.update(json.loads(path.read_text()) if path.exists() else {})
            (self.out / f"seed_{seed}" / "results.json").write_text(json.dumps(joined, indent=2))
            finished = [name for name in names if joined.get(name, {}).get("done")]
            print(f"seed {seed}:\n{summary_table(joined, finished)}")
        failed = [f"seed {seed} {name} (exit code {process.exitcode}; {self.out / f'seed_{seed}' / name}/log.txt)"
                  for (seed, name), process in processes.items() if process.exitcode]
        if failed:
            raise SystemExit("error: failed: " + ", ".join(failed))

    def _train(self, name: str, progress: Optional[Dict], budget_s: Optional[float]) -> Dict:
        views_per_step = views_per_step_of(name)
        steps = self.views // views_per_step
        eval_every = max(1, self.eval_every_views // views_per_step)
        arguments = [] if name == STOCK else shlex.split(self.odin_args)
        progress = progress or {"curve": [], "train_s": 0.0, "step": 0, "views_per_step": views_per_step,
                                "arguments": arguments}
        if progress.get("arguments", []) != arguments:
            raise SystemExit(f"error: {self.out / 'results.json'}: {name} was started with arguments "
                             f"{progress.get('arguments', [])}, not {arguments} (another --out, or the same "
                             "--odin-args)")
        progress["arguments"] = arguments
        progress["clock_shared"] = progress.get("clock_shared", False) or self.clock_shared
        if "load_dir" in progress and not any(Path(progress["load_dir"]).glob("step-*.ckpt")):
            raise SystemExit(f"error: {self.out / 'results.json'}: {name} stopped at {progress['step']:,} steps, and "
                             f"its checkpoint in {progress['load_dir']} is gone (remove the {name} entry to train it "
                             f"from the start)")
        trainer = self._trainer(name, views_per_step, steps, progress)
        named = held_out_renders(trainer, self.render_views, self.out / "renders" / name)
        every_view = held_out_stems(trainer, self.out / "renders" / name) if self.render_fallen_db is not None else {}
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
            gaussians = int(trainer.pipeline.model.num_points)
            progress["curve"].append({"step": step, "views": step * views_per_step, "train_s": clock,
                                      "gaussians": gaussians,
                                      **held_out_metrics(trainer, renders_due(named, every_view, progress["curve"],
                                                                              self.render_fallen_db),
                                                         f"{step * views_per_step:06d}_")})
            progress.update(step=step, train_s=clock, num_gaussians=gaussians)
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
        from nerfstudio.scripts.train import _set_random_seed

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
            args = ["odin-splatfacto", *common, "--pipeline.datamanager.views-per-rank", str(views_per_step),
                    *progress["arguments"]]
        config = tyro.cli(AnnotatedBaseConfigUnion, args=args)
        config.pipeline.datamanager.data = config.data  # what ns-train does with its --data alias
        if "load_dir" in progress:
            config.load_dir = Path(progress["load_dir"])
        config.set_timestamp()
        _set_random_seed(config.machine.seed)  # as ns-train seeds before it builds the trainer: the same initial
        # Gaussians and draws for every configuration of a seed, and in every invocation
        trainer = config.setup(local_rank=0, world_size=1)
        with torch.serialization.safe_globals(STOCK_CHECKPOINT_GLOBALS):
            trainer.setup()
        if name == STOCK:
            bind_optimizers_to_model_tensors(trainer.pipeline, trainer.optimizers)  # odin's trainer binds its own
        return trainer


def trained_to_the_end(results_path: Path, name: str) -> bool:
    """Whether the results.json at ``results_path`` holds ``name`` trained to the end."""
    return results_path.exists() and json.loads(results_path.read_text()).get(name, {}).get("done", False)


def views_per_step_of(name: str) -> int:
    """Views per step of a configuration by its name (stock trains one; ``odin-b4`` four)."""
    return 1 if name == STOCK else int(name.split("-b")[1])


def main_logged(command: TimeToQualityCommand, log: Path) -> None:
    """``command.main()`` with this process's output (tqdm's bars and nerfstudio's console included) appended to
    ``log``: the body of one of ``--seeds``' processes."""
    with open(log, "a") as stream:
        os.dup2(stream.fileno(), 1)
        os.dup2(stream.fileno(), 2)
        command.main()


def earlier_stock(path: Path, views: int) -> Dict:
    """Stock's finished entry of the time-to-quality results at ``path``, trained to ``views`` views (SystemExit in
    one line otherwise)."""
    entry = load_finished_run(path, f"--stock-from {path}")[STOCK]
    if entry["curve"][-1]["views"] != views:
        raise SystemExit(f"error: --stock-from {path}: stock trained to {entry['curve'][-1]['views']:,} views, this "
                         f"run to {views:,}")
    return {**entry, "from": str(path)}


@dataclass
class TimeToQualityReportCommand:
    """Several ``odin-bench time-to-quality`` results (seeds, captures) side by side: per run and odin configuration,
    the final PSNR and the mean of the last evaluations against stock's of the same run, and the share of stock's
    training time taken to reach stock's final PSNR; per configuration their mean with its standard error (one run
    moves by a few tenths of a dB, so a single run cannot tell 0.1 dB). Writes report.md, summary.json and a plot of
    every run's curves relative to its stock's final PSNR."""

    results: Tuple[Path, ...]
    """results.json files of finished time-to-quality runs (stock included in each)."""
    last: int = 4
    """Evaluations averaged at the end of each curve."""
    out: Path = Path("outputs/time-to-quality-report")
    """Folder for report.md, summary.json and the plot."""

    def main(self) -> None:
        if self.last < 1:
            raise SystemExit(f"error: --last must be at least 1, got {self.last}")
        runs = {run_label(path, self.results): load_finished_run(path, str(path)) for path in self.results}
        if not runs:
            raise SystemExit("error: give at least one results.json")
        views = {label: run[STOCK]["curve"][-1]["views"] for label, run in runs.items()}
        if len(set(views.values())) > 1:
            raise SystemExit(f"error: the runs trained to different numbers of views: {views}")
        rows = [compare_to_stock(label, name, run, self.last) for label, run in runs.items()
                for name in run if name != STOCK and run[name].get("done")]
        summary = summarize_against_stock(rows)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "summary.json").write_text(json.dumps({"runs": rows, "configurations": summary,
                                                           "last": self.last}, indent=2))
        text = report_tables(rows, summary, self.last)
        (self.out / "report.md").write_text(text + "\n")
        print(text)
        plot_against_stock(runs, self.out / "time_to_quality_report.png")


def run_label(path: Path, paths: Tuple[Path, ...]) -> str:
    """A run's name in the report: its folder's name (its path where two runs share a folder name)."""
    names = [Path(other).parent.name for other in paths]
    return Path(path).parent.name if names.count(Path(path).parent.name) == 1 else str(path)


def load_finished_run(path: Path, source: str) -> Dict:
    """The time-to-quality results at ``path``, which must hold a finished stock run (SystemExit in one line naming
    ``source`` otherwise)."""
    try:
        run = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"error: {source}: {error}") from None
    if not run.get(STOCK, {}).get("done"):
        raise SystemExit(f"error: {source}: no finished stock run in it")
    return run


def mean_of_last(curve: List[Dict], count: int) -> float:
    points = curve[-count:]
    return sum(point["psnr"] for point in points) / len(points)


def compare_to_stock(label: str, name: str, run: Dict, last: int) -> Dict:
    """One configuration of one run against that run's stock; the time shares are None where either trained while
    other processes shared its GPU."""
    stock, curve = run[STOCK]["curve"], run[name]["curve"]
    target, stock_s = stock[-1]["psnr"], stock[-1]["train_s"]
    reached = time_to_reach(curve, target)
    timed = not (run[STOCK].get("clock_shared") or run[name].get("clock_shared"))
    return {"run": label, "configuration": configuration_label(name, run[name]), "final_psnr": curve[-1]["psnr"],
            "stock_final_psnr": target,
            "final_difference": curve[-1]["psnr"] - target,
            "last_mean_difference": mean_of_last(curve, last) - mean_of_last(stock, last),
            "reached_views": None if reached is None else reached[1],
            "train_share": curve[-1]["train_s"] / stock_s if timed else None,
            "reached_share": reached[0] / stock_s if timed and reached is not None else None,
            "view_differences": view_differences(curve[-1], stock[-1])}


def configuration_label(name: str, entry: Dict) -> str:
    """A configuration's name in the report: its name and the ns-train arguments it added (``--odin-args``), so
    that an ablation is never averaged with the defaults."""
    return shlex.join([name, *entry.get("arguments", [])])


def view_differences(point: Dict, stock_point: Dict) -> Optional[List[float]]:
    """Each held-out view's final PSNR minus stock's on that view; None where either run did not record them."""
    if "psnr_per_view" not in point or "psnr_per_view" not in stock_point:
        return None
    return [mine - stock for mine, stock in zip(point["psnr_per_view"], stock_point["psnr_per_view"])]


def mean_and_error(values: List[float]) -> Tuple[float, Optional[float]]:
    """Mean and its standard error (None from one value)."""
    error = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return statistics.mean(values), error


def summarize_against_stock(rows: List[Dict]) -> Dict[str, Dict]:
    """Per configuration over the runs: mean differences to stock with standard errors (and of the median held-out
    view's difference, over the runs that recorded each view: a view a run loses to one floater moves the mean of ten
    views by a dB or more and the median not at all), how many runs reached
    stock's final PSNR and the median share of stock's time they took, the median share of stock's training time
    (time shares over the runs with their own GPU; None where no run had one)."""
    summary = {}
    for name in sorted({row["configuration"] for row in rows}):
        mine = [row for row in rows if row["configuration"] == name]
        reached = [row["reached_share"] for row in mine if row["reached_share"] is not None]
        shares = [row["train_share"] for row in mine if row["train_share"] is not None]
        final, final_error = mean_and_error([row["final_difference"] for row in mine])
        last, last_error = mean_and_error([row["last_mean_difference"] for row in mine])
        medians = [statistics.median(row["view_differences"]) for row in mine if row["view_differences"]]
        median_view, median_view_error = mean_and_error(medians) if medians else (None, None)
        summary[name] = {"runs": len(mine), "final_difference": final, "final_difference_error": final_error,
                         "last_mean_difference": last, "last_mean_difference_error": last_error,
                         "median_view_difference": median_view, "median_view_difference_error": median_view_error,
                         "runs_with_views": len(medians),
                         "reached": sum(row["reached_views"] is not None for row in mine), "timed_runs": len(shares),
                         "reached_share_median": statistics.median(reached) if reached else None,
                         "train_share_median": statistics.median(shares) if shares else None}
    return summary


def signed(value: float, error: Optional[float] = None) -> str:
    return f"{value:+.3f}" + ("" if error is None else f" ± {error:.3f}")


def report_tables(rows: List[Dict], summary: Dict[str, Dict], last: int) -> str:
    """Markdown: one row per run and configuration, then one per configuration over the runs. A run trained beside
    other processes on its GPU shows its views to stock's final PSNR, and "shared" for its time. Where both runs
    recorded each held-out view's PSNR, how many views end above stock's, the median view's difference and the
    largest fall on one view."""
    lines = [f"| run | configuration | final PSNR | - stock's final | last {last}, - stock's | of stock's training time "
             "| to stock's final PSNR: views | of stock's time | held-out views above stock's (median view, largest "
             "fall) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        views = "not reached" if row["reached_views"] is None else f"{row['reached_views']:,}"
        timed = row["train_share"] is not None
        reached = "" if row["reached_views"] is None else f"{row['reached_share']:.2f}" if timed else "shared"
        training = f"{row['train_share']:.2f}" if timed else "shared"
        differences = row["view_differences"]
        by_view = "" if differences is None else (
            f"{sum(difference > 0 for difference in differences)} of {len(differences)} "
            f"({statistics.median(differences):+.2f}, {min(differences):+.2f})")
        lines.append(f"| {row['run']} | {row['configuration']} | {row['final_psnr']:.3f} | "
                     f"{signed(row['final_difference'])} | {signed(row['last_mean_difference'])} | "
                     f"{training} | {views} | {reached} | {by_view} |")
    lines += ["", f"| configuration | runs | final - stock's (mean ± standard error) | last {last} - stock's | "
              "reached stock's final | runs timed on their own GPU | median share of stock's time to it | "
              "median share of stock's training time | median held-out view - stock's (runs) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, entry in summary.items():
        share = "" if entry["reached_share_median"] is None else f"{entry['reached_share_median']:.2f}"
        training = "" if entry["train_share_median"] is None else f"{entry['train_share_median']:.2f}"
        median_view = "" if entry["median_view_difference"] is None else (
            f"{signed(entry['median_view_difference'], entry['median_view_difference_error'])} "
            f"({entry['runs_with_views']})")
        lines.append(f"| {name} | {entry['runs']} | {signed(entry['final_difference'], entry['final_difference_error'])} "
                     f"| {signed(entry['last_mean_difference'], entry['last_mean_difference_error'])} | "
                     f"{entry['reached']} of {entry['runs']} | {entry['timed_runs']} | {share} | {training} | "
                     f"{median_view} |")
    return "\n".join(lines)


def plot_against_stock(runs: Dict[str, Dict], path: Path) -> None:
    """Every run's curves as PSNR minus that run's stock final PSNR against views, one colour per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finished = [(run[STOCK]["curve"][-1]["psnr"], configuration_label(name, entry), entry["curve"])
                for run in runs.values() for name, entry in run.items() if entry.get("done")]
    names = sorted({label for _, label, _ in finished})
    colours = {name: f"C{index}" for index, name in enumerate(names)}
    figure, axis = plt.subplots(figsize=(7, 4))
    for target, label, curve in finished:
        axis.plot([point["views"] for point in curve], [point["psnr"] - target for point in curve],
                  color=colours[label], alpha=0.7, marker=".")
    for name in names:
        axis.plot([], [], color=colours[name], label=name)
    axis.axhspan(-0.1, 0.1, color="grey", alpha=0.15, label="within 0.1 dB of stock's final")
    axis.axhline(0.0, color="grey", linestyle="--")
    axis.set_xlabel("views seen")
    axis.set_ylabel("held-out PSNR - the run's stock final (dB)")
    axis.set_title(f"{len(runs)} run(s)")
    axis.grid(alpha=0.3)
    axis.legend(frameon=False)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def held_out_stems(trainer, folder: Path) -> Dict[int, Path]:
    """Where each held-out image's renders go (``folder/<its stem>``), by its index in the evaluation dataset, which
    is also its index in ``psnr_per_view``."""
    filenames = [Path(name).name for name in trainer.pipeline.datamanager.eval_dataset.image_filenames]
    return {index: folder / Path(name).stem for index, name in enumerate(filenames)}


def held_out_renders(trainer, names: Tuple[str, ...], folder: Path) -> Dict[int, Path]:
    """``held_out_stems`` of the named held-out images (SystemExit in one line for a name that is not one)."""
    filenames = [Path(name).name for name in trainer.pipeline.datamanager.eval_dataset.image_filenames]
    unknown = sorted(set(names) - set(filenames))
    if unknown:
        raise SystemExit(f"error: --render-views {' '.join(unknown)}: not a held-out image of this capture (held out: "
                         f"{' '.join(filenames)})")
    return {index: stem for index, stem in held_out_stems(trainer, folder).items() if filenames[index] in names}


def renders_due(named: Dict[int, Path], every_view: Dict[int, Path], curve: List[Dict],
                fallen_db: Optional[float]) -> Dict[int, Tuple[float, Path]]:
    """The held-out views the next evaluation writes, each with the PSNR it must score below to be written: the named
    views always, and with ``fallen_db`` each of ``every_view`` that the curve so far has scored, ``fallen_db`` below
    its best there."""
    due = {}
    scored = [point["psnr_per_view"] for point in curve if "psnr_per_view" in point]
    if fallen_db is not None and scored:
        for index, stem in every_view.items():
            due[index] = (max(views[index] for views in scored) - fallen_db, stem)
    due.update({index: (math.inf, stem) for index, stem in named.items()})
    return due


@torch.no_grad()
def held_out_metrics(trainer, renders: Optional[Dict[int, Tuple[float, Path]]] = None, prefix: str = "") -> Dict:
    """PSNR and SSIM averaged over the held-out views as nerfstudio's evaluation averages them, and each view's PSNR:
    whether a run that falls or climbs by a dB does so on one view or on all of them. A view in ``renders`` (by
    evaluation index: the PSNR it must score below, and its stem; ``renders_due``) is also written as ground truth |
    render | depth to ``<prefix><stem>.jpg`` in its stem's folder. Odin publishes what is in flight first."""
    pipeline = trainer.pipeline
    if hasattr(pipeline, "drain"):
        pipeline.drain()
    pipeline.eval()
    per_view = []
    for camera, batch in pipeline.datamanager.fixed_indices_eval_dataloader:
        outputs = pipeline.model.get_outputs_for_camera(camera=camera)
        metrics, images = pipeline.model.get_image_metrics_and_images(outputs, batch)
        per_view.append(metrics)
        if renders and batch["image_idx"] in renders and float(metrics["psnr"]) < renders[batch["image_idx"]][0]:
            stem = renders[batch["image_idx"]][1]
            write_render(images["img"], outputs, stem.with_name(f"{prefix}{stem.name}.jpg"))
    pipeline.train()
    metrics = {key: float(torch.mean(torch.tensor([float(view[key]) for view in per_view])))
               for key in ("psnr", "ssim") if key in per_view[0]}
    return {**metrics, "psnr_per_view": [float(view["psnr"]) for view in per_view]}


def write_render(ground_truth_and_render: torch.Tensor, outputs: Dict, path: Path) -> None:
    """Ground truth | render (nerfstudio's side-by-side image) | depth in nerfstudio's depth colour map, as a JPEG: a
    floater in front of the camera shows as a blob nearer than the object."""
    from nerfstudio.utils.colormaps import apply_depth_colormap
    from PIL import Image

    depth = apply_depth_colormap(outputs["depth"], accumulation=outputs["accumulation"])
    row = torch.cat([ground_truth_and_render, depth.to(ground_truth_and_render)], dim=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray((row.clamp(0, 1) * 255).round().byte().cpu().numpy()).save(path, quality=90)


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
