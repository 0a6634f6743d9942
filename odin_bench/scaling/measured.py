"""What measured training runs say, in the terms the replay needs: per-view compute times, the host time of a step
outside the runtime's spans, publication time and the number of Gaussians.

Unit records come from each rank's unit log through ``read_unit_log`` (one log per rank: the run's world size is the
number of logs). The unit log times the runtime's own spans, not the whole training iteration, so the measured step
time comes from one of three references (``StepTime``):

* ``tensorboard``: nerfstudio's ``Train Iter (time)`` scalars in the run's event files (their mean);
* ``bench``: the ``step_s`` an ``odin-bench bench`` results.json holds for the run (the median of the same scalars),
  matched to the run directory by the trailing names of its path (``<label>/<scene>/<method>/<timestamp>``);
* ``units``: the unit logs alone: per unit, the slowest rank's compute + re-run + exposed wait + publication. It
  holds no host time outside the runtime's spans (data, logging, Python, launching the collectives), so a step
  measured this way is the GPU-timed part of the step only, and its host time outside the spans is 0 by definition.

The Gaussian count comes from tensorboard's ``gaussian_count``, else from the bytes a dense exchange moved (rank 0's
``bytes_exchanged``: the scope all-gather's bitmaps and every row of the gradient table), else from ``--gaussians``.
Like ``odin-bench bench``, only the second half of a run counts: the first half is warm-up.

Records that carry host times (``HOST_TIMES``) also give what a peer adds to a host-bound step (``HostBound``): the
slowest of W hosts, drawn from the 1-rank runs' host time per unit, and a host cost per collective launched. The units
that carry nerfstudio's logging work are slow on every rank at once, so they are drawn apart from the rest; the
logging cadence (``steps_per_log``) comes from ``--steps-per-log`` where given, else from the run's ``config.yml``,
else from the bench's results.json.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import yaml

from odin_ns.run_config import read_run_config
from odin_ns.runtime.records import UnitRecord, WindowRecord, read_unit_log, unit_log
from odin_ns.schedule.plan import SchedulePlan

STEP_TIME_TAG = "Train Iter (time)"
"""nerfstudio's per-iteration time (``EventName.ITER_TRAIN_TIME``), written as a running mean over its last 20
steps."""
GAUSSIAN_COUNT_TAG = "Train Metrics Dict/gaussian_count"
StepTime = Literal["tensorboard", "bench", "units"]
"""Where a run's measured step time comes from (module docstring)."""


class ScalingInputError(ValueError):
    """Input the model cannot use; the message is the one line ``odin-bench simulate`` prints."""


def steady(values: Sequence) -> list:
    """The second half of a run's per-step values (``odin-bench bench``'s rule: the first half is warm-up)."""
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
    """Steady-state training iteration time from ``step_time`` (None where that reference has none): tensorboard's
    mean, a bench's median, or the unit logs' mean slowest span sum."""
    gaussians: int | None
    """Median steady-state Gaussian count (tensorboard's, else the dense exchange's; None without either)."""
    step_time: StepTime = "tensorboard"
    steps_per_log: int | None = None
    """nerfstudio's ``logging.steps_per_log`` of the run (``read_steps_per_log``, the bench's, or given); None:
    unknown."""
    steps_per_log_source: str = "unknown"
    """Where ``steps_per_log`` came from, in words."""

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
    def host_times(self) -> np.ndarray | None:
        """Each unit's host wall time H = ``host_run_s + host_between_s`` (``HOST_TIMES``: the rank's whole loop
        for the unit, trainer and data included), every rank's units; None for logs written before they were
        recorded."""
        records = [record for records in self.ranks for record in records]
        if not all(record.host_run_s > 0 for record in records):
            return None
        return np.array([record.host_run_s + record.host_between_s for record in records])

    @property
    def logging_units(self) -> np.ndarray | None:
        """Which of ``host_times``' units (same order) carry a logging step's host work (``logging_units``); None
        where ``steps_per_log`` is unknown."""
        if self.steps_per_log is None:
            return None
        return logging_units([record.unit_id for records in self.ranks for record in records], self.steps_per_log)

    @property
    def overhead_s(self) -> float | None:
        """Host time of a step outside the spans (data, projection for the read scope, logging, Python, launching
        the collectives): the measured step time less ``span_s``; 0 when the step time is the unit logs' own (it
        holds nothing outside the spans)."""
        if self.step_s is None:
            return None
        return 0.0 if self.step_time == "units" else self.step_s - self.span_s

    def describe(self) -> str:
        return f"{self.path} ({self.mode}, {self.world_size} rank(s) x {self.views_per_rank} view(s))"


