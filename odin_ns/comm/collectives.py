"""Gradient exchange by row buckets: asynchronous collectives, bucket packing, and statistic reductions.

A bucket is a range of Gaussian indices (rows) holding every row-aligned gradient tensor side by side, so a unit's
exchange is a handful of large all-reduces rather than one per tensor, and a consumer that needs only some rows waits
only for the buckets holding them. A dense bucket carries all its rows; a scoped bucket only the rows of the update
scope (gathered by the runtime), which is cheaper when few Gaussians were seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.distributed as dist

from odin_ns.comm.process_group import naming_peer_failures, wait_for

if TYPE_CHECKING:
    from odin_ns.comm.watch import CollectiveWatch
from odin_ns.kernels import BITS_PER_WORD

RowRange = tuple[int, int]
STATISTIC_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}
all_gather_into_tensor = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
"""torch 2.14 renamed all_gather_into_tensor (and deprecated the old name); older torch has only the old name."""


class Clock(Protocol):
    """Source of timestamps (host seconds, or CUDA events on the current stream)."""

    def now(self) -> Any: ...


@dataclass(frozen=True)
class RowBuckets:
    """Rows [0, num_rows) cut into consecutive ranges of ``rows_per_bucket`` rows, one collective each.

    ``rows_per_bucket`` is a multiple of 32, so every range starts on a word of a scope bitmap and the hazard checks
    can slice bitmaps per bucket without shifting bits.
    """

    num_rows: int
    rows_per_bucket: int

    @classmethod
    def for_tensors(
        cls, tensors: Sequence[torch.Tensor], bucket_bytes: int, min_buckets: int = 1, min_bucket_bytes: int = 0
    ) -> RowBuckets:
        """Buckets of at most ``bucket_bytes`` of packed rows of ``tensors`` (row-aligned [N, ...]), and at least
        ``min_buckets`` of them where the rows allow, so a conflict waits for part of an exchange, not all of it; but
        none cut below ``min_bucket_bytes`` to get there (a collective costs its launch and latency whatever its
        size)."""
        if bucket_bytes <= 0 or min_buckets <= 0 or min_bucket_bytes < 0:
            raise ValueError(f"bucket_bytes and min_buckets must be positive and min_bucket_bytes not negative, got "
                             f"{bucket_bytes}, {min_buckets}, {min_bucket_bytes}")
        num_rows = tensors[0].shape[0]
        bytes_per_row = max(sum(math.prod(t.shape[1:]) * t.element_size() for t in tensors), 1)
        rows_by_bytes = bucket_bytes // bytes_per_row
        rows_by_count = -(-num_rows // min_buckets)
        rows_by_floor = -(-min_bucket_bytes // bytes_per_row)
        rows_by_floor = -(-rows_by_floor // BITS_PER_WORD) * BITS_PER_WORD  # whole words, at least the floor
        whole_words = min(rows_by_bytes, max(rows_by_count, rows_by_floor)) // BITS_PER_WORD * BITS_PER_WORD
        return cls(num_rows=num_rows, rows_per_bucket=max(BITS_PER_WORD, whole_words))

    @classmethod
    def single(cls, num_rows: int) -> RowBuckets:
        """All rows in one range (a single rank has nothing to pipeline)."""
        return cls(num_rows=num_rows, rows_per_bucket=max(BITS_PER_WORD, -(-num_rows // BITS_PER_WORD) * BITS_PER_WORD))

    @cached_property
    def ranges(self) -> list[RowRange]:
        return [
            (lo, min(lo + self.rows_per_bucket, self.num_rows)) for lo in range(0, self.num_rows, self.rows_per_bucket)
        ]


class Collective:
    """An asynchronous collective in flight, with timestamps of its launch and its (observed) completion.

    On CUDA the collective is launched from ``stream`` after it waits for the compute stream (so packed buffers are
    complete), and the stream itself waits for NCCL, so completion is an event: consumers make their stream wait on
    it and the host never blocks; ``watch`` bounds the collective's completion instead (a dead peer's collective
    never completes). On the CPU (gloo) ``wait`` blocks the host, bounded by ``timeout``.
    """

    def __init__(
        self,
        what: str,
        output: torch.Tensor,
        inputs: tuple[torch.Tensor, ...],
        launch: Callable[[], dist.Work],
        timeout: timedelta,
        clock: Clock,
        stream: torch.cuda.Stream | None,
        watch: CollectiveWatch | None = None,
    ):
        self.what = what
        self.output = output
        self.payload_bytes = sum(t.numel() * t.element_size() for t in inputs)
        self._timeout = timeout
        self._watch = watch
        self._clock = clock
        self._work: dist.Work | None = None
        self._inputs: tuple[torch.Tensor, ...] = ()
        self._done_event: torch.cuda.Event | None = None
        if watch is not None:
            watch.check()
        if stream is None:
            self.started = clock.now()
            with naming_peer_failures(what, timeout, watch):
                self._work = launch()
            self._inputs = inputs
            self.finished: Any = None
            return
        stream.wait_stream(torch.cuda.current_stream(stream.device))
        with torch.cuda.stream(stream), naming_peer_failures(what, timeout, watch):
            self.started = clock.now()
            work = launch()
            work.wait()
            if watch is not None:
                watch.track(work, what)
            self.finished = clock.now()
            self._done_event = torch.cuda.Event()
            self._done_event.record(stream)
        for tensor in (*inputs, output):
            # Allocated on the compute stream, used until the collective completes: tell the caching allocator.
            tensor.record_stream(stream)

    def wait(self) -> torch.Tensor:
        """The collective's output, once usable by work queued after this call on the current stream."""
        if self._done_event is not None:
            torch.cuda.current_stream(self.output.device).wait_event(self._done_event)
        elif self._work is not None:
            wait_for(self._work, self.what, self._timeout, self._watch)
            self.finished = self._clock.now()
            self._work, self._inputs = None, ()
        return self.output


