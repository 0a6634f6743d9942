"""What measured training runs say, in the terms the replay needs: per-view compute times, the host time of a step
outside the runtime's spans, publication time and the number of Gaussians.

Unit records come from each rank's unit log through ``read_unit_log`` (one log per rank: the run's world size is the
number of logs); the step time and the Gaussian count come from nerfstudio's tensorboard scalars, which the unit
log does not hold (the runtime times its own spans, not the whole training iteration). Like ``odin-ns bench``, only
the second half of a run counts: the first half is warm-up.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from odin_ns.runtime.records import UnitRecord, WindowRecord, read_unit_log, unit_log
from odin_ns.schedule.plan import SchedulePlan

STEP_TIME_TAG = "Train Iter (time)"
"""nerfstudio's per-iteration time (``EventName.ITER_TRAIN_TIME``), written as a running mean over its last 20
steps."""
GAUSSIAN_COUNT_TAG = "Train Metrics Dict/gaussian_count"


class ScalingInputError(ValueError):
    """Input the model cannot use; the message is the one line ``odin-ns simulate`` prints."""


def steady(values: Sequence) -> list:
    """The second half of a run's per-step values (``odin-ns bench``'s rule: the first half is warm-up)."""
    return list(values[len(values) // 2 :])


def tensorboard_scalars(run_dir: Path) -> dict[str, list[float]]:
    """Every scalar series of the run's tensorboard event files, by tag (empty without event files)."""
    if not any(run_dir.glob("events.out.tfevents.*")):
        return {}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [event.value for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@dataclass(frozen=True)
class MeasuredRun:
    """One training run: every rank's steady-state unit records and, where it logged them, its step time and
    Gaussian count."""

    path: Path
    ranks: tuple[tuple[UnitRecord, ...], ...]
    """Unit records of each rank (rank 0 first), second half of the run."""
    views_per_rank: int
    step_s: float | None
    """Mean steady-state training iteration time (None without tensorboard scalars): a mean, as the spans it is
    compared with and the predictions are (``odin-ns bench`` reports medians)."""
    gaussians: int | None
    """Median steady-state Gaussian count (None without tensorboard scalars)."""

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def mode(self) -> str:
        return self.ranks[0][-1].mode

    @property
    def views_per_unit(self) -> int:
        return self.world_size * self.views_per_rank

    @property
    def windows(self) -> list[WindowRecord]:
        """Overlap windows (decisions are equal on every rank, so rank 0's)."""
        return [record.window for record in self.ranks[0] if record.window is not None]

    @property
    def span_s(self) -> float:
        """Mean time rank 0's units spent on the compute path in the runtime's spans: compute, re-runs, waits on
        collectives (including waits for slower ranks) and publication."""
        return statistics.fmean(
            record.compute_s + record.rerun_compute_s + record.exposed_wait_s + record.publish_s
            for record in self.ranks[0]
        )

    @property
    def slowest_compute_s(self) -> float:
        """Mean over units of the slowest rank's compute: what a step waits for before its exchange can end."""
        by_unit = defaultdict(list)
        for records in self.ranks:
            for record in records:
                by_unit[record.unit_id].append(record.compute_s)
        return statistics.fmean(max(seconds) for seconds in by_unit.values() if len(seconds) == self.world_size)

    @property
    def overhead_s(self) -> float | None:
        """Host time of a step outside the spans (data, projection for the read scope, logging, Python): the
        measured step time less ``span_s``."""
        return None if self.step_s is None else self.step_s - self.span_s

    def describe(self) -> str:
        return f"{self.path} ({self.mode}, {self.world_size} rank(s) x {self.views_per_rank} view(s))"


def load_run(path: Path, views_per_rank: int) -> MeasuredRun:
    """Read a run directory holding ``odin_units.jsonl`` (and ``odin_units_rank{r}.jsonl`` per further rank)."""
    run_dir = path.parent if path.is_file() else path
    logs = []
    while unit_log(run_dir, len(logs)).is_file():
        logs.append(unit_log(run_dir, len(logs)))
    if not logs:
        raise ScalingInputError(f"no unit log {unit_log(run_dir, 0).name} in {run_dir}")
    ranks = tuple(tuple(steady(_records(log))) for log in logs)
    for log, records in zip(logs, ranks):
        if not records:
            raise ScalingInputError(f"{log} holds too few unit records (the first half of a run is warm-up)")
    scalars = tensorboard_scalars(run_dir)
    step_times = steady(scalars.get(STEP_TIME_TAG, []))
    counts = steady(scalars.get(GAUSSIAN_COUNT_TAG, []))
    return MeasuredRun(
        path=run_dir,
        ranks=ranks,
        views_per_rank=views_per_rank,
        step_s=statistics.fmean(step_times) if step_times else None,
        gaussians=round(statistics.median(counts)) if counts else None,
    )


def _records(log: Path) -> list[UnitRecord]:
    try:
        return read_unit_log(log)
    except (ValueError, TypeError) as error:  # not JSON lines, or lines that are not unit records
        raise ScalingInputError(f"{log} is not a unit log: {str(error).splitlines()[0]}") from None


@dataclass(frozen=True)
class Calibration:
    """The measured quantities the replay draws from."""

    view_seconds: np.ndarray
    """Every measured per-view compute time: a unit's ``compute_s`` on one rank over the views it rendered."""
    view_samples: dict[int, np.ndarray] | None
    """The same times by training-view index, where a plan says which views each rank rendered at each step."""
    overhead_s: dict[str, float]
    """Host time per step outside the runtime's spans, by mode (``MeasuredRun.overhead_s``, averaged over the runs
    of that mode); a mode that no run measured takes sync's, else the run with the fewest ranks', else 0 (no run
    logged step times)."""
    measured_overheads: tuple[str, ...]
    """The modes some run measured the host time of."""
    publish_s: float
    """Mean publication time per unit."""
    gaussians: int
    visible_share: float
    """A view's share of the Gaussians, from the units' update scopes (``per_view_share``)."""
    views_per_rank: int
    sources: tuple[str, ...]
    """The runs it was fitted on."""


def calibrate(
    runs: Sequence[MeasuredRun], plan: SchedulePlan | None, gaussians: int | None, modes: Sequence[str]
) -> Calibration:
    """Fit ``Calibration`` on ``runs`` (all with the same views per rank); ``plan`` attributes compute times to
    views; ``gaussians`` overrides the runs' Gaussian count."""
    views_per_rank = runs[0].views_per_rank
    view_seconds, by_view = [], defaultdict(list)
    for run in runs:
        dealt = None if plan is None else _measured_plan(plan, run)
        for rank, records in enumerate(run.ranks):
            for record in records:
                seconds = record.compute_s / views_per_rank
                view_seconds.append(seconds)
                if dealt is not None:
                    for view in dealt.views_for(record.unit_id, rank):
                        by_view[view].append(seconds)
    counts = [run.gaussians for run in runs if run.gaussians is not None]
    if gaussians is None and not counts:
        raise ScalingInputError(
            f"no Gaussian count in {runs[0].path} (train with --vis tensorboard, which logs gaussian_count) "
            "and no --gaussians"
        )
    count = gaussians if gaussians is not None else round(statistics.median(counts))
    timed = [run for run in runs if run.overhead_s is not None]
    overheads = {mode: statistics.fmean(run.overhead_s for run in timed if run.mode == mode)
                 for mode in {run.mode for run in timed}}
    fallback = overheads.get("sync", min(timed, key=lambda run: run.world_size).overhead_s if timed else 0.0)
    return Calibration(
        view_seconds=np.asarray(view_seconds),
        view_samples={view: np.asarray(seconds) for view, seconds in by_view.items()} if plan is not None else None,
        overhead_s={mode: overheads.get(mode, fallback) for mode in modes},
        measured_overheads=tuple(sorted(mode for mode in overheads if mode in modes)),
        publish_s=statistics.fmean(record.publish_s for run in runs for records in run.ranks for record in records),
        gaussians=count,
        visible_share=statistics.fmean(
            per_view_share(statistics.fmean(r.update_rows for r in run.ranks[0]) / count, run.views_per_unit)
            for run in runs
        ),
        views_per_rank=views_per_rank,
        sources=tuple(run.describe() for run in runs),
    )


def per_view_share(union_share: float, views: int) -> float:
    """The share p one view covers when ``views`` views drawn independently cover ``union_share``:
    1 - (1 - p)^views = ``union_share``."""
    return 1.0 - (1.0 - min(union_share, 1.0)) ** (1.0 / views)


def _measured_plan(plan: SchedulePlan, run: MeasuredRun) -> SchedulePlan:
    """The plan as the run dealt it: the plan file's views at the run's world size and views per rank."""
    if run.views_per_unit > plan.num_views:
        raise ScalingInputError(
            f"{run.describe()} renders {run.views_per_unit} views per step but the plan has {plan.num_views}: "
            "not the plan of this run"
        )
    return plan.with_batch(run.world_size, views_per_rank=run.views_per_rank)