def load_run(
    path: Path,
    views_per_rank: int,
    step_time: StepTime = "tensorboard",
    bench: Sequence[BenchRun] = (),
    steps_per_log: int | None = None,
) -> MeasuredRun:
    """Read a run directory holding ``odin_units.jsonl`` (and ``odin_units_rank{r}.jsonl`` per further rank), with
    its step time from ``step_time`` (``bench``: the runs of bench results.json files, ``load_bench``) and its
    logging cadence from ``steps_per_log`` where given, else its ``config.yml``, else (``bench``) the bench's."""
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
    counts = steady(scalars.get(GAUSSIAN_COUNT_TAG, []))
    cadence = (steps_per_log, "given") if steps_per_log is not None else (read_steps_per_log(run_dir), "config.yml")
    if step_time == "tensorboard":
        step_times = steady(scalars.get(STEP_TIME_TAG, []))
        step_s = statistics.fmean(step_times) if step_times else None
    elif step_time == "bench":
        matched = bench_run_of(run_dir, bench, len(ranks), views_per_rank)
        step_s = matched.step_s
        if cadence[0] is None and matched.steps_per_log is not None:
            cadence = (matched.steps_per_log, "bench results.json")
    elif step_time == "units":
        step_s = slowest_span_s(ranks)
    else:
        raise ScalingInputError(f"unknown step time reference {step_time!r}: tensorboard, bench or units")
    return MeasuredRun(
        path=run_dir,
        ranks=ranks,
        views_per_rank=views_per_rank,
        step_s=step_s,
        gaussians=round(statistics.median(counts)) if counts else None,
        step_time=step_time,
        steps_per_log=cadence[0],
        steps_per_log_source=cadence[1] if cadence[0] is not None else "unknown",
    )


def read_steps_per_log(run_dir: Path) -> int | None:
    """``logging.steps_per_log`` of the nerfstudio ``config.yml`` in ``run_dir`` (None without the file or the
    key), read as plain data (``odin_ns.run_config``): nothing it names is imported or built."""
    path = run_dir / "config.yml"
    if not path.is_file():
        return None
    try:
        config = read_run_config(path)
        every = config.get("logging", {}).get("steps_per_log") if isinstance(config, dict) else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError) as error:
        raise ScalingInputError(f"cannot read {path}: {str(error).splitlines()[0]}") from None
    if every is None:
        return None
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ScalingInputError(f"{path}: logging.steps_per_log is {every!r}, not a step count")
    return every


def slowest_span_s(ranks: Sequence[Sequence[UnitRecord]]) -> float:
    """Mean over the units every rank logged of the slowest rank's compute + re-run + exposed wait + publication:
    the step time the unit logs themselves measure (GPU-timed spans, no host time outside them)."""
    by_unit = defaultdict(list)
    for records in ranks:
        for record in records:
            by_unit[record.unit_id].append(
                record.compute_s + record.rerun_compute_s + record.exposed_wait_s + record.publish_s
            )
    return statistics.fmean(max(spans) for spans in by_unit.values() if len(spans) == len(ranks))


@dataclass(frozen=True)
class BenchRun:
    """One run of an ``odin-bench bench`` results.json: its measured step time and where it ran."""

    run_dir: Path
    """The run directory as the bench wrote it (on the machine that ran it)."""
    step_s: float
    """Median over the second half of the steps of nerfstudio's per-iteration time."""
    ranks: int
    views_per_rank: int
    source: Path
    steps_per_log: int | None = None
    """The bench's ``--steps-per-log`` (None in results written before it had one)."""