class LocalResult:
    """The outcome of a collective over a single rank: the input itself, available at once (no launch, no copy)."""

    payload_bytes = 0

    def __init__(self, output: torch.Tensor, clock: Clock):
        self.output = output
        self.started = self.finished = clock.now()

    def wait(self) -> torch.Tensor:
        return self.output


def all_gather_async(
    local: torch.Tensor,
    what: str,
    timeout: timedelta,
    clock: Clock,
    stream: torch.cuda.Stream | None = None,
    group: dist.ProcessGroup | None = None,
    watch: CollectiveWatch | None = None,
) -> Collective:
    """Gather ``local`` from every rank into a [world_size, *local.shape] tensor."""
    local = local.contiguous()
    output = local.new_empty((dist.get_world_size(group), *local.shape))
    return Collective(
        what,
        output,
        (local,),
        lambda: all_gather_into_tensor(output.view(-1), local.view(-1), group=group, async_op=True),
        timeout,
        clock,
        stream,
        watch,
    )


def in_place_async(
    buffer: torch.Tensor,
    launch: Callable[[torch.Tensor], dist.Work],
    what: str,
    timeout: timedelta,
    clock: Clock,
    stream: torch.cuda.Stream | None = None,
    watch: CollectiveWatch | None = None,
) -> Collective:
    """A collective that reads and writes ``buffer`` in place (all-reduce, reduce, broadcast), in flight;
    ``launch(buffer)`` issues it with ``async_op=True``."""
    return Collective(what, buffer, (buffer,), lambda: launch(buffer), timeout, clock, stream, watch)


def all_reduce_statistics(
    statistics: Mapping[str, torch.Tensor],
    ops: Mapping[str, str],
    timeout: timedelta,
    group: dist.ProcessGroup | None = None,
    watch: CollectiveWatch | None = None,
) -> dict[str, torch.Tensor]:
    """Each statistic summed or maxed over ranks (``ops[name]`` is "sum" or "max"), so decisions taken from them
    (densify, prune) are identical on every rank.

    Statistics sharing an op, dtype and device travel in one flat buffer: one blocking collective per such group.
    """
    missing = [name for name in statistics if name not in ops]
    if missing:
        raise ValueError(f"no reduction op given for statistic(s) {missing}")
    bad = {name: op for name, op in ops.items() if op not in STATISTIC_OPS}
    if bad:
        raise ValueError(f"reduction ops must be one of {sorted(STATISTIC_OPS)}, got {bad}")
    groups: dict[tuple[str, torch.dtype, torch.device], list[str]] = {}
    for name, tensor in statistics.items():
        groups.setdefault((ops[name], tensor.dtype, tensor.device), []).append(name)
    reduced: dict[str, torch.Tensor] = {}
    for (op, _, _), names in groups.items():
        flat = torch.cat([statistics[name].reshape(-1) for name in names])
        what = f"all-reduce ({op}) of statistics {names}"
        if watch is not None:
            watch.check()
        with naming_peer_failures(what, timeout, watch):
            work = dist.all_reduce(flat, op=STATISTIC_OPS[op], group=group, async_op=True)
        wait_for(work, what, timeout, watch)
        for name, values in zip(names, flat.split([statistics[name].numel() for name in names])):
            reduced[name] = values.view_as(statistics[name])
    return {name: reduced[name] for name in statistics}

def consecutive_runs(buckets: Iterable[int]) -> list[list[int]]:
    """Sorted bucket indices grouped into runs of consecutive ones: [0, 1, 3] -> [[0, 1], [3]]."""
    runs: list[list[int]] = []
    for bucket in sorted(buckets):
        if runs and runs[-1][-1] == bucket - 1:
            runs[-1].append(bucket)
        else:
            runs.append([bucket])
    return runs
