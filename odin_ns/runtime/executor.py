"""OdinRuntime: data-parallel training units whose gradient exchange overlaps the next unit's compute.

Every rank holds a full replica of the Gaussians. A unit renders this rank's views, backpropagates into private
shadow views, and stages its gradients; its exchange (scope bitmaps, then row buckets all-reduced) and its selective
Adam publication bring every replica to the same state.

* ``sync``: each unit is exchanged and published before ``run_unit`` returns.
* ``quality-first``: unit t's exchange is launched when unit t+1 starts, together with unit t+1's read scope; unit t+1
  computes while it is in flight, after the buckets holding rows it reads were published (no stale reads). After
  its backward the rest of unit t is published and unit t+1 is validated (re-run if unit t's update changed what it
  sees). The parameters equal ``sync``'s.
* ``throughput-first``: as quality-first, but unit t+1 may also run on rows of unit t's update that are not yet
  published (delayed reads) when ``odin_ns.sync.gate`` bounds the skipped update as small and the delayed rows are
  at most ``tau`` of its reads. Delayed rows are published right after unit t+1 ran and are not re-run for.

Where windows keep leaving nothing in flight (every view reads almost every Gaussian), the overlapped modes run
stretches of units on sync's path (``RuntimeConfig.fallback_after``) and probe again after each.

docs/design.md explains the model, the hazards and the timeline; docs/throughput_first.md the delayed reads.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Protocol

import torch
import torch.distributed as dist

from odin_ns.comm.exchange import (
    Collective,
    LocalResult,
    RowBuckets,
    all_gather_async,
    all_reduce_statistics,
    all_reduce_sum_async,
    pack_rows,
    unpack_rows,
)
from odin_ns.comm.process_group import barrier
from odin_ns.kernels import bitmap_and, bitmap_andnot, bitmap_count, bitmap_indices, bitmap_or, bitmap_to_mask
from odin_ns.runtime.shadow import shadow_views, staged_gradients
from odin_ns.runtime.stats import Clock, RuntimeStats, UnitRecord, latest
from odin_ns.sync.gate import (
    AdamRows,
    DelayLimits,
    ReaderSensitivity,
    ThroughputFirstPolicy,
    bucket_maxima,
    gathered_maxima,
    local_maxima,
    row_bounds,
)
from odin_ns.sync.hazards import (
    AdmissionPolicy,
    DelayBound,
    HazardKind,
    QualityFirstPolicy,
    WindowDelay,
    WindowHazards,
    check_private_staging,
    delay_summary,
    raw_exposure,
    stale_reads,
)
from odin_ns.sync.scopes import restrict_to_ranges, scope_of, union_over_ranks

MODES = ("sync", "quality-first", "throughput-first")
EXCHANGES = ("dense", "scoped", "auto")

Views = dict[str, torch.Tensor]
ComputeFn = Callable[[Views], tuple[torch.Tensor, torch.Tensor]]
"""Forward and backward of one unit on the given views; returns (loss, bool[N] rows its views saw)."""
VisibleFn = Callable[[Views], torch.Tensor]
"""Cheap projection-only pass: bool[N] rows the unit's views would see under the given parameters."""
SensitivityFn = Callable[[Views], ReaderSensitivity]
"""How far on screen the unit's views see each row move per unit of displacement (throughput-first's bound)."""


class RowSteppingOptimizer(Protocol):
    """What publication needs of an optimizer (``odin_ns.optim.SelectiveAdam`` is one)."""

    param_groups: list[dict[str, Any]]
    state: Mapping[torch.Tensor, dict[str, Any]]
    """Adam's per-tensor ``step``/``exp_avg``/``exp_avg_sq`` (read by throughput-first's bound)."""

    def step_rows(
        self, rows: torch.Tensor | None, row_range: tuple[int, int] | None = None, advance_step: bool = True
    ) -> None: ...


class ReplicaDivergenceError(RuntimeError):
    """Ranks that must hold identical Gaussians (after a barrier) do not."""


class StaleUnitError(RuntimeError):
    """A unit staged against an older structure of the Gaussians (before densify/prune) was about to be published."""