def load_bench(paths: Sequence[Path]) -> list[BenchRun]:
    """Every run of the bench results.json files ``paths``."""
    runs = []
    for path in paths:
        try:
            results = json.loads(Path(path).read_text())
            every = results.get("steps_per_log")
            runs += [BenchRun(Path(run["run_dir"]), float(run["step_s"]), int(run["ranks"]),
                              int(run.get("views_per_rank", 1)), Path(path), None if every is None else int(every))
                     for run in results["runs"]]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ScalingInputError(f"cannot read bench results {path}: {error!r}") from None
    return runs


def bench_run_of(run_dir: Path, bench: Sequence[BenchRun], ranks: int, views_per_rank: int) -> BenchRun:
    """The bench run of ``run_dir``: the one whose run directory shares the longest tail of folder names with it
    (at least the timestamp folder), which must be one run and agree on ranks and views per rank."""
    if not bench:
        raise ScalingInputError("--step-time bench needs --bench with the bench's results.json")

    def shared_tail(run: BenchRun) -> int:
        shared = 0
        for mine, theirs in zip(reversed(run_dir.resolve().parts), reversed(run.run_dir.parts)):
            if mine != theirs:
                break
            shared += 1
        return shared

    longest = max(shared_tail(run) for run in bench)
    matches = [run for run in bench if shared_tail(run) == longest] if longest else []
    if len(matches) != 1:
        what = "no bench run" if not matches else f"{len(matches)} bench runs"
        raise ScalingInputError(f"{what} in {sorted({str(run.source) for run in bench})} for {run_dir} (matched by "
                                "the trailing folder names of the bench's run_dir)")
    (match,) = matches
    if (match.ranks, match.views_per_rank) != (ranks, views_per_rank):
        raise ScalingInputError(
            f"{run_dir}: the bench ran {match.run_dir} on {match.ranks} rank(s) x {match.views_per_rank} view(s), "
            f"the unit logs and --views-per-rank say {ranks} x {views_per_rank}"
        )
    return match


def _records(log: Path) -> list[UnitRecord]:
    try:
        return read_unit_log(log)
    except (ValueError, TypeError) as error:  # not JSON lines, or lines that are not unit records
        raise ScalingInputError(f"{log} is not a unit log: {str(error).splitlines()[0]}") from None


H200_COLLECTIVE_LAUNCH_S = 0.31e-3
"""Host time one collective's launch adds to a unit when nothing else says (``HostBound.fit``): the median over the
six 2-GPU sync runs of 2026-12-01 (2 x H200, cup77, one view per rank; three seeds with 10
collectives per unit and three with 2) of (host per unit - E[max_2 H] of three 1-GPU runs of the same machine, their
logging units drawn apart from the rest: 7.86 ms) / collectives per unit. The runs range from 0.12 to 1.20 ms
(docs/scaling.md, "Host-bound steps: what a peer adds"): one machine's host and NCCL, not a constant of nature.
(Drawn as one group, E[max_2 H] was 8.02 ms and this median 0.28 ms.)"""


def expected_max(samples: np.ndarray, draws: int) -> float:
    """E[max of ``draws`` independent draws from the empirical distribution of ``samples``], exactly: with the n
    samples sorted, x_(i) is the maximum when every draw is at most x_(i) and not every draw at most x_(i-1), which
    has chance (i/n)^W - ((i-1)/n)^W. One draw gives the mean."""
    ordered = np.sort(np.asarray(samples, dtype=float))
    below = np.arange(len(ordered) + 1) / len(ordered)
    return float(np.dot(ordered, below[1:] ** draws - below[:-1] ** draws))


LOGGING_UNIT_AFTER = 1
"""How many units after a logging step its host work lands. nerfstudio logs at step s once the unit of step s has
returned (``odin_ns/trainer.py``: the unit records and scalars written, the device read for the finite check, the
ranks' stop agreement, nerfstudio's own writers), so the work falls in unit s + 1's ``host_between_s``. On 2-H200
cup77 runs of 2026-12-01 (steps_per_log 10), units 10k + 1 take 9.7-10.1 ms on average on one GPU and 11.0-16.0 ms on
the ranks of the no-exchange 2-GPU runs; the units of every other ``id % 10``, 10k included, 5.9-7.5 ms."""


def logging_units(unit_ids: Sequence[int] | np.ndarray, steps_per_log: int) -> np.ndarray:
    """Which of ``unit_ids`` (= training steps) carry a logging step's host work: the unit ``LOGGING_UNIT_AFTER``
    after each multiple of ``steps_per_log``."""
    return (np.asarray(unit_ids, dtype=np.int64) - LOGGING_UNIT_AFTER) % steps_per_log == 0


