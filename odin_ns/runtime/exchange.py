"""The exchange of one unit's gradients: scope gather, bucket plan, dense or scoped packing, launch, and arrival.

A unit's exchange starts with one all-gather of every rank's scope bitmaps (its visible rows and, when a unit waits
on it, the next unit's read scope; throughput-first adds the delay bound's block maxima), so the overlap decision
needs no collective of its own. Its gradient rows travel in row buckets (``odin_ns.comm.collectives.RowBuckets``):
a dense exchange all-reduces each bucket's rows of the unit's packed gradient table (``odin_ns.runtime.packed``) in
place; a scoped one gathers the update scope's rows into one buffer first. A unit that reads some rows waits only
for the buckets holding them. A dense exchange launches every bucket at once; a scoped one (only the update scope's
rows) needs the scope's per-bucket counts on the host first, so it launches after ``read_scopes``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch

from odin_ns.comm.collectives import Clock, Collective, LocalResult, RowBuckets
from odin_ns.comm.context import DistContext
from odin_ns.kernels import bitmap_count, bitmap_indices, gather_rows_packed, scatter_rows_packed
from odin_ns.runtime.config import RuntimeConfig
from odin_ns.runtime.records import UnitTrace
from odin_ns.sync.hazards import WindowHazards, raw_exposure
from odin_ns.sync.scopes import union_over_ranks


class StaleUnitError(RuntimeError):
    """A unit staged against an older structure of the Gaussians (before densify/prune) was about to be published."""


@dataclass
class StagedUnit:
    """A computed unit whose exchange has not been launched: private gradients and this rank's scopes."""

    unit_id: int
    structure_version: int
    gradient_table: torch.Tensor
    """The unit's private gradients, packed [N, columns] like the parameters."""
    grads: dict[str, torch.Tensor]
    """Each parameter's view of ``gradient_table``."""
    visible: torch.Tensor
    """Bitmap of the rows this rank's views saw (its share of the update scope)."""
    trace: UnitTrace
    learning_rates: tuple[list[float], ...]
    """Every optimizer's learning rates when the unit ran: a scheduler may move them before the unit publishes,
    and sync would have stepped with these."""


@dataclass
class InFlightExchange:
    """A unit whose exchange is launched; its buckets arrive and are published one run at a time."""

    staged: StagedUnit
    scopes: Collective | LocalResult
    buckets: dict[int, Collective] = field(default_factory=dict)
    """The all-reduce of each bucket that sends rows (a scoped bucket without update rows sends none)."""
    update_scope: torch.Tensor | None = None
    read_scopes: torch.Tensor | None = None
    """Each rank's read scope of the unit that waits on this one [world_size, words] (None when none waits)."""
    read_scope: torch.Tensor | None = None
    """Their union."""
    maxima: torch.Tensor | None = None
    """Every rank's ``local_maxima`` [world_size, tensors + 2, words] (throughput-first windows only)."""
    hazards: WindowHazards | None = None
    delayed_scope: torch.Tensor | None = None
    """Rows the next unit was admitted to read stale (throughput-first): published after it ran, never re-run for."""
    published: set[int] = field(default_factory=set)
    """Buckets whose rows are stepped for this unit (those published, and those drifted whole)."""
    advanced: bool = False
    """The unit's first step (publication or drift) advanced the step count."""
    drifted_outside_scope: bool = False
    """Dense Adam: the rows outside the update scope took their zero-gradient step; the buckets step the scope's rows."""
    packed: torch.Tensor | None = None
    """The exchanged gradient rows [rows, columns]: the gradient table itself (dense) or the update scope's rows
    gathered from it (scoped, in row order). Bucket b all-reduces its slice ``packed_offsets[b]:packed_offsets[b + 1]``
    in place."""
    packed_offsets: list[int] = field(default_factory=list)
    scoped_indices: torch.Tensor | None = None
    """Scoped exchange: the row of each packed row (None: dense, packed row i is row i)."""

    def buffers(self) -> list[torch.Tensor]:
        """Memory the exchange and publication of this unit touch (for the WAW/WAR staging check)."""
        return [self.staged.gradient_table, *(collective.output for collective in self.buckets.values())]

    def unpublished_with_updates(self) -> list[int]:
        """Buckets holding rows of the update scope that are not yet published."""
        return [b for b, rows in enumerate(self.hazards.update_rows) if rows and b not in self.published]

    def collectives(self) -> list[Collective | LocalResult]:
        return [self.scopes, *self.buckets.values()]


