"""``odin-bench timeline``: how much of the NCCL exchange ran concurrently with compute, read from profiler traces.

Usage (one trace per rank, written by training with ``--profile-steps``, see odin_ns/profiling.py):
    torchrun --nproc-per-node 2 $(which ns-train) odin-splatfacto --data DATA --max-num-iterations 300 \\
        --pipeline.odin.mode quality-first --profile-start 231 --profile-steps 6
    odin-bench timeline outputs/.../profile_rank*.json.gz --out timeline.png
It prints the overlap figures as JSON and draws one lane per (rank, CUDA stream): compute kernels green, NCCL orange.
It also prints, per rank, where the training thread's host time goes in a step: inside torch operations (launches,
collectives, CUDA runtime calls, waits), by operation, and outside them (Python of its own). That part needs no
GPU, and CPU-only profiles get it too.

Why these figures: quality-first's claim is that unit t's exchange runs while unit t+1 renders. On each rank's GPU,
communication time is the union of NCCL kernel intervals; the overlapped part is the portion of it during which a
compute kernel ran on another stream (a stream runs its kernels one at a time, so only other streams can overlap).
Step spans come from the ``odin_unit_{step}`` ranges the trainer records (their GPU projection where the trace has
one, else the CPU range): each step is charged with what lies between its start and the next step's start. A trace
of GPU kernels only (``python -m odin_bench.train --kernel-only-profile``: the host untouched by the profiler) has
no step marks; its figures, the GPU-busy fraction among them, cover the window from its first kernel to its last.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import tyro

Interval = Tuple[float, float]
HOST_WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
"""Runtime calls after which the host waits for the GPU queue (``cudaMemcpy`` without ``Async``: a pageable copy);
each one in a step means host and GPU time add up there instead of overlapping."""
AUTOGRAD_ENGINE = "autograd::engine::evaluate_function"
"""Prefix of the operations the autograd engine runs: a thread that runs them does the training step's backward."""
STEP_NAME = re.compile(r"^(?:odin_unit_|ProfilerStep#)(\d+)$")
"""Ranges marking training steps: the trainer's record_function names, or torch.profiler's own step markers."""


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel of one rank's trace; times in microseconds on the host clock the trace shares across ranks."""

    rank: int
    stream: int
    start: float
    end: float
    name: str

    @property
    def comm(self) -> bool:
        return "nccl" in self.name.lower()


@dataclass(frozen=True)
class StepSpan:
    rank: int
    step: int
    start: float
    end: float


@dataclass(frozen=True)
class HostOp:
    """A torch operation of a step's host work that no other operation of its thread encloses (its time includes its
    children's: the kernels it launched, the CUDA runtime calls it made)."""

    name: str
    start: float
    end: float


@dataclass
class RankTrace:
    rank: int
    path: Path
    kernels: List[Kernel]
    steps: List[StepSpan]
    host_waits: List[float] = field(default_factory=list)
    """Start times of CUDA runtime calls that block the host until the GPU gets there (``HOST_WAITS``)."""
    host_steps: List[StepSpan] = field(default_factory=list)
    """The steps as the training thread ran them (the CPU ranges of the step annotations)."""
    host_ops: List[HostOp] = field(default_factory=list)
    """Outermost torch operations of the training thread and of the autograd engine's threads (where the backward
    runs on CUDA while the training thread waits for it), in start order."""


# ----------------------------------------------------------------------------------------------------- reading