def expected_slowest(samples: np.ndarray, draws: int, logging: np.ndarray | None = None) -> float:
    """E[the slowest of ``draws`` ranks' host time at one unit], exactly, where the units ``logging`` marks come on
    every rank at once: each group's ``expected_max`` weighted by its share f of the units,
    f E[max_W H_log] + (1 - f) E[max_W H_rest]. Within a group the ranks draw independently. Without ``logging``, or
    with one group empty, ``expected_max`` of all the samples."""
    samples = np.asarray(samples, dtype=float)
    if logging is None or not 0 < int(np.count_nonzero(logging)) < len(samples):
        return expected_max(samples, draws)
    logging = np.asarray(logging, dtype=bool)
    share = np.count_nonzero(logging) / len(samples)
    return share * expected_max(samples[logging], draws) + (1 - share) * expected_max(samples[~logging], draws)


def slowest_excess(samples: np.ndarray, draws: int, logging: np.ndarray | None = None) -> float:
    """How much the slowest of ``draws`` draws exceeds the mean: E[max_W] - mean (``expected_slowest``, the units
    ``logging`` marks drawn apart), 0 for one draw (and never below 0, which only rounding could give)."""
    if draws <= 1:
        return 0.0
    return max(expected_slowest(samples, draws, logging) - float(np.mean(samples)), 0.0)


@dataclass(frozen=True)
class HostBound:
    """What W - 1 peers add to a host-bound step (docs/scaling.md, "Host-bound steps: what a peer adds").

    A rank's host spends H per unit (``MeasuredRun.host_times``). Where the step reads the device on the host after
    the exchange, that read waits until every rank has launched the unit's collectives: the ranks meet once per
    unit, so a W-rank unit takes the slowest of W hosts, plus the host cost of launching the unit's collectives.
    Every rank runs nerfstudio's logging work in the same unit (``logging_units``), so the slowest host is drawn per
    group (``expected_slowest``): at a logging unit the slowest of W of the 1-rank runs' logging units, at any other
    the slowest of W of the rest. Without the logging cadence, all units are one group (H drawn independently). The
    collectives come from the caller (the runtime's plan, ``odin_bench.scaling.replay.Wire.collectives``)."""

    host: np.ndarray
    """H of every steady unit of the 1-rank runs."""
    compute: np.ndarray
    """The same units' ``compute_s``."""
    collective_launch_s: float
    """Host time one collective's launch adds to a unit."""
    launch_source: str
    """Where ``collective_launch_s`` came from, in words."""
    logging: np.ndarray | None = None
    """Which of ``host``'s units carry a logging step's host work; None: one group."""
    grouping: str = "all units one group"
    """How ``host``'s units are grouped, in words."""

    @classmethod
    def fit(
        cls, runs: Sequence[MeasuredRun], counted: Sequence[tuple[MeasuredRun, float]], launch_s: float | None
    ) -> HostBound:
        """From the 1-rank ``runs``' host times, with ``launch_s``, else fitted on ``counted``: runs on 2+ ranks,
        each with its collectives per unit. Each such run's host per unit (the mean H of all its ranks: in lockstep
        every rank's units span the same wall time) less E[max_W H] at its W, over its collectives, is one estimate
        of the launch cost; the median of them counts (one odd run moves it less than a mean). Without either,
        ``H200_COLLECTIVE_LAUNCH_S``."""
        single = [run for run in runs if run.world_size == 1]
        launched = [(run, collectives) for run, collectives in counted if collectives > 0 and launch_s is None]
        untimed = [run.describe() for run in (*single, *(run for run, _ in launched)) if run.host_times is None]
        if not single or untimed:
            raise ScalingInputError("the host-bound term needs 1-rank runs, and unit logs with host times (host_run_s, "
                                    f"host_between_s): {untimed[0] if untimed else 'no 1-rank run'}")
        host = np.concatenate([run.host_times for run in single])
        compute = np.array([record.compute_s for run in single for records in run.ranks for record in records])
        logging, grouping = _logging_groups(single)
        if launch_s is not None:
            source = "given"
        elif launched:
            launch_s = statistics.median(
                (float(run.host_times.mean()) - expected_slowest(host, run.world_size, logging)) / collectives
                for run, collectives in launched
            )
            source = f"fitted on {len(launched)} run(s) on 2+ ranks"
        else:
            launch_s, source = H200_COLLECTIVE_LAUNCH_S, "no run on 2+ ranks to fit it on: the H200 default"
        return cls(host, compute, launch_s, source, logging, grouping)

    def slowest_s(self, world_size: int) -> float:
        """E[max_W H]: the slowest of ``world_size`` hosts at a unit, drawn per group (``expected_slowest``)."""
        return expected_slowest(self.host, world_size, self.logging)

    def spread_s(self, world_size: int) -> float:
        """E[max_W H] - mean H (``slowest_excess``), 0 on one rank."""
        return slowest_excess(self.host, world_size, self.logging)

    def host_per_unit_s(self, world_size: int, collectives: float) -> float:
        """Host wall time per unit at ``world_size`` ranks: E[max_W H] + ``collectives`` launches (one rank: mean H)."""
        return self.slowest_s(world_size) + self._launches_s(world_size, collectives)

    def added_s(self, world_size: int, collectives: float) -> float:
        """The host time a rank adds at ``world_size`` ranks: (E[max_W H] - mean H) + ``collectives`` launches; 0 on
        one rank."""
        return self.spread_s(world_size) + self._launches_s(world_size, collectives)

    def _launches_s(self, world_size: int, collectives: float) -> float:
        """Host time of launching ``collectives`` (one rank launches none)."""
        return collectives * self.collective_launch_s if world_size > 1 else 0.0

    def compute_spread_s(self, world_size: int) -> float:
        """E[max_W c] - mean c of the same units' compute, drawn independently as the replay draws each rank's
        compute (the logging units' compute is no slower): the part of ``added_s`` that the replay already charges,
        as it waits for the slowest of W ranks' compute."""
        return slowest_excess(self.compute, world_size)