class GradientExchange:
    """Launches and completes units' exchanges over a ``DistContext``, in the buckets planned for the bound rows."""

    def __init__(self, config: RuntimeConfig, context: DistContext, clock: Clock):
        self.config = config
        self.context = context
        self.clock = clock
        self.stream = torch.cuda.Stream(context.device) if context.device.type == "cuda" else None
        self.buckets = RowBuckets.single(0)

    def plan(self, table: torch.Tensor) -> None:
        """Cut the rows of the packed ``table`` into buckets (one range when there is nothing to pipeline)."""
        if self.context.world_size == 1:
            self.buckets = RowBuckets.single(table.shape[0])
        else:
            self.buckets = self.config.buckets_for([table])

    @property
    def needs_host_counts(self) -> bool:
        """Whether ``read_scopes`` reads per-bucket counts on the host: a measured overlap decision and scoped
        sizing need them; sync's dense exchange and predicted read scopes do not."""
        measured_windows = self.config.overlapped and self.config.read_scopes == "measured"
        return measured_windows or self.config.exchange != "dense"

    def launch(
        self,
        staged: StagedUnit,
        read_scope: torch.Tensor | None,
        maxima: torch.Tensor | None = None,
        first_buckets: Sequence[int] = (),
        zero_buckets: Sequence[int] = (),
    ) -> InFlightExchange:
        """Gather the scopes of ``staged`` (and of the unit waiting on it) and, for a dense exchange, launch every
        bucket but ``zero_buckets`` (known on every rank to hold no updated row: their sum is zero):
        ``first_buckets`` first, then the others in row order. The buckets of one stream complete in launch order,
        so a unit that waits for a few buckets should have them launched first; every rank must give the same
        ``first_buckets`` and ``zero_buckets`` (collectives must match across ranks)."""
        in_flight = self._gather_scopes(staged, read_scope, maxima)
        if self.config.exchange == "dense":
            self._launch_buckets(in_flight, scoped_indices=None, first_buckets=first_buckets, zero_buckets=zero_buckets)
        return in_flight

    def _gather_scopes(
        self, staged: StagedUnit, read_scope: torch.Tensor | None, maxima: torch.Tensor | None
    ) -> InFlightExchange:
        """Launch the all-gather of ``staged``'s update scope, the waiting unit's read scope (zeros when none waits)
        and throughput-first's block maxima: the exchange of every unit starts with it."""
        scopes = torch.stack([staged.visible, read_scope if read_scope is not None else torch.zeros_like(staged.visible)])
        if maxima is not None:
            scopes = torch.cat([scopes, maxima.view(torch.int32)])
        gathered = self.context.all_gather_async(scopes, f"scope exchange of unit {staged.unit_id}", self.clock, self.stream)
        staged.trace.record.bytes_exchanged += gathered.payload_bytes
        return InFlightExchange(staged, gathered)

    def read_scopes(self, in_flight: InFlightExchange) -> None:
        """Wait for the scope gather; set the update scope and, where host counts are needed, the window's hazards
        (the unit's one host read); then launch a scoped or auto exchange, whose sizing needed those counts."""
        trace = in_flight.staged.trace
        gathered = self.wait(in_flight.scopes, trace)
        in_flight.update_scope = union_over_ranks(gathered[:, 0])
        if not self.needs_host_counts:
            trace.update_rows = bitmap_count(in_flight.update_scope)
            return
        in_flight.read_scopes = gathered[:, 1]
        in_flight.read_scope = union_over_ranks(in_flight.read_scopes)
        in_flight.hazards = WindowHazards.from_device(
            raw_exposure(in_flight.update_scope, in_flight.read_scopes, self.buckets.ranges)
        )
        if gathered.shape[1] > 2:
            in_flight.maxima = gathered[:, 2:].view(torch.float32)
        update_rows = sum(in_flight.hazards.update_rows)
        trace.update_rows = update_rows
        if self.config.exchange == "dense":
            return
        if self.config.exchange == "scoped" or update_rows < self.config.scoped_below * self.buckets.num_rows:
            indices = bitmap_indices(in_flight.update_scope, self.buckets.num_rows)
            self._launch_buckets(in_flight, indices, in_flight.hazards.update_rows)
        else:
            self._launch_buckets(in_flight, scoped_indices=None)

    def arrive(self, in_flight: InFlightExchange, run: Sequence[int]) -> None:
        """Wait for the consecutive buckets ``run`` and write their rows, averaged over ranks, into the unit's staged
        gradients (with one rank they already are the average)."""
        trace = in_flight.staged.trace
        for bucket in run:
            if bucket in in_flight.buckets:
                self.wait(in_flight.buckets[bucket], trace)
        if in_flight.packed is None:
            return
        first, last = in_flight.packed_offsets[run[0]], in_flight.packed_offsets[run[-1] + 1]
        if last == first:
            return
        reduced = in_flight.packed[first:last].div_(self.context.world_size)
        if in_flight.scoped_indices is not None:
            scatter_rows_packed([in_flight.staged.gradient_table], in_flight.scoped_indices[first:last], reduced)

    def wait(self, collective: Collective | LocalResult, trace: UnitTrace) -> torch.Tensor:
        """Wait on the compute path, counting the time as exposed."""
        start = self.clock.now()
        output = collective.wait()
        trace.add_span("exposed_wait_s", start, self.clock.now())
        return output

    def _launch_buckets(
        self,
        in_flight: InFlightExchange,
        scoped_indices: torch.Tensor | None,
        rows_per_bucket: Iterable[int] = (),
        first_buckets: Sequence[int] = (),
        zero_buckets: Sequence[int] = (),
    ) -> None:
        """Pack the exchanged rows once (all rows, or the update scope's ``scoped_indices`` with ``rows_per_bucket``
        of them in each bucket) and all-reduce each bucket's slice of the packed buffer in place, ``first_buckets``
        first and ``zero_buckets`` not at all."""
        staged = in_flight.staged
        if self.context.world_size == 1:
            staged.trace.record.exchange = "local"
            return
        num_rows = self.buckets.num_rows
        if scoped_indices is None:
            staged.trace.record.exchange = "dense"
            in_flight.packed = staged.gradient_table
            in_flight.packed_offsets = [lo for lo, _ in self.buckets.ranges] + [num_rows]
        else:
            staged.trace.record.exchange = "scoped"
            in_flight.packed = gather_rows_packed([staged.gradient_table], scoped_indices)
            in_flight.packed_offsets = [0, *itertools.accumulate(rows_per_bucket)]
            in_flight.scoped_indices = scoped_indices
        offsets = in_flight.packed_offsets
        ranges = self.buckets.ranges
        first = list(dict.fromkeys(int(bucket) for bucket in first_buckets))
        zero = {int(bucket) for bucket in zero_buckets}
        for bucket in [*first, *sorted(set(range(len(ranges))) - set(first) - zero)]:
            lo, hi = ranges[bucket]
            if offsets[bucket] == offsets[bucket + 1]:
                continue
            collective = self.context.all_reduce_sum_async(
                in_flight.packed[offsets[bucket] : offsets[bucket + 1]],
                f"gradient bucket {bucket} (rows {lo}-{hi}) of unit {staged.unit_id}",
                self.clock,
                self.stream,
            )
            staged.trace.record.bytes_exchanged += collective.payload_bytes
            in_flight.buckets[bucket] = collective


def check_version(staged: StagedUnit, structure_version: int, in_flight: InFlightExchange | None = None) -> None:
    """Raise StaleUnitError for a unit staged before the last structural change (after completing its collectives,
    so every rank leaves the process group in the same state)."""
    if staged.structure_version == structure_version:
        return
    if in_flight is not None:
        for collective in in_flight.collectives():
            collective.wait()
    raise StaleUnitError(
        f"unit {staged.unit_id} was staged against structure version {staged.structure_version} but the "
        f"Gaussians are at version {structure_version}: drain() before changing their structure"
    )