def load_trace(path: Path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        return json.load(handle)


def trace_rank(trace: dict, path: Path, index: int) -> int:
    """The rank a trace belongs to: the profiler's distributedInfo, else ``rank<N>`` in the file name, else order."""
    info = trace.get("distributedInfo") or {}
    if isinstance(info.get("rank"), int):
        return info["rank"]
    match = re.search(r"rank(\d+)", Path(path).name)
    return int(match.group(1)) if match else index


def _stream(event: dict) -> int:
    args = event.get("args") or {}
    if "stream" in args:
        return int(args["stream"])
    match = re.search(r"\d+", str(event.get("tid", 0)))  # kineto names kernel threads "stream 7"
    return int(match.group()) if match else 0


def read_rank_trace(path: Path, index: int = 0) -> RankTrace:
    """Kernels and step spans of one trace file, on absolute host time (so ranks of one host line up)."""
    trace = load_trace(path)
    rank = trace_rank(trace, path, index)
    base = float(trace.get("baseTimeNanoseconds", 0)) / 1000.0  # newer kineto writes ts relative to this
    kernels: List[Kernel] = []
    host_waits: List[float] = []
    cpu_steps: Dict[int, List[Interval]] = defaultdict(list)
    gpu_steps: Dict[int, List[Interval]] = defaultdict(list)
    step_threads = set()
    ops_by_thread: Dict[object, List[HostOp]] = defaultdict(list)
    for event in trace.get("traceEvents", []):
        if event.get("ph") != "X" or "ts" not in event:
            continue
        start = float(event["ts"]) + base
        end = start + float(event.get("dur", 0.0))
        category = event.get("cat", "")
        if category == "kernel":
            kernels.append(Kernel(rank, _stream(event), start, end, str(event.get("name", ""))))
            continue
        if category == "cuda_runtime" and str(event.get("name", "")) in HOST_WAITS:
            host_waits.append(start)
            continue
        match = STEP_NAME.match(str(event.get("name", "")))
        if match and category in ("user_annotation", "cpu_op"):
            cpu_steps[int(match.group(1))].append((start, end))
            step_threads.add(event.get("tid"))
        elif match and category == "gpu_user_annotation":
            gpu_steps[int(match.group(1))].append((start, end))
        elif category == "cpu_op":
            ops_by_thread[event.get("tid")].append(HostOp(str(event.get("name", "")), start, end))

    def spans_of(by_step: Dict[int, List[Interval]]) -> List[StepSpan]:
        return [StepSpan(rank, step, min(s for s, _ in ranges), max(e for _, e in ranges))
                for step, ranges in sorted(by_step.items())]

    kernels.sort(key=lambda kernel: (kernel.start, kernel.stream))
    backward_threads = {tid for tid, ops in ops_by_thread.items()
                        if any(op.name.startswith(AUTOGRAD_ENGINE) for op in ops)}
    training_ops = [op for tid in step_threads | backward_threads for op in outermost(ops_by_thread.get(tid, []))]
    return RankTrace(rank, Path(path), kernels, spans_of(gpu_steps or cpu_steps), sorted(host_waits),
                     spans_of(cpu_steps), sorted(training_ops, key=lambda op: op.start))


def outermost(ops: Iterable[HostOp]) -> List[HostOp]:
    """The operations no other one encloses, in start order."""
    result: List[HostOp] = []
    for op in sorted(ops, key=lambda op: (op.start, -op.end)):
        if result and op.end <= result[-1].end:
            continue
        result.append(op)
    return result


# ---------------------------------------------------------------------------------------------- interval sets


def union(intervals: Iterable[Interval]) -> List[Interval]:
    """Sorted disjoint intervals covering the same time as ``intervals``."""
    merged: List[Interval] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> List[Interval]:
    """Intersection of two sorted disjoint interval lists."""
    out: List[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def measure(intervals: Iterable[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def clip(intervals: Sequence[Interval], lo: float, hi: float) -> List[Interval]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


# ------------------------------------------------------------------------------------------------- figures


def comm_and_overlap(kernels: Sequence[Kernel]) -> Tuple[List[Interval], List[Interval], List[Interval]]:
    """(communication time, its overlapped part, compute time) of one rank, as disjoint interval lists."""
    comm_by_stream: Dict[int, List[Interval]] = defaultdict(list)
    compute_by_stream: Dict[int, List[Interval]] = defaultdict(list)
    for kernel in kernels:
        (comm_by_stream if kernel.comm else compute_by_stream)[kernel.stream].append((kernel.start, kernel.end))
    overlapped: List[Interval] = []
    for stream, comm in comm_by_stream.items():
        others = union(iv for other, ivs in compute_by_stream.items() if other != stream for iv in ivs)
        overlapped.extend(intersect(union(comm), others))
    comm_all = union(iv for ivs in comm_by_stream.values() for iv in ivs)
    compute_all = union(iv for ivs in compute_by_stream.values() for iv in ivs)
    return comm_all, union(overlapped), compute_all


def _ms(microseconds: float) -> float:
    return round(microseconds / 1000.0, 6)


def _fraction(part: float, whole: float) -> Optional[float]:
    return round(part / whole, 6) if whole > 0 else None


def rank_summary(rank_trace: RankTrace) -> dict:
    """Overlap figures of one rank over the profiled window, and per step where the trace marks steps."""
    kernels = rank_trace.kernels
    comm, overlapped, compute = comm_and_overlap(kernels)
    window = max(k.end for k in kernels) - min(k.start for k in kernels) if kernels else 0.0
    summary = {
        "trace": str(rank_trace.path),
        "comm_kernels": sum(kernel.comm for kernel in kernels),
        "compute_kernels": sum(not kernel.comm for kernel in kernels),
        "comm_streams": sorted({kernel.stream for kernel in kernels if kernel.comm}),
        "compute_streams": sorted({kernel.stream for kernel in kernels if not kernel.comm}),
        "window_ms": _ms(window),
        "compute_ms": _ms(measure(compute)),
        "gpu_busy_fraction": _fraction(measure(compute), window),
        "comm_ms": _ms(measure(comm)),
        "overlapped_comm_ms": _ms(measure(overlapped)),
        "exposed_comm_ms": _ms(measure(comm) - measure(overlapped)),
        "overlapped_fraction": _fraction(measure(overlapped), measure(comm)),
        "steps": [],
    }
    spans = rank_trace.steps
    for index, span in enumerate(spans):
        end = spans[index + 1].start if index + 1 < len(spans) else max([span.end] + [k.end for k in kernels])
        step_comm, step_overlapped = clip(comm, span.start, end), clip(overlapped, span.start, end)
        summary["steps"].append({
            "step": span.step,
            "duration_ms": _ms(end - span.start),
            "gpu_busy_fraction": _fraction(measure(clip(compute, span.start, end)), end - span.start),
            "host_waits": sum(span.start <= wait < end for wait in rank_trace.host_waits),
            "comm_ms": _ms(measure(step_comm)),
            "overlapped_comm_ms": _ms(measure(step_overlapped)),
            "overlapped_fraction": _fraction(measure(step_overlapped), measure(step_comm)),
        })
    return summary


def host_summary(rank_trace: RankTrace, top: int = 8) -> List[dict]:
    """Per step of the training thread (to the next step's start): its host time, the part spent inside torch
    operations (launching kernels, collectives, CUDA runtime calls, waits; on the training thread or the backward's)
    and outside them (Python of its own), the operations that took the most of it, by name, and which operations the
    host waits for the GPU (``HOST_WAITS``) happened in. Comparing the steps of a 1-rank and a 2-rank run says what a
    peer adds to the host's step."""
    steps = rank_trace.host_steps
    rows = []
    for index, span in enumerate(steps):
        if index + 1 == len(steps):
            break  # the last step's end is the profiler's, not the next step's start
        end = steps[index + 1].start
        ops = [op for op in rank_trace.host_ops if span.start <= op.start < end]
        inside = measure(union(clip([(op.start, min(op.end, end)) for op in ops], span.start, end)))
        waits_in: Dict[str, int] = defaultdict(int)
        for wait in rank_trace.host_waits:
            if span.start <= wait < end:
                waits_in[next((op.name for op in ops if op.start <= wait <= op.end), "(no torch operation)")] += 1
        by_name: Dict[str, float] = defaultdict(float)
        for op in ops:
            by_name[op.name] += min(op.end, end) - op.start
        rows.append({
            "step": span.step,
            "host_ms": _ms(end - span.start),
            "in_torch_ops_ms": _ms(inside),
            "outside_torch_ops_ms": _ms(end - span.start - inside),
            "torch_ops": len(ops),
            "top_ops_ms": {name: _ms(time) for name, time in sorted(by_name.items(), key=lambda kv: -kv[1])[:top]},
            "host_waits_in": dict(waits_in),
        })
    return rows


def host_table(host_steps: Mapping[int, List[dict]], top: int = 8) -> str:
    """Markdown: per rank, the median step's host time split as ``host_summary`` (its rows, by rank) splits it, then
    the operations with the largest median time per step."""
    lines = []
    for rank, rows in host_steps.items():
        if not rows:
            continue
        median = lambda values: statistics.median(values) if values else 0.0  # noqa: E731
        lines.append(f"rank {rank}: {len(rows)} steps; median host step {median([r['host_ms'] for r in rows]):.2f} ms "
                     f"= {median([r['in_torch_ops_ms'] for r in rows]):.2f} in torch operations "
                     f"({median([r['torch_ops'] for r in rows]):.0f} of them) + "
                     f"{median([r['outside_torch_ops_ms'] for r in rows]):.2f} outside")
        names = {name for row in rows for name in row["top_ops_ms"]}
        per_step = {name: median([row["top_ops_ms"].get(name, 0.0) for row in rows]) for name in names}
        lines.append("| operation | median ms per step |")
        lines.append("|---|---|")
        for name, ms in sorted(per_step.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"| {name} | {ms:.3f} |")
        waits: Dict[str, int] = defaultdict(int)
        for row in rows:
            for name, count in row["host_waits_in"].items():
                waits[name] += count
        if waits:
            lines.append("\nhost waits for the GPU per step, by the operation they happened in: " + ", ".join(
                f"{name} {count / len(rows):.1f}" for name, count in sorted(waits.items(), key=lambda kv: -kv[1])))
        lines.append("")
    return "\n".join(lines)


def overlap_summary(traces: Sequence[RankTrace]) -> dict:
    """Per-rank figures and their totals over ranks."""
    ranks = {str(trace.rank): rank_summary(trace) for trace in traces}
    comm = sum(rank["comm_ms"] for rank in ranks.values())
    overlapped = sum(rank["overlapped_comm_ms"] for rank in ranks.values())
    total = {"comm_ms": round(comm, 6), "overlapped_comm_ms": round(overlapped, 6),
             "exposed_comm_ms": round(comm - overlapped, 6), "overlapped_fraction": _fraction(overlapped, comm)}
    return {"total": total, "ranks": ranks}


# ------------------------------------------------------------------------------------------------- plotting


def plot_window(traces: Sequence[RankTrace], steps: int) -> Tuple[float, float]:
    """Time window of the first ``steps`` marked steps (over all ranks), or of every kernel where none are marked."""
    marked = sorted({span.step for trace in traces for span in trace.steps})
    kernels = [kernel for trace in traces for kernel in trace.kernels]
    if not marked:
        return min(k.start for k in kernels), max(k.end for k in kernels)
    chosen = set(marked[:steps])
    spans = [span for trace in traces for span in trace.steps if span.step in chosen]
    ends = []
    for trace in traces:  # each rank up to its first step after the chosen ones (or its last kernel)
        after = [span.start for span in trace.steps if span.step > max(chosen)]
        ends.append(min(after) if after else max([s.end for s in trace.steps] + [k.end for k in trace.kernels]))
    return min(span.start for span in spans), max(ends)


def plot_timeline(traces: Sequence[RankTrace], out: Path, steps: int = 6, title: str = "") -> Path:
    """One lane per (rank, stream): compute kernels green, NCCL kernels orange, step starts as vertical lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo, hi = plot_window(traces, steps)
    lanes = sorted({(kernel.rank, kernel.stream) for trace in traces for kernel in trace.kernels})
    lane_of = {lane: index for index, lane in enumerate(lanes)}
    bars: Dict[Tuple[int, bool], List[Interval]] = defaultdict(list)
    for trace in traces:
        for kernel in trace.kernels:
            for start, end in clip([(kernel.start, kernel.end)], lo, hi):
                lane = lane_of[(kernel.rank, kernel.stream)]
                bars[(lane, kernel.comm)].append(((start - lo) / 1e3, (end - start) / 1e3))
    figure, axis = plt.subplots(figsize=(14, 0.5 * len(lanes) + 2))
    for (lane, comm), ranges in bars.items():
        axis.broken_barh(ranges, (lane - 0.4, 0.8), facecolors="tab:orange" if comm else "tab:green", linewidth=0)
    for trace in traces:
        rows = [lane_of[lane] for lane in lanes if lane[0] == trace.rank]
        if not rows:
            continue
        for span in trace.steps:
            if lo <= span.start <= hi:
                x = (span.start - lo) / 1e3
                axis.vlines(x, min(rows) - 0.5, max(rows) + 0.5, colors="black", linewidth=0.8, linestyles="--")
                axis.text(x, max(rows) + 0.45, f" step {span.step}", fontsize=7, va="bottom")
    comm_streams = {(k.rank, k.stream) for trace in traces for k in trace.kernels if k.comm}
    axis.set_yticks(range(len(lanes)),
                    [f"rank {r} stream {s}{' (nccl)' if (r, s) in comm_streams else ''}" for r, s in lanes])
    axis.set_ylim(-0.6, len(lanes) - 0.4)
    axis.invert_yaxis()
    axis.set_xlim(0, (hi - lo) / 1e3)
    axis.set_xlabel("ms  (green: compute kernels, orange: NCCL kernels, dashed: step starts)")
    axis.set_title(title or "GPU timeline of the profiled steps")
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=130)
    plt.close(figure)
    return out


# ------------------------------------------------------------------------------------------------- command


@dataclass
class TimelineCommand:
    """Overlap of NCCL with compute kernels in profiler traces (JSON on stdout) and a timeline plot."""

    traces: Annotated[Tuple[Path, ...], tyro.conf.Positional, tyro.conf.arg(metavar="TRACE")]
    """Chrome traces written by --profile-steps (profile_rank*.json.gz), one per rank."""
    out: Path = Path("timeline.png")
    """Timeline plot to write."""
    steps: int = 6
    """Marked steps shown in the plot (the JSON figures cover the whole window)."""

    def main(self) -> None:
        if not self.traces:
            raise SystemExit("error: give at least one trace (profile_rank*.json.gz)")
        traces = [read_rank_trace(path, index) for index, path in enumerate(self.traces)]
        host_steps = {trace.rank: host_summary(trace) for trace in traces}
        table = host_table(host_steps)
        if not any(trace.kernels for trace in traces):
            if table:
                print("## Host time of the training thread per step\n\n" + table)
            raise SystemExit(f"no GPU kernels in {', '.join(map(str, self.traces))}: a CPU-only profile "
                             "(no CUDA activity recorded), so there is no stream overlap to measure")
        summary = overlap_summary(traces)
        for rank, rows in host_steps.items():
            summary["ranks"][str(rank)]["host_steps"] = rows
        print(json.dumps(summary, indent=2))
        if table:
            print("\n## Host time of the training thread per step\n\n" + table)
        total = summary["total"]
        fraction = total["overlapped_fraction"]
        title = (f"{len(traces)} rank(s): {total['overlapped_comm_ms']:.2f} of {total['comm_ms']:.2f} ms of NCCL "
                 f"kernel time overlapped with compute ({100 * fraction:.1f}%)" if fraction is not None
                 else "no NCCL kernels")
        print(f"timeline written to {plot_timeline(traces, self.out, self.steps, title)}")


if __name__ == "__main__":
    tyro.cli(TimelineCommand).main()