def _logging_groups(single: Sequence[MeasuredRun]) -> tuple[np.ndarray | None, str]:
    """Which of the 1-rank runs' units (``MeasuredRun.host_times``' order) carry logging work, and how they are
    grouped, in words; one group (None) where a run's logging cadence is unknown."""
    unknown = [run for run in single if run.steps_per_log is None]
    if unknown:
        return None, (f"steps_per_log unknown for {unknown[0].path} (no config.yml logging.steps_per_log, no bench "
                      "steps_per_log, no --steps-per-log): all units one group, drawn independently")
    logging = np.concatenate([run.logging_units for run in single])
    every = ", ".join(str(value) for value in sorted({run.steps_per_log for run in single}))
    sources = ", ".join(sorted({run.steps_per_log_source for run in single}))
    what = f"logging units (the unit after each logging step, steps_per_log {every} from {sources})"
    if not 0 < np.count_nonzero(logging) < len(logging):
        return None, f"{what} {np.count_nonzero(logging)} of {len(logging)}: all units one group, drawn independently"
    return logging, f"{what} {np.count_nonzero(logging)} of {len(logging)}, drawn apart from the rest"


@dataclass(frozen=True)
class Calibration:
    """The measured quantities the replay draws from."""

    view_seconds: np.ndarray
    """Measured per-view compute times for 2+ ranks: a unit's ``compute_s`` on one rank over the views it rendered,
    from the runs on 2+ ranks (from every run when none ran on 2+ ranks)."""
    view_samples: dict[int, np.ndarray] | None
    """The same times by training-view index, where a plan says which views each rank rendered at each step."""
    single_view_seconds: np.ndarray
    """The same for one rank: from the 1-rank runs (from every run when none ran on one rank)."""
    single_view_samples: dict[int, np.ndarray] | None
    overhead_s: dict[str, float]
    """Host time per step outside the runtime's spans on 2+ ranks, by mode (``MeasuredRun.overhead_s``, averaged
    over the mode's runs on 2+ ranks); a mode no such run measured takes sync's on 2+ ranks, else
    ``single_overhead_s``. It holds what running on several ranks adds on the host (launching the collectives,
    waiting for a peer outside the GPU-timed spans), which a 1-rank run cannot show."""
    single_overhead_s: float
    """Host time per step outside the spans on one rank: the 1-rank runs' mean; without a timed 1-rank run, sync's
    on 2+ ranks, else the fewest ranks' run's, else 0 (no run has a step time)."""
    measured_overheads: tuple[str, ...]
    """The modes some run on 2+ ranks measured the host time of."""
    publish_s: float
    """Mean publication time per unit."""
    gaussians: int
    visible_share: float
    """A view's share of the Gaussians, from the units' update scopes (``per_view_share``)."""
    views_per_rank: int
    sources: tuple[str, ...]
    """The runs it was fitted on."""
    host_bound: HostBound | None = None
    """Where set, the host time past one rank is what peers add to a host-bound step (``host_s``), and compute
    times are the 1-rank runs' at every W: both grow from one rank's host, whose H holds the compute."""

    def compute_samples(self, world_size: int) -> tuple[np.ndarray, dict[int, np.ndarray] | None]:
        """Per-view compute times at ``world_size`` ranks, pooled and by view."""
        if world_size == 1 or self.host_bound is not None:
            return self.single_view_seconds, self.single_view_samples
        return self.view_seconds, self.view_samples

    def host_s(self, mode: str, world_size: int, collectives: float = 0) -> float:
        """Host time per step outside the spans of ``mode`` at ``world_size`` ranks (one rank runs every mode as
        sync), whose units launch ``collectives`` each. Host-bound: one rank's, plus what the other ranks add
        (``HostBound.added_s``) less the spread of the slowest rank's compute, which the replay charges already."""
        if world_size == 1:
            return self.single_overhead_s
        if self.host_bound is None:
            return self.overhead_s[mode]
        bound = self.host_bound
        return self.single_overhead_s + bound.added_s(world_size, collectives) - bound.compute_spread_s(world_size)