@dataclass(frozen=True)
class RuntimeConfig:
    mode: str = "quality-first"
    """"sync", "quality-first" or "throughput-first"."""
    exchange: str = "dense"
    """'dense' all-reduces every row, 'scoped' only the update scope's rows, 'auto' picks by ``scoped_below``."""
    bucket_bytes: int = 25 * 2**20
    """Approximate size of one all-reduced bucket of packed gradient rows."""
    min_buckets: int = 8
    """At least this many buckets (row ranges) where the rows allow: the granularity at which a conflicting unit
    waits for, and publishes, part of the previous unit's exchange. Every mode, sync included, cuts the same
    buckets, so all reduce in the same order and quality-first stays bit-identical to sync for any world size."""
    scoped_below: float = 0.25
    """With ``exchange="auto"``, the largest |update scope| / N for which the scoped exchange is used."""
    adam_rows: str = "selective"
    """"selective" steps the update scope's rows only; "dense" steps every row (stock splatfacto's Adam: hidden rows'
    moments decay and their parameters keep moving on momentum), for comparison in sync mode."""
    timeout_s: float = 600.0
    """Bound on every wait for a collective; a dead or hung peer raises PeerFailureError after it."""
    delay: DelayLimits = DelayLimits()
    """throughput-first: what a delayed read may skip."""
    fallback_after: int = 16
    """Overlapped modes: after this many consecutive windows in which nothing stayed in flight (every bucket with
    update rows was published before the next unit ran, as on captures where every view sees almost everything),
    run the next ``fallback_units`` units on sync's path (no read-scope pass, hazard read or validation: only host
    work that could not pay), then probe again. 0: never. The parameters are sync's either way."""
    fallback_units: int = 64

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.adam_rows not in ("selective", "dense") or (self.adam_rows == "dense" and self.mode != "sync"):
            raise ValueError(f"adam_rows must be 'selective', or 'dense' in sync mode; got {self.adam_rows!r} in {self.mode}")
        if self.exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {self.exchange!r}")
        if not 0.0 <= self.scoped_below <= 1.0:
            raise ValueError(f"scoped_below must be within [0, 1], got {self.scoped_below}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")
        if self.min_buckets < 1:
            raise ValueError(f"min_buckets must be at least 1, got {self.min_buckets}")
        if self.fallback_after < 0 or self.fallback_units < 1:
            raise ValueError(
                f"fallback_after must be >= 0 and fallback_units >= 1, got {self.fallback_after}, {self.fallback_units}"
            )


@dataclass
class _StagedUnit:
    """A computed unit whose exchange has not been launched: private gradients and this rank's visible rows."""

    unit_id: int
    structure_version: int
    grads: dict[str, torch.Tensor]
    visible: torch.Tensor
    record: UnitRecord
    learning_rates: list[float]
    """Every optimizer group's learning rate when the unit ran: a scheduler may change it before the unit publishes,
    and sync would have stepped with these."""


@dataclass
class _InFlightUnit:
    """A unit whose exchange is launched; its buckets are published one by one as they are needed."""

    staged: _StagedUnit
    scopes: Collective
    buckets: dict[int, Collective] = field(default_factory=dict)
    """The all-reduce of each bucket that sends rows (a scoped bucket without update rows sends none)."""
    update_scope: torch.Tensor | None = None
    read_scope: torch.Tensor | None = None
    """Unit t+1's read scope over all ranks (None when no unit waits on this one)."""
    maxima: torch.Tensor | None = None
    """Every rank's ``local_maxima`` [world_size, tensors + 2, words] (throughput-first windows only)."""
    hazards: WindowHazards | None = None
    delayed_scope: torch.Tensor | None = None
    """Rows unit t+1 was admitted to read stale (throughput-first): published after it ran, never re-run for."""
    published: set[int] = field(default_factory=set)
    packed: torch.Tensor | None = None
    """The exchanged gradient rows packed once into [rows, columns]: all N rows (dense) or the update scope's
    (scoped, in row order). Bucket b all-reduces its contiguous slice ``packed_offsets[b]:packed_offsets[b + 1]`` in
    place, and consecutive published buckets unpack as one slice."""
    packed_offsets: list[int] = field(default_factory=list)
    scoped_indices: torch.Tensor | None = None
    """Scoped exchange: the row of each packed row (None: dense, packed row i is row i)."""

    def buffers(self) -> list[torch.Tensor]:
        """Memory the exchange and publication of this unit touch (for the WAW/WAR staging check)."""
        return [*self.staged.grads.values(), *(collective.output for collective in self.buckets.values())]


