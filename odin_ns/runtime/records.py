"""The one record of a training unit and of its overlap window, as the runtime files it and every tool reads it.

The runtime times a unit with host seconds (CPU) or CUDA events (GPU) in a ``UnitTrace``; resolving the events waits
for the GPU, so traces are resolved into ``UnitRecord`` only when they are taken for logging (``RuntimeStats.take``),
and forgotten then: a run's memory does not grow with its steps. Logs are JSON lines of ``UnitRecord.to_json``;
``read_unit_log`` reads them back as records, and ``summarize`` is the one summary of a run's records.
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch

from odin_ns.sync.hazards import DelayBound

Stamp = float | torch.cuda.Event
SPANS = ("compute_s", "rerun_compute_s", "exposed_wait_s", "comm_s", "publish_s")
"""``compute_s`` the unit's forward+backward, ``rerun_compute_s`` its validation re-runs, ``exposed_wait_s`` time the
compute path was blocked on the unit's collectives, ``comm_s`` launch of its first collective to the observed
completion of its last (on the CPU completion is observed when waited for: an upper bound when the exchange was
hidden), ``publish_s`` its optimizer publication (a unit published inside its graph, one rank's captured unit,
has it in ``compute_s`` and 0 here)."""
HOST_TIMES = ("host_run_s", "host_between_s")
"""Host wall times, on every device: ``host_run_s`` the unit's ``run_unit`` call (launching its work, and its
exchange's and its predecessor's publication; on the CPU running them too), ``host_between_s`` from the previous
``run_unit``'s return to this one's start (the trainer's and nerfstudio's own work, the scheduler, logging). On a
GPU, a rank whose host is the slower one has the larger sum; the GPU spans above say whether its GPU waited."""
UNIT_LOG = "odin_units.jsonl"


def unit_log(run_dir: Path, rank: int) -> Path:
    """Where rank ``rank`` of a training run appends its unit records (JSON lines): ``odin_units.jsonl`` for rank 0,
    the run's summary that the tools read, ``odin_units_rank{r}.jsonl`` for the others, with their own waits and
    timings (window decisions are equal on every rank)."""
    return Path(run_dir) / (UNIT_LOG if rank == 0 else f"odin_units_rank{rank}.jsonl")


@dataclass(frozen=True)
class WindowRecord:
    """The overlap window of a unit: what of the previous unit's exchange it waited for, and what it read stale."""

    conflict_rows: int
    """Rows the previous unit updates that this unit reads on some rank (the RAW exposure); with predicted read
    scopes, the rows of the buckets both units' predictions touch (an upper bound, known without a host read)."""
    buckets: int
    """Row buckets of the exchange."""
    buckets_with_updates: int
    """Buckets holding rows the previous unit updates (the others carry nothing to publish)."""
    buckets_published_first: int
    """Buckets the unit waited for and published before it ran (those holding rows it reads, less delayed ones)."""
    delayed_rows: int = 0
    """throughput-first: conflicting rows read stale on purpose."""
    delayed_buckets: int = 0
    delayed_ratio: float = 0.0
    """throughput-first: the largest share, over reading ranks, of a rank's read scope that it read stale."""
    conflict_ratio: float = 0.0
    """throughput-first: conflicting rows over the read scope (all ranks)."""
    delay_bound: DelayBound | None = None
    """The bound on the skipped update of the delayed buckets (None: nothing delayed)."""
    refused_bound: DelayBound | None = None
    """The bound of the highest conflicting bucket published first (within the limits there: tau stopped it)."""
    predicted: bool = False
    """The window was decided from predicted read scopes (``odin_ns.sync.predicted``), on this rank alone."""

    @property
    def raw_admitted(self) -> bool:
        """The unit ran without waiting for any of the previous unit's buckets."""
        return self.buckets_published_first == 0

    @property
    def buckets_left_in_flight(self) -> int:
        return self.buckets_with_updates - self.buckets_published_first

    @property
    def overlapped(self) -> bool:
        """Part of the previous unit's exchange stayed in flight while this unit computed."""
        return self.buckets_left_in_flight > 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WindowRecord:
        bounds = {key: DelayBound(**data[key]) if data.get(key) else None for key in ("delay_bound", "refused_bound")}
        return cls(**{**data, **bounds})


@dataclass
class UnitRecord:
    """What happened to one unit on one rank (times in seconds, see ``SPANS``)."""

    unit_id: int
    mode: str
    structure_version: int
    exchange: str = ""
    """How its gradients travelled: dense, scoped, or local (one rank)."""
    reruns: int = 0
    bytes_exchanged: int = 0
    update_rows: int = 0
    """Rows its publication stepped (the update scope over all ranks)."""
    window: WindowRecord | None = None
    """Its overlap window against the unit before (None on sync's path)."""
    sync_path: bool = False
    """An overlapped mode ran this unit on sync's path (recent windows overlapped nothing)."""
    compute_s: float = 0.0
    rerun_compute_s: float = 0.0
    exposed_wait_s: float = 0.0
    comm_s: float = 0.0
    publish_s: float = 0.0
    host_run_s: float = 0.0
    host_between_s: float = 0.0
    """See ``HOST_TIMES`` (0 for the first unit, and in logs written before they were recorded)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["window"] = self.window.to_json() if self.window is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UnitRecord:
        known = {f.name for f in fields(cls)}
        window = data.get("window")
        return cls(**{
            **{key: value for key, value in data.items() if key in known},
            "window": WindowRecord.from_json(window) if window else None,
        })


def read_unit_log(path: Path) -> list[UnitRecord]:
    """The unit records of one rank's log (``unit_log``)."""
    return [UnitRecord.from_json(json.loads(line)) for line in Path(path).read_text().splitlines() if line.strip()]