def calibrate(
    runs: Sequence[MeasuredRun], plan: SchedulePlan | None, gaussians: int | None, modes: Sequence[str]
) -> Calibration:
    """Fit ``Calibration`` on ``runs`` (all with the same views per rank); ``plan`` attributes compute times to
    views; ``gaussians`` overrides the runs' Gaussian count."""
    views_per_rank = runs[0].views_per_rank
    several_ranks = [run for run in runs if run.world_size > 1]
    view_seconds, view_samples = _view_times(several_ranks or runs, plan, views_per_rank)
    single_view_seconds, single_view_samples = _view_times(
        [run for run in runs if run.world_size == 1] or runs, plan, views_per_rank
    )
    counts = [run.gaussians for run in runs if run.gaussians is not None]
    if gaussians is None and not counts:
        raise ScalingInputError(
            f"no Gaussian count in {runs[0].path} (no gaussian_count scalars: train with --vis tensorboard; no dense "
            "exchange on 2+ ranks to count them by) and no --gaussians"
        )
    count = gaussians if gaussians is not None else round(statistics.median(counts))
    timed = [run for run in runs if run.overhead_s is not None]
    several = [run for run in timed if run.world_size > 1]
    overheads = {mode: statistics.fmean(run.overhead_s for run in several if run.mode == mode)
                 for mode in {run.mode for run in several}}
    single = [run.overhead_s for run in timed if run.world_size == 1]
    if single:
        single_overhead = statistics.fmean(single)
    else:
        single_overhead = overheads.get("sync", min(timed, key=lambda run: run.world_size).overhead_s if timed else 0.0)
    fallback = overheads.get("sync", single_overhead)
    return Calibration(
        view_seconds=view_seconds,
        view_samples=view_samples,
        single_view_seconds=single_view_seconds,
        single_view_samples=single_view_samples,
        overhead_s={mode: overheads.get(mode, fallback) for mode in modes},
        single_overhead_s=single_overhead,
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


def _view_times(
    runs: Sequence[MeasuredRun], plan: SchedulePlan | None, views_per_rank: int
) -> tuple[np.ndarray, dict[int, np.ndarray] | None]:
    """Every per-view compute time of ``runs``, and, with a plan, the same by the training view it was dealt."""
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
    samples = {view: np.asarray(seconds) for view, seconds in by_view.items()} if plan is not None else None
    return np.asarray(view_seconds), samples


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
