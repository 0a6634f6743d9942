"""``odin-bench simulate``: predicted step time and views/s per mode and world size over modelled links, from measured
unit logs; ``--validate`` checks the model against a measured 2-rank run; ``--plot`` draws views/s against W.

Tables are Markdown, so they paste into docs/scaling.md beside the command that printed them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Literal, Optional, Tuple

import numpy as np
import tyro

from odin_ns.runtime.config import RuntimeConfig
from odin_bench.scaling.links import PRESETS, Link
from odin_bench.scaling.measured import (
    Calibration,
    HostBound,
    MeasuredRun,
    ScalingInputError,
    StepTime,
    calibrate,
    load_bench,
    load_run,
)
from odin_bench.scaling.replay import (
    MODES,
    OVERLAPPED,
    Prediction,
    ShardedSends,
    Wire,
    gaussians_from_exchange,
    predict,
    predictable,
    run_collectives,
)
from odin_bench.scaling.windows import RecordedPath, WindowStatistics, recorded_paths
from odin_ns.schedule.plan import SchedulePlan


@dataclass
class SimulateCommand:
    """Predict the step time and views/s of sync, quality-first, throughput-first and the sharded peer at other
    world sizes over modelled links, replaying measured unit logs (docs/scaling.md)."""

    runs: Annotated[Tuple[Path, ...], tyro.conf.Positional, tyro.conf.arg(metavar="RUN")]
    """Run directories holding odin_units.jsonl (and odin_units_rank*.jsonl): per-view compute times, host time per
    step (the step time from --step-time less the runtime's spans) and, from quality-first or throughput-first runs
    on 2+ ranks, the overlap windows."""
    step_time: StepTime = "tensorboard"
    """Measured step time of each run: 'tensorboard' (nerfstudio's Train Iter (time) in the run's event files,
    mean of the second half), 'bench' (the step_s of the --bench results.json run with the same trailing folder
    names <label>/<scene>/<method>/<timestamp>: median of the second half) or 'units' (the unit logs alone: per unit
    the slowest rank's compute + re-run + exposed wait + publication, so no host time outside the runtime's spans)."""
    bench: Tuple[Path, ...] = ()
    """odin-bench bench results.json files holding the runs' step times (--step-time bench)."""
    plan: Optional[Path] = None
    """The capture's plan.npz (odin-ns plan, same seed as training): views reach ranks as the runtime deals them.
    Without it each rank's views are drawn from the measured per-view times."""
    views_per_rank: int = 1
    """Views per rank of the measured runs (--pipeline.datamanager.views-per-rank), kept at every world size."""
    world_sizes: Tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    links: Tuple[str, ...] = ("nvswitch", "pcie", "infiniband", "ethernet")
    """Link presets (odin_bench/scaling/links.py)."""
    modes: Tuple[str, ...] = MODES
    sharded_sends: ShardedSends = "visible"
    """Sharded peer: 'visible' sends only the (Gaussian, camera) pairs a camera sees (gsplat's packed mode, as
    Grendel-GS does); 'all' sends every pair (packed=False, how odin-bench bench runs gsplat-distributed)."""
    gaussians: Optional[int] = None
    """Gaussian count, for runs without tensorboard scalars."""
    sh_degree: int = 3
    steps: int = 400
    """Steps replayed per world size."""
    seed: int = 0
    plot: Optional[Path] = None
    """Draw views/s against the world size, one panel per link, into this PNG."""
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    """The runtime configuration predicted: its bucket plan sets the collectives of an exchange. Runs made with
    another bucket size are validated with theirs (--runtime.bucket-mb)."""
    validate: bool = False
    """Predict each run at its world size and mode from the others (--validate-fit) and print predicted against
    measured step time."""
    validate_fit: Literal["one-rank", "leave-one-out", "host-bound"] = "one-rank"
    """--validate fits on: 'one-rank': the 1-rank runs, predicting each 2+-rank run (host time on 2+ ranks is then
    the 1-rank runs', as nothing measured it); 'leave-one-out': every run but the one predicted, predicting every
    run, 1-rank ones included (the host time on 2+ ranks comes from the other 2+-rank runs of the mode);
    'host-bound': the 1-rank runs with the host-bound term (whatever --host-term says), predicting each 2+-rank run
    with the collective launch cost fitted on the other 2+-rank runs (or --collective-launch-ms), and printing the
    host time per unit predicted against measured too."""
    host_term: Literal["two-rank", "host-bound"] = "two-rank"
    """Host time of a step on 2+ ranks: 'two-rank': the one measured on the runs on 2+ ranks, the same at every
    W (one rank's where none ran); 'host-bound': one rank's plus what W - 1 peers add to a host-bound step, the
    slowest of W hosts drawn from the 1-rank runs' host time per unit (the units after logging steps apart from the
    rest: --steps-per-log) and a launch cost per collective of the unit (docs/scaling.md, "Host-bound steps: what a
    peer adds"). Needs unit logs with host times."""
    collective_launch_ms: Optional[float] = None
    """Host-bound term: host time one collective's launch adds to a unit. None: fitted on the runs on 2+ ranks that
    launch collectives (median of (host per unit - E[max_W H]) / collectives per unit); without any, 0.31 ms,
    the fit on six 2-H200 cup77 sync runs (odin_bench.scaling.measured.H200_COLLECTIVE_LAUNCH_S)."""
    steps_per_log: Optional[int] = None
    """nerfstudio's --logging.steps-per-log of the runs, for the host-bound term: the unit after each logging step
    carries its host work on every rank at once, so those units are drawn apart from the rest. None: each run's
    config.yml, else (--step-time bench) its bench's results.json; without either, all units are one group."""

    def main(self) -> None:
        try:
            self._check_options()
            bench = load_bench(self.bench)
            runs = [load_run(path, self.views_per_rank, self.step_time, bench, self.steps_per_log)
                    for path in self.runs]
            self._count_gaussians(runs)
            plan = self._load_plan()
            if self.validate:
                self._validate(runs, plan)
            else:
                self._simulate(runs, plan)
        except ScalingInputError as error:
            raise SystemExit(f"error: {error}") from None

    def _check_options(self) -> None:
        if not self.runs:
            raise ScalingInputError("give at least one run directory")
        unknown = sorted(set(self.links) - PRESETS.keys()) or sorted(set(self.modes) - set(MODES))
        if unknown:
            raise ScalingInputError(f"unknown link or mode {unknown}: links are {sorted(PRESETS)}, modes {MODES}")
        if min(self.world_sizes, default=0) < 1 or self.views_per_rank < 1 or self.steps < 1:
            raise ScalingInputError("world sizes, views per rank and steps must be at least 1")
        if self.collective_launch_ms is not None and self.collective_launch_ms < 0:
            raise ScalingInputError(f"--collective-launch-ms must not be negative, got {self.collective_launch_ms}")
        if self.steps_per_log is not None and self.steps_per_log < 1:
            raise ScalingInputError(f"--steps-per-log must be at least 1, got {self.steps_per_log}")

    def _load_plan(self) -> SchedulePlan | None:
        if self.plan is None:
            return None
        try:
            return SchedulePlan.load(self.plan)
        except (OSError, ValueError, KeyError) as error:
            raise ScalingInputError(f"cannot read plan {self.plan}: {error}") from None

    def _count_gaussians(self, runs: Sequence[MeasuredRun]) -> None:
        """Without --gaussians: the runs' tensorboard count, else the count their dense exchanges imply (every fit
        then uses it, a 1-rank run having no exchange)."""
        self._gaussians = self.gaussians
        if self._gaussians is None and all(run.gaussians is None for run in runs):
            self._gaussians = gaussians_from_exchange(runs, self.sh_degree)
            if self._gaussians is not None:
                print(f"Gaussian count from the dense exchanges' bytes: {self._gaussians}")
        elif self._gaussians is None:
            counts = sorted(run.gaussians for run in runs if run.gaussians is not None)
            self._gaussians = counts[len(counts) // 2]

    def _fit(
        self, runs: Sequence[MeasuredRun], plan: SchedulePlan | None, launch_runs: Sequence[MeasuredRun] | None = None
    ) -> Calibration:
        """Calibration on ``runs``; host-bound, with the collective launch cost fitted on the runs on 2+ ranks of
        ``launch_runs`` (default: ``runs``) unless --collective-launch-ms gives it."""
        calibration = calibrate(runs, plan, self._gaussians, MODES)
        if self.host_term != "host-bound" and not (self.validate and self.validate_fit == "host-bound"):
            return calibration  # the host time measured on 2+ ranks
        wire = self._wire(calibration)
        counted = [(run, run_collectives(run, wire)) for run in (runs if launch_runs is None else launch_runs)
                   if run.world_size > 1]
        launch_s = None if self.collective_launch_ms is None else 1e-3 * self.collective_launch_ms
        return replace(calibration, host_bound=HostBound.fit(runs, counted, launch_s))

    def _wire(self, calibration: Calibration) -> Wire:
        return Wire(calibration.gaussians, self.sh_degree, self.runtime)

    def _simulate(self, runs: Sequence[MeasuredRun], plan: SchedulePlan | None) -> None:
        calibration = self._fit(runs, plan)
        fitted = WindowStatistics.fit(runs, calibration.visible_share)
        links = [PRESETS[name] for name in self.links]
        predictions, dealings = predict(calibration, fitted, plan, links, self.world_sizes, self.modes, self.steps,
                                        self.seed, self.sharded_sends, self.sh_degree, runtime=self.runtime)
        print(describe_calibration(calibration, self.modes))
        print(describe_windows(fitted, self.modes))
        if any(window.predicted for run in runs for window in run.windows):
            print("windows decided from predicted read scopes are not extrapolated (they follow the scene's geometry "
                  "and the plan, not in the unit logs): --validate replays them at their own world size")
        for link in links:
            print(f"\n{describe_link(link)}\n")
            print(prediction_table([p for p in predictions if p.link == link.name], dealings))
        if self.plot is not None:
            measured = [(run.mode, run.world_size, run.views_per_unit / run.step_s) for run in runs
                        if run.step_s is not None and run.world_size in self.world_sizes]
            print(f"\nwrote {plot_scaling(predictions, links, self.plot, measured)}")

    def _validate(self, runs: Sequence[MeasuredRun], plan: SchedulePlan | None) -> None:
        leave_one_out, host_bound = self.validate_fit == "leave-one-out", self.validate_fit == "host-bound"
        single = [run for run in runs if run.world_size == 1]
        targets = list(runs) if leave_one_out else [run for run in runs if run.world_size > 1]
        if not single or not targets or (leave_one_out and len(runs) < 2):
            raise ScalingInputError("--validate needs runs on 1 rank (to fit) and on 2+ ranks (to predict)"
                                    + (", or 2+ runs for leave-one-out" if leave_one_out else ""))
        untimed = [run.describe() for run in targets if run.step_s is None]
        if untimed:
            raise ScalingInputError(f"no measured step time (see --step-time): {untimed[0]}")
        unmodelled = [run.describe() for run in targets if run.mode not in MODES]
        if unmodelled:
            raise ScalingInputError(f"mode not modelled: {unmodelled[0]}")
        links = [PRESETS[name] for name in self.links]
        if not leave_one_out and not host_bound:
            calibration = self._fit(single, plan)
            print(describe_calibration(calibration, sorted({run.mode for run in targets})))
        rows = []
        for target in targets:
            others = [run for run in runs if run is not target]
            if leave_one_out or host_bound:
                calibration = self._fit(others, plan) if leave_one_out else self._fit(single, plan, others)
                print(f"{target.path}: {describe_calibration(calibration, [target.mode], target.world_size)}")
            recorded = recorded_paths(target)
            fitted = None if recorded else WindowStatistics.fit([target], calibration.visible_share)
            if target.mode not in predictable([target.mode], fitted, recorded):
                raise ScalingInputError(f"{target.describe()} logged no windows (or delay bounds) to replay")
            if recorded:
                print(f"{target.path}: {describe_recorded(recorded)}")
            predictions, _ = predict(calibration, fitted, plan, links, [target.world_size], [target.mode],
                                     self.steps, self.seed, self.sharded_sends, self.sh_degree, recorded,
                                     runtime=self.runtime)
            measured = split_step(target.step_s, target.slowest_compute_s, target.overhead_s)
            wire = self._wire(calibration)
            host = calibration.host_s(target.mode, target.world_size, wire.collectives(target.world_size))
            per_unit = [] if calibration.host_bound is None else host_per_unit(calibration.host_bound, target, wire)
            for prediction in predictions:
                error = 100 * (prediction.step_s - target.step_s) / target.step_s
                predicted = split_step(prediction.step_s, prediction.compute_s, host)
                rows.append([str(target.path), target.mode, str(target.world_size), prediction.link, predicted,
                             measured, f"{error:+.1f}%", *per_unit])
        print()
        host_columns = ["host per unit ms, predicted (= E[max_W H] + collectives x launch)", "measured", "error"]
        print(markdown_table(["run", "mode", "W", "link", "predicted ms (= compute + host + rest)", "measured ms",
                              "error", *(host_columns if calibration.host_bound is not None else ())], rows))
        print(f"\nMeasured step time: {self.step_time}. Windows of overlapped runs are fitted on that run itself (a "
              "1-rank run has none), or, for predicted read scopes or runs that opened none, replayed as the run "
              "recorded them: this checks the timing model, not the extrapolation of scopes to more ranks.")


def split_step(step_s: float, compute_s: float, host_s: float) -> str:
    """A step time and its parts in ms: the slowest rank's compute, host time outside the runtime's spans, and the
    rest (exposed exchange, publication, re-runs)."""
    rest = step_s - compute_s - host_s
    return f"{1e3 * step_s:.2f} (= {1e3 * compute_s:.2f} + {1e3 * host_s:.2f} + {1e3 * rest:.2f})"


def host_per_unit(bound: HostBound, target: MeasuredRun, wire: Wire) -> list[str]:
    """Table cells: the host time per unit the host-bound term predicts for ``target`` (with the collectives of
    ``wire``'s dense exchange, the replay's), the one its logs measured (the mean H of all its ranks), and the
    error."""
    collectives, launched = wire.collectives(target.world_size), run_collectives(target, wire)
    if target.world_size > 1 and launched != collectives:
        raise ScalingInputError(f"{target.describe()} launched {launched:g} collectives per unit, the replay's dense "
                                f"exchange {collectives}: the host-bound term predicts the dense exchange")
    predicted = bound.host_per_unit_s(target.world_size, collectives)
    parts = f"{1e3 * bound.slowest_s(target.world_size):.2f} + {collectives} x " \
            f"{1e3 * bound.collective_launch_s:.2f}" if target.world_size > 1 else "mean H"
    if target.host_times is None:
        return [f"{1e3 * predicted:.2f} (= {parts})", "-", "-"]
    measured = float(target.host_times.mean())
    return [f"{1e3 * predicted:.2f} (= {parts})", f"{1e3 * measured:.2f}", f"{100 * (predicted / measured - 1):+.1f}%"]


def describe_calibration(calibration: Calibration, modes: Sequence[str], world_size: int | None = None) -> str:
    """What the model took from the runs' spans and step times, in a few lines (the host time on 2+ ranks only
    where ``world_size`` is not 1)."""
    borrowed = " (not measured on 2+ ranks: sync's, else 1 rank's)"
    overheads = [f"1 rank {1e3 * calibration.single_overhead_s:.2f} ms"]
    bound = calibration.host_bound
    if world_size != 1 and bound is None:
        overheads += [f"{mode} on 2+ ranks {1e3 * calibration.overhead_s[mode]:.2f} ms"
                      + ("" if mode in calibration.measured_overheads else borrowed) for mode in modes]
    elif world_size != 1:
        overheads.append("on W ranks 1 rank's + (E[max_W H] - mean H) + collectives x launch - (E[max_W c] - mean c) "
                         "(host-bound)")
    lines = [f"fitted on: {'; '.join(calibration.sources)}",
             f"{calibration.gaussians} Gaussians, a view sees {calibration.visible_share:.1%} of them; "
             f"per-view compute times: {describe_times(calibration.single_view_seconds)} for 1 rank"
             + ("" if world_size == 1 or bound is not None else f", {describe_times(calibration.view_seconds)} for "
                "2+ ranks")
             + f"; publication {1e3 * calibration.publish_s:.2f} ms per unit",
             "host time per step outside the runtime's spans: " + ", ".join(overheads)]
    if bound is not None and world_size != 1:
        lines.append(f"host-bound: H per unit of the 1-rank runs {len(bound.host)} units, mean "
                     f"{1e3 * float(bound.host.mean()):.2f} ms, E[max_2 H] {1e3 * bound.slowest_s(2):.2f} ms "
                     f"(compute spread at W = 2: {1e3 * bound.compute_spread_s(2):.2f} ms); collective launch "
                     f"{1e3 * bound.collective_launch_s:.3f} ms ({bound.launch_source})")
        lines.append(f"host-bound: {describe_grouping(bound)}")
    return "\n".join(lines)


def describe_grouping(bound: HostBound) -> str:
    """How the host-bound term groups the 1-rank runs' units, with each group's mean H."""
    if bound.logging is None or not 0 < np.count_nonzero(bound.logging) < len(bound.host):
        return bound.grouping
    return (f"{bound.grouping} (mean H {1e3 * float(bound.host[bound.logging].mean()):.2f} ms, the rest "
            f"{1e3 * float(bound.host[~bound.logging].mean()):.2f} ms)")


def describe_times(seconds: np.ndarray) -> str:
    return f"{len(seconds)} (median {1e3 * float(np.median(seconds)):.2f} ms)"


def describe_windows(fitted: WindowStatistics | None, modes: Sequence[str]) -> str:
    """What the model took from the overlap windows, and which modes they leave unpredicted."""
    lines = []
    if fitted is not None:
        lines.append(f"windows: {fitted.windows} measured; per view: bucket touched {fitted.bucket_touch:.3f}, "
                     f"updated bucket re-read {fitted.reread:.3f}, rows of a touched bucket seen "
                     f"{fitted.row_share:.3f}; re-run rate {fitted.rerun_rate:.3f}; "
                     f"{len(fitted.delay_bounds)} delay bounds")
    missing = [mode for mode in modes if mode not in predictable(modes, fitted)]
    if missing:
        lines.append(f"not predicted: {', '.join(missing)} (no overlap windows, or no throughput-first delay bounds, "
                     "in the runs: measure them on 2+ ranks)")
    return "\n".join(lines)


def describe_recorded(recorded: Sequence[RecordedPath]) -> str:
    """How the units of a run replayed from its record went."""
    windows = [path for path in recorded if path.first is not None]
    waited = sum(max(path.first) for path in windows) / len(windows) if windows else 0.0
    updated = sum(path.buckets_with_updates for path in windows) / len(windows) if windows else 0.0
    return (f"replayed as recorded: {len(recorded)} units, {len(windows)} windows (the slowest-waiting rank waited "
            f"for {waited:.1f} of {updated:.1f} updated buckets on average), "
            f"{sum(path.sync_path for path in recorded)} published at once (sync's path)")


def describe_link(link: Link) -> str:
    return f"link {link.name}: {link.bandwidth / 1e9:g} GB/s, {link.latency * 1e6:g} us per step"


def prediction_table(predictions: Sequence[Prediction], dealings: dict[int, str]) -> str:
    """One row per world size: each mode's step time and views/s, and, beside the others, their ratio to sync."""
    modes = list(dict.fromkeys(p.mode for p in predictions))
    by_key = {(p.world_size, p.mode): p for p in predictions}
    rows = []
    for world_size in sorted({p.world_size for p in predictions}):
        sync = by_key.get((world_size, "sync"))
        cells = [str(world_size), dealings[world_size], f"{1e3 * by_key[world_size, modes[0]].compute_s:.2f}"]
        for mode in modes:
            prediction = by_key[world_size, mode]
            ratio = f" ({prediction.views_per_s / sync.views_per_s:.2f}x)" if sync and mode != "sync" else ""
            cells.append(f"{1e3 * prediction.step_s:.2f} / {prediction.views_per_s:.1f}{ratio}")
        rows.append(cells)
    return markdown_table(["W", "views dealt", "slowest rank's compute ms",
                           *(f"{mode} ms / views/s" for mode in modes)], rows)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def plot_scaling(
    predictions: Sequence[Prediction],
    links: Sequence[Link],
    out: Path,
    measured: Sequence[tuple[str, int, float]] = (),
) -> Path:
    """views/s against W on log-log axes (linear scaling is a line of slope 1), one curve per mode, one panel per
    link; ``measured`` (mode, W, views/s) of the runs, as crosses in their mode's colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(links), figsize=(5.5 * len(links), 4.2), squeeze=False)
    for axis, link in zip(axes[0], links):
        mine = [p for p in predictions if p.link == link.name]
        for mode in dict.fromkeys(p.mode for p in mine):
            points = sorted((p.world_size, p.views_per_s) for p in mine if p.mode == mode)
            (line,) = axis.plot(*zip(*points), marker="o", label=mode, linestyle="--" if mode in OVERLAPPED else "-")
            runs = [(world_size, views) for run_mode, world_size, views in measured if run_mode == mode]
            if runs:
                axis.scatter(*zip(*runs), marker="x", s=60, color=line.get_color(), zorder=3,
                             label=f"{mode}, measured runs")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("world size W (GPUs)")
        axis.set_ylabel("predicted views / s")
        axis.set_title(describe_link(link), fontsize=10)
        axis.grid(True, alpha=0.3)
        axis.legend()
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out