def write_unit_log(path: Path, records: Iterable[UnitRecord]) -> None:
    """Append ``records`` to a unit log."""
    with open(path, "a") as log:
        log.writelines(json.dumps(record.to_json()) + "\n" for record in records)


@dataclass(frozen=True)
class UnitSummary:
    """A run's records summed up: counts over all records, per-unit means of spans and bytes."""

    units: int
    reruns: int
    windows: int
    windows_admitted: int
    """Windows in which the unit waited for none of the previous unit's buckets."""
    windows_overlapped: int
    """Windows in which part of the previous exchange stayed in flight while the unit computed."""
    buckets_overlapped_fraction: float | None
    """Share of the windows' buckets left in flight (None without windows)."""
    units_on_sync_path: int
    delayed_windows: int
    delayed_rows: int
    """throughput-first: conflicting rows read stale, over all windows."""
    delayed_ratio_max: float
    """throughput-first: the largest ``WindowRecord.delayed_ratio`` (0 without windows)."""
    delay_bound_max: DelayBound | None
    """throughput-first: the largest skipped update that a delayed read was admitted with, per component (None:
    nothing delayed)."""
    bytes_exchanged: float
    compute_s: float
    rerun_compute_s: float
    exposed_wait_s: float
    comm_s: float
    publish_s: float
    host_run_s: float
    host_between_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(records: Sequence[UnitRecord]) -> UnitSummary:
    """The summary of ``records`` (ValueError for none: a run that published no unit has nothing to summarize)."""
    if not records:
        raise ValueError("no unit records to summarize")
    windows = [record.window for record in records if record.window is not None]
    buckets = sum(window.buckets for window in windows)
    bounds = [window.delay_bound for window in windows if window.delay_bound is not None]

    def mean(name: str) -> float:
        return statistics.fmean(getattr(record, name) for record in records)

    return UnitSummary(
        units=len(records),
        reruns=sum(record.reruns for record in records),
        windows=len(windows),
        windows_admitted=sum(window.raw_admitted for window in windows),
        windows_overlapped=sum(window.overlapped for window in windows),
        buckets_overlapped_fraction=(
            1 - sum(window.buckets_published_first for window in windows) / buckets if buckets else None
        ),
        units_on_sync_path=sum(record.sync_path for record in records),
        delayed_windows=sum(1 for window in windows if window.delayed_rows),
        delayed_rows=sum(window.delayed_rows for window in windows),
        delayed_ratio_max=max((window.delayed_ratio for window in windows), default=0.0),
        delay_bound_max=functools.reduce(DelayBound.max, bounds) if bounds else None,
        bytes_exchanged=mean("bytes_exchanged"),
        **{name: mean(name) for name in (*SPANS, *HOST_TIMES)},
    )


class Clock:
    """Timestamps on the host (CPU runs) or CUDA events recorded on the current stream (GPU runs)."""

    def __init__(self, device: torch.device):
        self._cuda = device.type == "cuda"

    def now(self) -> Stamp:
        if not self._cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event


def seconds_between(start: Stamp, end: Stamp) -> float:
    """Elapsed seconds between two stamps of the same clock (waits for CUDA events: call off the hot path)."""
    if isinstance(start, float):
        return end - start
    end.synchronize()
    return start.elapsed_time(end) / 1000.0


def latest(stamps: list[Stamp]) -> Stamp:
    """The latest of ``stamps``: the largest host time, or the last of CUDA events recorded in order on one stream."""
    return max(stamps) if isinstance(stamps[0], float) else stamps[-1]


@dataclass
class UnitTrace:
    """A unit's record while the runtime works on it: the record's counters, spans as unresolved stamps, and the
    update count as a device tensor."""

    record: UnitRecord
    update_rows: int | torch.Tensor = 0
    spans: dict[str, list[tuple[Stamp, Stamp]]] = field(default_factory=dict)

    def add_span(self, name: str, start: Stamp, end: Stamp) -> None:
        if name not in SPANS:
            raise ValueError(f"unknown span {name!r}; spans are {SPANS}")
        self.spans.setdefault(name, []).append((start, end))

    def resolve(self) -> UnitRecord:
        """The record, with spans summed to seconds and device counters read (waits for the GPU)."""
        spans = {name: sum(seconds_between(*span) for span in self.spans.get(name, ())) for name in SPANS}
        return replace(self.record, update_rows=int(self.update_rows), **spans)


@dataclass
class RuntimeStats:
    """Traces of the units published and not yet taken, in publication order (this rank's view; window decisions
    are equal on all ranks, re-runs and timings are per rank)."""

    pending: list[UnitTrace] = field(default_factory=list)

    def file(self, trace: UnitTrace) -> None:
        self.pending.append(trace)

    def take(self) -> list[UnitRecord]:
        """Resolve the pending traces into records and forget them (waits for the GPU: call at logging steps)."""
        records = [trace.resolve() for trace in self.pending]
        self.pending.clear()
        return records