class OdinRuntime:
    """Runs units on shadow views, exchanges their gradients by row buckets and publishes them with selective Adam.

    ``params`` are the shared row-aligned tensors [N, ...] (one dtype and device) that ``optimizers`` (keyed like
    ``params``; one optimizer may serve several names) step in place. After a structural change (``drain`` first)
    call ``rebind`` with the new tensors.
    """

    def __init__(
        self,
        params: Mapping[str, torch.Tensor],
        optimizers: Mapping[str, RowSteppingOptimizer],
        config: RuntimeConfig = RuntimeConfig(),
        group: dist.ProcessGroup | None = None,
        policy: AdmissionPolicy | None = None,
    ):
        self.config = config
        delays = config.mode == "throughput-first"
        self.policy = policy or (ThroughputFirstPolicy(config.delay) if delays else QualityFirstPolicy())
        self.stats = RuntimeStats()
        self.structure_version = -1
        self._group = group
        self._world_size = dist.get_world_size(group)
        self._timeout = timedelta(seconds=config.timeout_s)
        self._pending: _StagedUnit | None = None
        self._idle_windows = 0
        """Consecutive windows that left nothing in flight (equal on every rank: decided from gathered scopes)."""
        self._sync_path_units = 0
        """Units still to run on sync's path before the overlap is probed again."""
        self.rebind(params, optimizers)
        device = next(iter(self._params.values())).device
        self._clock = Clock(device)
        self._comm_stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    # ----------------------------------------------------------------------------------------------- public API

    def rebind(
        self, params: Mapping[str, torch.Tensor], optimizers: Mapping[str, RowSteppingOptimizer] | None = None
    ) -> None:
        """Bind to (possibly resized) parameter tensors after a structural change; bumps ``structure_version``.

        Units staged before the change can no longer be published (StaleUnitError): ``drain()`` before changing.
        """
        optimizers = optimizers if optimizers is not None else self._optimizers
        if not params:
            raise ValueError("OdinRuntime needs at least one parameter tensor")
        first = next(iter(params.values()))
        for name, param in params.items():
            if param.dim() == 0 or param.shape[0] != first.shape[0]:
                raise ValueError(
                    f"parameter '{name}' {tuple(param.shape)} is not row-aligned with {tuple(first.shape)}"
                )
            if param.dtype != first.dtype or param.device != first.device or not param.is_contiguous():
                raise ValueError(f"parameter '{name}' must be contiguous {first.dtype} on {first.device}")
            if name not in optimizers:
                raise ValueError(f"no optimizer given for parameter '{name}'")
            if not any(p is param for group in optimizers[name].param_groups for p in group["params"]):
                raise ValueError(
                    f"the optimizer for '{name}' does not hold the bound tensor: rebind it after replacing it"
                )
            if self.policy.needs_delay_bounds and "betas" not in self._group_of(optimizers[name], param):
                raise ValueError(f"delayed reads bound Adam steps, but the optimizer for '{name}' has no betas")
        missing = {self.config.delay.position, self.config.delay.opacity_logit} - params.keys()
        if self.policy.needs_delay_bounds and missing:
            raise ValueError(f"delayed reads need the position and opacity tensors, missing {sorted(missing)}")
        self._params = dict(params)
        self._optimizers = dict(optimizers)
        if self._world_size == 1:  # nothing to exchange or overlap: one range, published at once
            self._buckets = RowBuckets.single(first.shape[0])
        else:
            self._buckets = RowBuckets.for_tensors(
                list(self._params.values()), self.config.bucket_bytes, self.config.min_buckets
            )
        self.structure_version += 1

    @property
    def num_rows(self) -> int:
        return self._buckets.num_rows

    def run_unit(
        self,
        unit_id: int,
        compute_fn: ComputeFn,
        visible_fn: VisibleFn | None = None,
        sensitivity_fn: SensitivityFn | None = None,
    ) -> torch.Tensor:
        """Run one unit; return its loss. In the overlapped modes the unit stays staged until the next ``run_unit``
        or ``drain``, and ``visible_fn`` (its read scope) is required; throughput-first also needs
        ``sensitivity_fn``, which turns the bound on a delayed read into the unit's pixels."""
        if self.config.mode == "sync" or self._sync_path_units:
            self._publish_pending()  # leaving the overlap: the staged unit publishes first, as under sync
            self._sync_path_units = max(0, self._sync_path_units - 1)
            record = self._new_record(unit_id)
            record.sync_path = self.config.mode != "sync"
            loss, visible, staging = self._compute(compute_fn, shadow_views(self._params), record, "compute_s", ())
            self._publish_all(self._launch(self._stage(unit_id, staging, visible, record), read_scope=None))
            return loss
        if visible_fn is None:
            raise ValueError(
                f"{self.config.mode} mode needs visible_fn: the next unit's read scope decides the overlap"
            )
        if self.policy.needs_delay_bounds and sensitivity_fn is None:
            raise ValueError(f"{self.policy.name} admission needs sensitivity_fn: delayed reads are bounded in pixels")
        previous, self._pending = self._pending, None
        views = shadow_views(self._params)
        record = self._new_record(unit_id)
        in_flight = None
        if previous is not None:
            self._check_version(previous)
            with torch.no_grad():
                read = visible_fn(views)
                maxima = None
                if self.policy.needs_delay_bounds:
                    maxima = local_maxima(list(previous.grads.values()), sensitivity_fn(views), read)
            in_flight = self._launch(previous, self._scope(read), maxima)
            record.window = self._admit(in_flight)
        loss, visible, staging = self._compute(
            compute_fn, views, record, "compute_s", in_flight.buffers() if in_flight else ()
        )
        if in_flight is not None:
            late_buckets = self._unpublished_with_updates(in_flight)
            self._publish_all(in_flight)
            if late_buckets and self._saw_stale_rows(in_flight, late_buckets, visible, visible_fn):
                record.reruns += 1
                loss, visible, staging = self._compute(
                    compute_fn, shadow_views(self._params), record, "rerun_compute_s", ()
                )
        self._pending = self._stage(unit_id, staging, visible, record)
        return loss

    def drain(self) -> None:
        """Exchange and publish every staged unit, then meet all ranks at a barrier (before structural changes,
        evaluation, checkpoints and the end of training)."""
        self._publish_pending()
        barrier("drain barrier", self._timeout, self._group)

    def _publish_pending(self) -> None:
        """Exchange and publish the staged unit, if any, with no unit waiting on it."""
        if self._pending is not None:
            staged, self._pending = self._pending, None
            self._publish_all(self._launch(staged, read_scope=None))

    def verify_replicas(self) -> None:
        """Raise ReplicaDivergenceError unless every rank holds the same parameters (checked at barriers).

        Compares, per tensor, a float64 sum and a position-weighted sum (which also catches permuted rows) through
        one max and one min reduction over ranks.
        """
        checksums = []
        for param in self._params.values():
            values = param.detach().reshape(-1).double()
            positions = torch.arange(1, values.numel() + 1, device=values.device, dtype=torch.float64)
            checksums += [values.sum(), (values * positions).sum()]
        local = torch.stack(checksums)
        reduced = self.reduce_statistics({"max": local, "negated_min": -local}, {"max": "max", "negated_min": "max"})
        highest, lowest = reduced["max"].view(-1, 2), -reduced["negated_min"].view(-1, 2)
        diverged = [name for name, high, low in zip(self._params, highest, lowest) if not torch.equal(high, low)]
        if diverged:
            raise ReplicaDivergenceError(f"rank {dist.get_rank()}: parameters {diverged} differ between ranks after a barrier")

    def reduce_statistics(
        self, statistics: Mapping[str, torch.Tensor], ops: Mapping[str, str]
    ) -> dict[str, torch.Tensor]:
        """``all_reduce_statistics`` on this runtime's group and timeout (densification statistics, say)."""
        return all_reduce_statistics(statistics, ops, self._timeout, self._group)

    # ---------------------------------------------------------------------------------------------- internals

    def _new_record(self, unit_id: int) -> UnitRecord:
        return UnitRecord(unit_id=unit_id, mode=self.config.mode, structure_version=self.structure_version)

    def _scope(self, visible: torch.Tensor) -> torch.Tensor:
        return scope_of(visible, self.num_rows, next(iter(self._params.values())).device)

    def _compute(
        self,
        compute_fn: ComputeFn,
        views: Views,
        record: UnitRecord,
        span: str,
        in_flight_buffers: Iterable[torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Forward and backward on ``views``; returns (loss, visible mask, private gradients), checked for WAW/WAR."""
        start = self._clock.now()
        loss, visible = compute_fn(views)
        record.add_span(span, start, self._clock.now())
        staging = staged_gradients(views)
        check_private_staging(staging, self._params, in_flight_buffers)
        return loss, visible, staging

    def _stage(
        self, unit_id: int, staging: dict[str, torch.Tensor], visible: torch.Tensor, record: UnitRecord
    ) -> _StagedUnit:
        learning_rates = [group["lr"] for group in self._optimizer_groups()]
        return _StagedUnit(unit_id, self.structure_version, staging, self._scope(visible), record, learning_rates)

    def _optimizer_groups(self) -> list[dict[str, Any]]:
        """Param groups of the distinct optimizers, in a fixed order."""
        unique = {id(optimizer): optimizer for optimizer in self._optimizers.values()}.values()
        return [group for optimizer in unique for group in optimizer.param_groups]

    @contextmanager
    def _learning_rates_of(self, staged: _StagedUnit) -> Iterator[None]:
        """Step with the learning rates ``staged`` ran under, restoring the current ones after."""
        groups = self._optimizer_groups()
        current = [group["lr"] for group in groups]
        for group, lr in zip(groups, staged.learning_rates):
            group["lr"] = lr
        try:
            yield
        finally:
            for group, lr in zip(groups, current):
                group["lr"] = lr

    def _check_version(self, staged: _StagedUnit, in_flight: _InFlightUnit | None = None) -> None:
        """Raise StaleUnitError for a unit staged before the last structural change (after completing its
        collectives, so every rank leaves the process group in the same state)."""
        if staged.structure_version == self.structure_version:
            return
        if in_flight is not None:
            for collective in (in_flight.scopes, *in_flight.buckets.values()):
                collective.wait()
        raise StaleUnitError(
            f"unit {staged.unit_id} was staged against structure version {staged.structure_version} but the "
            f"Gaussians are at version {self.structure_version}: drain() before changing their structure"
        )

    def _launch(
        self, staged: _StagedUnit, read_scope: torch.Tensor | None, maxima: torch.Tensor | None = None
    ) -> _InFlightUnit:
        """Launch the exchange of ``staged``: its visible rows and the next unit's read scope (gathered together, so
        the RAW decision needs no collective of its own) with, for delayed reads, this rank's ``local_maxima`` (as
        raw float32 bits), then, for a dense exchange, every bucket at once."""
        self._check_version(staged)
        record = staged.record
        scopes = torch.stack(
            [staged.visible, read_scope if read_scope is not None else torch.zeros_like(staged.visible)]
        )
        if maxima is not None:
            scopes = torch.cat([scopes, maxima.view(torch.int32)])
        in_flight = _InFlightUnit(staged, self._all_gather(scopes, f"scope exchange of unit {staged.unit_id}"))
        record.bytes_exchanged += in_flight.scopes.payload_bytes
        if self.config.exchange == "dense":
            self._launch_buckets(in_flight, scoped_indices=None)
        return in_flight

    def _launch_buckets(
        self,
        in_flight: _InFlightUnit,
        scoped_indices: torch.Tensor | None,
        rows_per_bucket: Iterable[int] = (),
    ) -> None:
        """Pack the exchanged rows once (all rows, or the update scope's ``scoped_indices`` with ``rows_per_bucket``
        of them in each bucket) and all-reduce each bucket's slice of the packed buffer in place."""
        staged = in_flight.staged
        if self._world_size == 1:  # publication reads the staged gradients directly: they are the average
            staged.record.exchange = "local"
            return
        grads = list(staged.grads.values())
        if scoped_indices is None:
            staged.record.exchange = "dense"
            in_flight.packed = pack_rows(grads, (0, self.num_rows))
            in_flight.packed_offsets = [lo for lo, _ in self._buckets.ranges] + [self.num_rows]
        else:
            staged.record.exchange = "scoped"
            in_flight.packed = pack_rows(grads, (0, self.num_rows), scoped_indices)
            in_flight.packed_offsets = [0, *itertools.accumulate(rows_per_bucket)]
            in_flight.scoped_indices = scoped_indices
        offsets = in_flight.packed_offsets
        for bucket, (lo, hi) in enumerate(self._buckets.ranges):
            if offsets[bucket] == offsets[bucket + 1]:
                continue
            collective = all_reduce_sum_async(
                in_flight.packed[offsets[bucket] : offsets[bucket + 1]],
                f"gradient bucket {bucket} (rows {lo}-{hi}) of unit {staged.unit_id}",
                self._timeout,
                self._clock,
                self._comm_stream,
                self._group,
            )
            staged.record.bytes_exchanged += collective.payload_bytes
            in_flight.buckets[bucket] = collective

    def _all_gather(self, local: torch.Tensor, what: str) -> Collective | LocalResult:
        if self._world_size == 1:
            return LocalResult(local[None], self._clock)
        return all_gather_async(local, what, self._timeout, self._clock, self._comm_stream, self._group)

    def _wait(self, collective: Collective, record: UnitRecord) -> torch.Tensor:
        """Wait on the compute path, counting the time as exposed."""
        start = self._clock.now()
        output = collective.wait()
        record.add_span("exposed_wait_s", start, self._clock.now())
        return output

    def _resolve_scopes(self, in_flight: _InFlightUnit) -> None:
        """Wait for the scope exchange; derive the update scope U (OR over ranks) and, when a decision needs host
        numbers (the overlapped modes' hazards, scoped/auto sizing), the per-bucket counts: the one host read of a
        unit (throughput-first adds one, for the delay bound, in windows with conflicts)."""
        record = in_flight.staged.record
        gathered = self._wait(in_flight.scopes, record)
        in_flight.update_scope = union_over_ranks(gathered[:, 0])
        needs_host_counts = self.config.mode != "sync" or self.config.exchange != "dense"
        if not needs_host_counts:
            record.update_rows = bitmap_count(in_flight.update_scope)
            return
        in_flight.read_scope = union_over_ranks(gathered[:, 1])
        in_flight.hazards = WindowHazards.from_device(
            raw_exposure(in_flight.update_scope, in_flight.read_scope, self._buckets.ranges)
        )
        if gathered.shape[1] > 2:
            in_flight.maxima = gathered[:, 2:].view(torch.float32)
        update_rows = sum(in_flight.hazards.update_rows)
        record.update_rows = update_rows
        if self.config.exchange == "dense":
            return
        if self.config.exchange == "scoped" or update_rows < self.config.scoped_below * self.num_rows:
            indices = bitmap_indices(in_flight.update_scope, self.num_rows)
            self._launch_buckets(in_flight, indices, in_flight.hazards.update_rows)
        else:
            self._launch_buckets(in_flight, scoped_indices=None)

    def _admit(self, in_flight: _InFlightUnit) -> dict[str, Any]:
        """Admission gate of the window (unit t in flight, unit t+1 about to run): publish the buckets the policy
        names (those holding rows unit t+1 reads, for quality-first; fewer for throughput-first, whose conflicting
        buckets left out become delayed reads) before t+1 runs."""
        self._resolve_scopes(in_flight)
        if self.policy.needs_delay_bounds and in_flight.hazards.raw:
            in_flight.hazards = replace(in_flight.hazards, delay=self._window_delay(in_flight))
        hazards = in_flight.hazards
        first = self.policy.buckets_to_publish_first(hazards)
        for run in consecutive_runs(first):
            self._publish_run(in_flight, run)
        self._count_idle_window(left_in_flight=sum(1 for rows in hazards.update_rows if rows) - len(first))
        window = {
            "decisions": {
                HazardKind.RAW.value: "rejected" if first else "admitted",
                HazardKind.WAW.value: "admitted",
                HazardKind.WAR.value: "admitted",
            },
            "conflict_rows": sum(hazards.conflict_rows),
            "buckets_published_first": len(first),
            "buckets": len(self._buckets.ranges),
        }
        if self.policy.needs_delay_bounds:
            delayed = [bucket for bucket, rows in enumerate(hazards.conflict_rows) if rows and bucket not in first]
            if delayed:
                conflicts = bitmap_and(in_flight.update_scope, in_flight.read_scope)
                in_flight.delayed_scope = restrict_to_ranges(conflicts, [self._buckets.ranges[b] for b in delayed])
            window.update(delay_summary(hazards, delayed))
        return window

    def _count_idle_window(self, left_in_flight: int) -> None:
        """Switch to sync's path for ``fallback_units`` units after ``fallback_after`` windows in a row that left
        nothing in flight."""
        self._idle_windows = 0 if left_in_flight else self._idle_windows + 1
        if self.config.fallback_after and self._idle_windows >= self.config.fallback_after:
            self._idle_windows, self._sync_path_units = 0, self.config.fallback_units

    def _window_delay(self, in_flight: _InFlightUnit) -> WindowDelay:
        """Bound, per bucket, the update unit t+1 would skip by reading its conflicting rows stale, from the
        gathered ``local_maxima`` and the replicated Adam state (``odin_ns.sync.gate``); one host read. Runs after
        the gradient buckets are launched, so it overlaps their transfer."""
        grad_bounds, sensitivity = gathered_maxima(in_flight.maxima, list(self._params), self.num_rows)
        bounds = row_bounds(self._adam_rows(in_flight.staged), grad_bounds, sensitivity, self.config.delay)
        candidates = bitmap_to_mask(bitmap_and(in_flight.update_scope, in_flight.read_scope), self.num_rows)
        per_bucket = bucket_maxima(bounds, candidates, self._buckets.rows_per_bucket)
        read_rows = bitmap_count(in_flight.read_scope).double()[None]
        counts = torch.cat([read_rows, per_bucket.double().T.flatten()]).tolist()
        bounds_per_bucket = tuple(DelayBound(*counts[i : i + 3]) for i in range(1, len(counts), 3))
        return WindowDelay(int(counts[0]), bounds_per_bucket)

    def _adam_rows(self, staged: _StagedUnit) -> dict[str, AdamRows]:
        """Each tensor's Adam state as the publication of ``staged`` will find it (nothing of it published yet),
        with the learning rate it ran under."""
        learning_rates = {id(group): lr for group, lr in zip(self._optimizer_groups(), staged.learning_rates)}
        rows = {}
        for name, param in self._params.items():
            optimizer = self._optimizers[name]
            group = self._group_of(optimizer, param)
            state = optimizer.state.get(param, {})
            step = int(state["step"]) + 1 if "step" in state else 1
            beta1, beta2 = group["betas"]
            moments = state.get("exp_avg"), state.get("exp_avg_sq")
            rows[name] = AdamRows(param.detach(), *moments, learning_rates[id(group)], beta1, beta2, step)
        return rows

    @staticmethod
    def _group_of(optimizer: RowSteppingOptimizer, param: torch.Tensor) -> dict[str, Any]:
        return next(group for group in optimizer.param_groups if any(p is param for p in group["params"]))

    def _unpublished_with_updates(self, in_flight: _InFlightUnit) -> list[int]:
        return [
            bucket
            for bucket, rows in enumerate(in_flight.hazards.update_rows)
            if rows and bucket not in in_flight.published
        ]

    def _publish_run(self, in_flight: _InFlightUnit, run: list[int]) -> None:
        """Reduce-average the gradient rows of the consecutive buckets ``run`` into the unit's staging and step the
        optimizers once over the update-scope rows of their ranges (the unit's first publication advances the Adam
        step count). One run instead of one publication per bucket: the host cost is per launch, not per row."""
        self._check_version(in_flight.staged, in_flight)
        record = in_flight.staged.record
        for bucket in run:
            if bucket in in_flight.buckets:
                self._wait(in_flight.buckets[bucket], record)
        start = self._clock.now()
        if in_flight.packed is not None:
            first, last = in_flight.packed_offsets[run[0]], in_flight.packed_offsets[run[-1] + 1]
            reduced = in_flight.packed[first:last].div_(self._world_size)
            grads = list(in_flight.staged.grads.values())
            if in_flight.scoped_indices is None:
                unpack_rows(grads, (first, last), None, reduced)
            elif last > first:
                unpack_rows(grads, (first, last), in_flight.scoped_indices[first:last], reduced)
        for name, param in self._params.items():
            param.grad = in_flight.staged.grads[name]
        row_range = (self._buckets.ranges[run[0]][0], self._buckets.ranges[run[-1]][1])
        with self._learning_rates_of(in_flight.staged):
            for optimizer in {id(opt): opt for opt in self._optimizers.values()}.values():
                rows = in_flight.update_scope if self.config.adam_rows == "selective" else None
                optimizer.step_rows(rows, row_range=row_range, advance_step=not in_flight.published)
        for param in self._params.values():
            param.grad = None
        in_flight.published.update(run)
        record.add_span("publish_s", start, self._clock.now())

    def _publish_all(self, in_flight: _InFlightUnit) -> None:
        """Publish every remaining bucket of ``in_flight`` in row order, then file its record."""
        if in_flight.update_scope is None:
            self._resolve_scopes(in_flight)
        remaining = [bucket for bucket in range(len(self._buckets.ranges)) if bucket not in in_flight.published]
        for run in consecutive_runs(remaining):
            self._publish_run(in_flight, run)
        record = in_flight.staged.record
        collectives = [in_flight.scopes, *in_flight.buckets.values()]
        record.add_span("comm_s", in_flight.scopes.started, latest([c.finished for c in collectives]))
        self.stats.records.append(record)

    def _saw_stale_rows(
        self, in_flight: _InFlightUnit, late_buckets: list[int], visible: torch.Tensor, visible_fn: VisibleFn
    ) -> bool:
        """Whether a row published after the unit ran is one it saw, before or after that publication (a Gaussian
        moved into or out of its views): then its speculative gradients differ from sync's and it must re-run.
        Rows admitted as delayed reads were read stale on purpose and do not count."""
        with torch.no_grad():
            seen = bitmap_or(self._scope(visible), self._scope(visible_fn(shadow_views(self._params))))
        if in_flight.delayed_scope is not None:
            seen = bitmap_andnot(seen, in_flight.delayed_scope)
        late_ranges = [self._buckets.ranges[bucket] for bucket in late_buckets]
        return bool(stale_reads(in_flight.update_scope, late_ranges, seen).item())


