"""Per-unit records of the runtime: compute, exposed wait, communication, hazard decisions, re-runs, bytes.

Timestamps are host seconds on the CPU and CUDA events on the GPU; events and device counters are resolved only when
a record is read (``as_dict``), so recording never synchronises the hot path.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

Stamp = float | torch.cuda.Event
SPANS = ("compute_s", "rerun_compute_s", "exposed_wait_s", "comm_s", "publish_s")
UNIT_LOG = "odin_units.jsonl"


def unit_log(run_dir: Path, rank: int) -> Path:
    """Where rank ``rank`` of a training run appends its unit records (JSON lines): ``odin_units.jsonl`` for rank 0,
    the run's summary that the tools read, ``odin_units_rank{r}.jsonl`` for the others, with their own waits and
    timings (hazard decisions are equal on every rank)."""
    return Path(run_dir) / (UNIT_LOG if rank == 0 else f"odin_units_rank{rank}.jsonl")


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
class UnitRecord:
    """What happened to one unit: its compute (and re-runs), the admission of its overlap window against the unit
    before it, and its own exchange and publication.

    Spans: ``compute_s`` the unit's forward+backward, ``rerun_compute_s`` its validation re-runs, ``exposed_wait_s``
    time the compute path was blocked on this unit's collectives, ``comm_s`` launch of its first collective to the
    observed completion of its last (on the CPU completion is observed when waited for, so this is an upper bound
    when the exchange was hidden), ``publish_s`` its selective Adam publication.
    """

    unit_id: int
    mode: str
    structure_version: int
    exchange: str = ""
    reruns: int = 0
    bytes_exchanged: int = 0
    update_rows: int | torch.Tensor | None = None
    window: dict[str, Any] | None = None
    sync_path: bool = False
    """An overlapped mode ran this unit on sync's path (a fallback stretch: recent windows overlapped nothing)."""
    spans: dict[str, list[tuple[Stamp, Stamp]]] = field(default_factory=dict)

    def add_span(self, name: str, start: Stamp, end: Stamp) -> None:
        if name not in SPANS:
            raise ValueError(f"unknown span {name!r}; spans are {SPANS}")
        self.spans.setdefault(name, []).append((start, end))

    def as_dict(self) -> dict[str, Any]:
        """JSON-able copy with spans summed to seconds and device counters read."""
        update_rows = self.update_rows
        return {
            "unit_id": self.unit_id,
            "mode": self.mode,
            "structure_version": self.structure_version,
            "exchange": self.exchange,
            "reruns": self.reruns,
            "bytes_exchanged": self.bytes_exchanged,
            "update_rows": int(update_rows) if update_rows is not None else None,
            "window": self.window,
            "sync_path": self.sync_path,
            **{name: sum(seconds_between(*span) for span in self.spans.get(name, ())) for name in SPANS},
        }


@dataclass
class RuntimeStats:
    """Records of the units published so far, in publication order (this rank's view; hazard decisions are equal
    on all ranks, re-runs and timings are per rank)."""

    records: list[UnitRecord] = field(default_factory=list)

    def as_dicts(self) -> list[dict[str, Any]]:
        return [record.as_dict() for record in self.records]

    def summary(self) -> dict[str, Any]:
        """Totals over all records, with overlap windows counted per hazard kind and decision."""
        rows = self.as_dicts()
        windows: dict[str, Counter] = {}
        for row in rows:
            for kind, decision in (row["window"] or {}).get("decisions", {}).items():
                windows.setdefault(kind, Counter())[decision] += 1
        return {
            "units": len(rows),
            "reruns": sum(row["reruns"] for row in rows),
            "bytes_exchanged": sum(row["bytes_exchanged"] for row in rows),
            "windows": {kind: dict(counts) for kind, counts in windows.items()},
            "units_on_sync_path": sum(row["sync_path"] for row in rows),
            **{name: sum(row[name] for row in rows) for name in SPANS},
        }