def consecutive_runs(buckets: Iterable[int]) -> list[list[int]]:
    """Sorted bucket indices grouped into runs of consecutive ones: [0, 1, 3] -> [[0, 1], [3]]."""
    runs: list[list[int]] = []
    for bucket in sorted(buckets):
        if runs and runs[-1][-1] == bucket - 1:
            runs[-1].append(bucket)
        else:
            runs.append([bucket])
    return runs


GSPLAT_STATISTIC_OPS = {"grad2d": "sum", "count": "sum", "radii": "max"}
"""How gsplat's DefaultStrategy statistics combine over ranks: gradient sums and view counts add, radii take the max."""


class DrainingBarrier:
    """The structural barrier of a distributed run (``odin_ns.strategy.StructuralBarrier``): before a structural
    change, publish everything in flight and make the densification statistics identical on every rank (so every
    rank grows and prunes the same Gaussians); after it, rebind the runtime to the new tensors."""

    def __init__(self, runtime: OdinRuntime, statistic_ops: Mapping[str, str] = GSPLAT_STATISTIC_OPS):
        self._runtime = runtime
        self._statistic_ops = dict(statistic_ops)

    def before_change(self, state: dict[str, Any]) -> None:
        """Drain, then replace the tensor statistics of ``state`` by their reduction over ranks."""
        self._runtime.drain()
        present = {name: state[name] for name in self._statistic_ops if isinstance(state.get(name), torch.Tensor)}
        state.update(self._runtime.reduce_statistics(present, self._statistic_ops))

    def after_change(self, params: Mapping[str, torch.Tensor]) -> None:
        """Rebind to the new tensors and check that every rank made the same change."""
        self._runtime.rebind(params)
        self._runtime.verify_replicas()
