"""OdinRuntime: data-parallel training units whose gradient exchange overlaps the next unit's compute.

Every rank holds a full replica of the Gaussians. A unit renders this rank's views, backpropagates into private
shadow views, and stages its gradients; its exchange (``exchange``) and its publication (``publication``) bring
every replica to the same state.

* ``sync``: each unit is exchanged and published before ``run_unit`` returns.
* ``quality-first``: unit t's exchange is launched when unit t+1 starts, together with unit t+1's read scope; unit
  t+1 computes while it is in flight, after the buckets holding rows it reads were published (no stale reads). After
  its backward the rest of unit t is published and unit t+1 is validated (re-run if unit t's update changed what it
  sees). The parameters equal ``sync``'s. With dense Adam, the rows outside unit t's update scope take their
  zero-gradient step (``Publication.drift``) as soon as the scope is known, before unit t+1 computes: those rows
  then read as sync leaves them, and only the scope's rows wait for the exchange.
  With predicted read scopes (``config.read_scopes``), the window is decided ahead on each rank from the plan and
  per-bucket geometric bounds (``odin_ns.sync.predicted``): no collective, no host read, no projection pass and no
  re-run; a device-side guard validates every unit's rows against the prediction behind it.
* ``throughput-first``: as quality-first, but unit t+1 may also read rows of unit t's update that are not yet
  published (delayed reads) when ``odin_ns.sync.gate`` bounds the skipped update as small and no rank reads more
  than ``tau`` of its rows stale. Delayed rows are published right after unit t+1 ran and are not re-run for.

The window's decision and checks live in ``window``; docs/design.md explains the model and one unit's path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence

import numpy as np
import torch

from odin_ns.comm.context import DistContext
from odin_ns.runtime.capture import CapturedCompute, UnitEffect, UnitGraphs, same_unit
from odin_ns.runtime.config import RuntimeConfig
from odin_ns.comm.collectives import consecutive_runs
from odin_ns.runtime.exchange import GradientExchange, InFlightExchange, StagedUnit, StaleUnitError, check_version
from odin_ns.runtime.finite import FiniteWatch
from odin_ns.runtime.optimizer import RowOptimizer
from odin_ns.runtime.packed import pack_gaussians
from odin_ns.runtime.publication import Publication
from odin_ns.runtime.records import Clock, RuntimeStats, UnitRecord, UnitTrace, WindowRecord, latest
from odin_ns.runtime.replicas import optimizer_tensors, verify_replicas
from odin_ns.runtime.shadow import shadow_views, staged_gradients
from odin_ns.runtime.window import (
    SYNC_PATH_AFTER,
    SYNC_PATH_UNITS,
    SyncPathStretches,
    decide,
    saw_stale_rows,
    with_delay_bounds,
)
from odin_ns.sync.gate import ReaderSensitivity, ThroughputFirstPolicy, local_maxima
from odin_ns.kernels import bitmap_to_mask
from odin_ns.sync.hazards import AdmissionPolicy, QualityFirstPolicy, check_private_staging
from odin_ns.sync.predicted import ReadPredictor, ScopeGuard
from odin_ns.sync.scopes import scope_of

__all__ = ["OdinRuntime", "StaleUnitError"]

RUNTIME_HYPER = "runtime.adam_hyper"
RUNTIME_UNIT = "runtime.unit"
"""The inputs a unit published in its graph takes from the runtime (named apart from the unit's own)."""

Views = dict[str, torch.Tensor]
ComputeFn = Callable[[Views], tuple[torch.Tensor, torch.Tensor]]
"""Forward and backward of one unit on the given views; returns (loss, bool[N] rows its views saw)."""
VisibleFn = Callable[[Views], torch.Tensor]
"""Cheap projection-only pass: bool[N] rows the unit's views would see under the given parameters."""
SensitivityFn = Callable[[Views], ReaderSensitivity]
"""How far on screen the unit's views see each row move per unit of displacement (throughput-first's bound)."""
Staging = tuple[torch.Tensor, Views]
"""A unit's private gradient table [N, columns] and each parameter's view of it (built once per unit: every view is
a slice and a reshape the host dispatches)."""


class OdinRuntime:
    """Runs units on shadow views, exchanges their gradients by row buckets and publishes them.

    ``params`` are the shared row-aligned tensors [N, ...] (one dtype and device) whose Adam state ``optimizers``
    (keyed like ``params``) hold; the runtime packs them into one table (``packed``), replacing each entry of
    ``params`` and each optimizer's tensors by views of it, and publishes into it; ``dense_params`` are small tensors every unit updates whole (camera optimizer,
    bilateral grid): the runtime clears their gradients before every compute and averages them over ranks after the
    unit, and the caller steps them. After a structural change (``drain`` first) call ``rebind``.

    ``context`` holds the ranks whose replicas this runtime keeps equal: it exchanges with every rank of it.
    With ``config.captured_units``, units given as a ``CapturedCompute`` in sync mode replay their compute from CUDA
    graphs (``odin_ns.runtime.capture``); ``log`` says, once, why they run eagerly where they cannot.
    ``sync_path_stretches`` is (windows, units): after that many windows in a row that left nothing in flight, an
    overlapped mode runs that many units on sync's path (``SyncPathStretches``).
    """

    def __init__(
        self,
        config: RuntimeConfig,
        params: Mapping[str, torch.Tensor],
        optimizers: Mapping[str, RowOptimizer],
        context: DistContext,
        dense_params: Sequence[torch.Tensor] = (),
        policy: AdmissionPolicy | None = None,
        predictor: ReadPredictor | None = None,
        sync_path_stretches: tuple[int, int] = (SYNC_PATH_AFTER, SYNC_PATH_UNITS),
        log: Callable[[str], None] = print,
    ):
        if (config.read_scopes == "predicted") != (predictor is not None):
            raise ValueError(f"read_scopes {config.read_scopes!r} needs a ReadPredictor exactly when 'predicted'")
        self.config = config
        self._predictor = predictor
        self.context = context
        """The ranks this one exchanges with."""
        self.policy = policy or (
            ThroughputFirstPolicy(config.delay) if config.mode == "throughput-first" else QualityFirstPolicy()
        )
        self.stats = RuntimeStats()
        self.structure_version = -1
        self.dense_params = list(dense_params)
        self._clock = Clock(self.context.device)
        self._exchange = GradientExchange(config, self.context, self._clock)
        self._publication = Publication(selective=config.adam == "selective")
        self._stretches = SyncPathStretches(*sync_path_stretches)
        self._pending: StagedUnit | None = None
        self._returned_at: float | None = None
        """When the last ``run_unit`` returned (host clock), for the next record's ``host_between_s``."""
        self._optimizers: Mapping[str, RowOptimizer] = optimizers
        self.graphs = self._unit_graphs(log) if config.captured_units else None
        """The captured units' graphs (None: every unit runs eagerly)."""
        self.rebind(params, optimizers)

    # ----------------------------------------------------------------------------------------------- public API

    def rebind(self, params: MutableMapping[str, torch.Tensor], optimizers: Mapping[str, RowOptimizer] | None = None) -> None:
        """Bind to (possibly resized) parameter tensors after a structural change, packing them (and their
        optimizers' moments) into new tables: the entries of ``params`` become views of them; bumps
        ``structure_version``.

        Units staged before the change can no longer be published (StaleUnitError): ``drain()`` before changing.
        """
        if not params:
            raise ValueError("OdinRuntime needs at least one parameter tensor")
        first = next(iter(params.values()))
        for name, param in params.items():
            if param.dim() == 0 or param.shape[0] != first.shape[0]:
                raise ValueError(f"parameter '{name}' {tuple(param.shape)} is not row-aligned with {tuple(first.shape)}")
            if param.dtype != first.dtype or param.device != first.device:
                raise ValueError(f"parameter '{name}' must be {first.dtype} on {first.device} like the others")
        delay = self.config.delay
        missing = {delay.position, delay.opacity_logit} - params.keys()
        if self.policy.needs_delay_bounds and missing:
            raise ValueError(f"delayed reads need the position and opacity tensors, missing {sorted(missing)}")
        if optimizers is not None:
            self._optimizers = optimizers
        self.packed = pack_gaussians(params, self._optimizers)
        self._params = dict(params)
        if self.structure_version < 0:
            self._finite = FiniteWatch(list(params), self.packed.layout.group_of_column(), first.device)
            self._guard = ScopeGuard(first.device)
        self._publication.bind(self.packed, self._params, self._optimizers)
        self._exchange.plan(self.packed.params)
        if self._predictor is not None:
            self._predictor.rebind(self._params, self._exchange.buckets)
        if self.graphs is not None:
            self.graphs.rebind()
        self.structure_version += 1

    @property
    def num_rows(self) -> int:
        return self._exchange.buckets.num_rows

    def run_unit(
        self,
        unit_id: int,
        compute_fn: ComputeFn,
        visible_fn: VisibleFn | None = None,
        sensitivity_fn: SensitivityFn | None = None,
        captured: CapturedCompute | None = None,
    ) -> torch.Tensor:
        """Run one unit; return its loss. In the overlapped modes the unit stays staged until the next ``run_unit``
        or ``drain``, and ``visible_fn`` (its read scope) is required; throughput-first also needs
        ``sensitivity_fn``, which turns the bound on a delayed read into the unit's pixels. ``captured``: the same
        compute as ``compute_fn``, as a function of the unit's device inputs, which sync mode replays from a CUDA
        graph with ``config.captured_units`` (the loss and the rows returned are then the graph's tensors, which the
        next unit of its key overwrites). ``captured.effect`` runs once, after the unit's last compute (in its graph
        where it has one)."""
        started = time.perf_counter()
        trace = UnitTrace(UnitRecord(unit_id, self.config.mode, self.structure_version))
        if self._returned_at is not None:
            trace.record.host_between_s = started - self._returned_at
        try:
            return self._run_unit(unit_id, trace, compute_fn, visible_fn, sensitivity_fn, captured)
        finally:
            self._returned_at = time.perf_counter()
            trace.record.host_run_s = self._returned_at - started

    def _run_unit(
        self,
        unit_id: int,
        trace: UnitTrace,
        compute_fn: ComputeFn,
        visible_fn: VisibleFn | None,
        sensitivity_fn: SensitivityFn | None,
        captured: CapturedCompute | None = None,
    ) -> torch.Tensor:
        if not self.config.overlapped or self._stretches.take_sync_unit():
            self._publish_pending()  # leaving the overlap: the staged unit publishes first, as under sync
            trace.record.sync_path = self.config.overlapped
            if captured is not None and self.graphs is not None and self.graphs.capturing:  # only in sync mode
                if self.context.world_size == 1:
                    return self._published_in_graph(unit_id, captured, trace)
                loss, visible, staging = self._replayed_compute(captured, trace)
            else:
                loss, visible, staging = self._compute(compute_fn, trace, "compute_s", ())
                _apply_effect(captured, (loss, visible))
            staged = self._stage(unit_id, staging, visible, trace)
            self._publish_all(self._exchange.launch(staged, read_scope=None))
            self._average_dense_gradients(unit_id)
            return loss
        if self._predictor is not None:
            return self._run_predicted(unit_id, compute_fn, trace, captured)
        if visible_fn is None:
            raise ValueError(f"{self.config.mode} mode needs visible_fn: the next unit's read scope decides the overlap")
        if self.policy.needs_delay_bounds and sensitivity_fn is None:
            raise ValueError(f"{self.policy.name} admission needs sensitivity_fn: delayed reads are bounded in pixels")
        previous, self._pending = self._pending, None
        in_flight = None if previous is None else self._open_window(previous, trace, visible_fn, sensitivity_fn)
        loss, visible, staging = self._compute(compute_fn, trace, "compute_s", in_flight.buffers() if in_flight else ())
        if in_flight is not None:
            late_buckets = in_flight.unpublished_with_updates()
            self._publish_all(in_flight)
            if late_buckets and self._saw_stale_rows(in_flight, late_buckets, visible, visible_fn):
                trace.record.reruns += 1
                loss, visible, staging = self._compute(compute_fn, trace, "rerun_compute_s", ())
        _apply_effect(captured, (loss, visible))
        self._pending = self._stage(unit_id, staging, visible, trace)
        self._average_dense_gradients(unit_id)
        return loss

    def drain(self) -> None:
        """Exchange and publish every staged unit, then meet all ranks at a barrier (before structural changes,
        evaluation, checkpoints and the end of training); NonFiniteGradientError if a unit's gradients held NaN/Inf."""
        self._publish_pending()
        self.context.barrier("drain barrier")
        self.check_finite()

    def check_finite(self) -> None:
        """Raise NonFiniteGradientError on every rank if some rank staged a NaN/Inf gradient, and, with predicted read
        scopes, ScopeMispredictionError if a unit's rows escaped its prediction (collective: call it at steps all
        ranks share, such as logging steps)."""
        self._finite.check(self.context)
        if self._predictor is not None:
            self._guard.check(self.context)

    def verify_replicas(self) -> None:
        """Raise ReplicaDivergenceError unless every rank holds bitwise the same Gaussians and optimizer state."""
        verify_replicas(self.context, self.state_tensors())

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The Gaussians and their optimizer state (moments and step counts), by name."""
        optimizer_of = self._publication.optimizer_of
        return optimizer_tensors(self._params, lambda name: optimizer_of[name].state.get(self._params[name], {}))

    def reduce_statistics(self, statistics: Mapping[str, torch.Tensor], ops: Mapping[str, str]) -> dict[str, torch.Tensor]:
        """Statistics summed or maxed over the exchanging ranks (densification statistics, say)."""
        return self.context.reduce_statistics(statistics, ops)

    # ---------------------------------------------------------------------------------------------- internals

    def _open_window(
        self,
        previous: StagedUnit,
        trace: UnitTrace,
        visible_fn: VisibleFn,
        sensitivity_fn: SensitivityFn | None,
    ) -> InFlightExchange:
        """Launch ``previous``'s exchange with this unit's read scope, decide the window and publish the buckets
        this unit must not read unpublished."""
        check_version(previous, self.structure_version)
        with torch.no_grad():
            read = visible_fn(self._params)
            maxima = None
            if self.policy.needs_delay_bounds:
                maxima = local_maxima(list(previous.grads.values()), sensitivity_fn(self._params), read)
        in_flight = self._exchange.launch(previous, self._scope(read), maxima)
        self._exchange.read_scopes(in_flight)
        if self.policy.needs_delay_bounds and in_flight.hazards.raw:
            adam = self._publication.adam_rows(previous.learning_rates)
            with_delay_bounds(in_flight, adam, self.config.delay, self._exchange.buckets)
        decision = decide(in_flight, self.policy, self._exchange.buckets)
        if not self._publication.selective:
            self._drift_outside_update_scope(in_flight)
        for run in consecutive_runs(decision.publish_first):
            self._publish_run(in_flight, run)
        self._stretches.count(decision.record.overlapped)
        trace.record.window = decision.record
        return in_flight

    def _run_predicted(
        self, unit_id: int, compute_fn: ComputeFn, trace: UnitTrace, captured: CapturedCompute | None
    ) -> torch.Tensor:
        """quality-first decided ahead: launch the staged unit's buckets that some rank's next views read first,
        wait only for those this rank's views read, compute, publish the rest; guard the rows of both units against
        their predictions."""
        previous, self._pending = self._pending, None
        if previous is None:  # nothing in flight (the previous unit took sync's path): nothing stale to read or guard
            loss, visible, staging = self._compute(compute_fn, trace, "compute_s", ())
            return self._finish_predicted(unit_id, staging, visible, trace, loss, captured)
        check_version(previous, self.structure_version)
        updates = self._predictor.read_buckets(previous.unit_id, every_rank=True)
        waited_for_somewhere = updates & self._predictor.read_buckets(unit_id, every_rank=True)  # alike on all ranks
        dense = not self._publication.selective
        untouched = [int(bucket) for bucket in np.flatnonzero(~updates)] if dense else []
        in_flight = self._exchange.launch(previous, read_scope=None, first_buckets=np.flatnonzero(waited_for_somewhere),
                                          zero_buckets=untouched)
        for run in consecutive_runs(untouched):  # no row there is updated (the guard checks it): drift them whole
            self._drift_run(in_flight, run)
        reads = self._predictor.read_buckets(unit_id, every_rank=False)
        first = [int(bucket) for bucket in np.flatnonzero(reads & updates)]
        if first and not dense:  # selective publication selects by the update scope; dense steps whole buckets
            self._exchange.read_scopes(in_flight)
        for run in consecutive_runs(first):
            self._publish_run(in_flight, run)
        ranges = self._exchange.buckets.ranges
        trace.record.window = WindowRecord(
            conflict_rows=sum(ranges[b][1] - ranges[b][0] for b in first),
            buckets=len(ranges),
            buckets_with_updates=int(updates.sum()),
            buckets_published_first=len(first),
            predicted=True,
        )
        loss, visible, staging = self._compute(compute_fn, trace, "compute_s", in_flight.buffers())
        self._publish_all(in_flight)
        updated = bitmap_to_mask(in_flight.update_scope, self.num_rows)
        self._guard.observe(previous.unit_id, updated, updates, self._exchange.buckets)
        self._guard.observe(unit_id, visible, reads, self._exchange.buckets)
        return self._finish_predicted(unit_id, staging, visible, trace, loss, captured)

    def _finish_predicted(
        self,
        unit_id: int,
        staging: Staging,
        visible: torch.Tensor,
        trace: UnitTrace,
        loss: torch.Tensor,
        captured: CapturedCompute | None,
    ) -> torch.Tensor:
        """Apply the unit's effect and stage it; publish it at once, as sync does, where the plan's next unit would
        wait for all of it."""
        _apply_effect(captured, (loss, visible))
        self._pending = self._stage(unit_id, staging, visible, trace)
        self._average_dense_gradients(unit_id)
        waits_for_everything = self._next_window_waits_for_everything(unit_id)
        self._stretches.count(overlapped=not waits_for_everything)
        if waits_for_everything:  # after the dense all-reduce, as every unit's
            trace.record.sync_path = True
            self._publish_pending()
        return loss

    def _next_window_waits_for_everything(self, unit_id: int) -> bool:
        """Whether unit ``unit_id + 1`` (the plan's next unit) is predicted to read, on the ranks together, every
        bucket this unit updates: then little could stay in flight, and publishing now, as sync does, starts the
        exchange a unit earlier. Publishing a unit before the next one runs is always exact, but it moves this unit's
        collectives ahead of whatever collective the trainer issues between units, so every rank must decide alike:
        the decision reads every rank's views, and bounds adopted alike (``BucketBounds``)."""
        updates = self._predictor.read_buckets(unit_id, every_rank=True)
        return not (updates & ~self._predictor.read_buckets(unit_id + 1, every_rank=True)).any()

    def _scope(self, visible: torch.Tensor) -> torch.Tensor:
        return scope_of(visible, self.num_rows, next(iter(self._params.values())).device)

    def _compute(
        self, compute_fn: ComputeFn, trace: UnitTrace, span: str, in_flight_buffers: Iterable[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, Staging]:
        """Forward and backward on fresh shadow views; returns (loss, visible mask, the unit's private gradient
        table and its per-name views), its staging checked for WAW/WAR. Gradients start from zero, the dense
        parameters' too: a re-run replaces the first run's, never adds to them."""
        for param in self.dense_params:
            param.grad = None
        views = shadow_views(self._params)
        start = self._clock.now()
        loss, visible = compute_fn(views)
        trace.add_span(span, start, self._clock.now())
        return loss, visible, self._staging(views, in_flight_buffers)

    def _staging(self, views: Views, in_flight_buffers: Iterable[torch.Tensor]) -> Staging:
        """The gradients a compute left in its shadow views, checked for WAW/WAR and packed into the unit's table."""
        staged = staged_gradients(views)
        check_private_staging({name: grad for name, grad in staged.items() if grad is not None}, self._params,
                              in_flight_buffers)
        return self.packed.gradient_table(staged)

    def _unit_graphs(self, log: Callable[[str], None]) -> UnitGraphs:
        graphs = UnitGraphs(self.context.device, log=log, check=same_unit)
        if self.config.overlapped:
            graphs.disable(f"units run eagerly in {self.config.mode} mode: a unit's gradient table is read by its "
                           "exchange while the next unit computes, and a replay would overwrite it (sync mode "
                           "replays them)")
        elif self.dense_params:
            graphs.disable("units run eagerly: the gradients of dense parameters (camera optimizer, bilateral grid) "
                           "are set on the parameters themselves, which a graph cannot leave in place")
        return graphs

    def _replayed_compute(self, captured: CapturedCompute, trace: UnitTrace) -> tuple[torch.Tensor, torch.Tensor, Staging]:
        """``_compute`` of a unit from its graph (``UnitGraphs``): the shadow views, forward, backward and gradient
        packing replayed, or run eagerly where the key has no graph yet."""

        def compute(inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Views]:
            views = shadow_views(self._params)
            loss, visible = captured.fn(views, inputs)
            return (loss, visible, *self._staging(views, ()))

        start = self._clock.now()
        loss, visible, gradient_table, gradients = self.graphs.run(captured.key, captured.inputs, compute,
                                                                   _on_loss_and_rows(captured.effect))
        trace.add_span("compute_s", start, self._clock.now())
        return loss, visible, (gradient_table, gradients)

    def _published_in_graph(self, unit_id: int, captured: CapturedCompute, trace: UnitTrace) -> torch.Tensor:
        """A sync unit on one rank, whose exchange is the identity: its compute, finite watch and publication (and
        ``captured.effect``) replayed from one graph (``UnitGraphs``), so the host launches a unit's whole step at
        once. What varies from unit to unit on the host (the step count and learning rates, the unit's id) reaches
        the graph as device inputs. The record's ``compute_s`` spans the publication too."""
        publication = self._publication
        device = self.context.device
        hyper = publication.unit_hyper(publication.learning_rates()).to(device, non_blocking=True)
        unit = torch.tensor(unit_id, dtype=torch.int64, pin_memory=device.type == "cuda").to(device, non_blocking=True)
        inputs = {**captured.inputs, RUNTIME_HYPER: hyper, RUNTIME_UNIT: unit}

        def compute(inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
            views = shadow_views(self._params)
            loss, visible = captured.fn(views, inputs)
            gradient_table, _ = self._staging(views, ())
            scope = self._scope(visible) if publication.selective else None
            return loss, visible, gradient_table, visible.sum(), scope

        unit_effect = _on_loss_and_rows(captured.effect)

        def publish(outputs: tuple[torch.Tensor, ...], inputs: Mapping[str, torch.Tensor]) -> None:
            _, _, gradient_table, _, scope = outputs
            self._finite.observe(inputs[RUNTIME_UNIT], gradient_table)
            publication.publish_from(gradient_table, scope, inputs[RUNTIME_HYPER])
            if unit_effect is not None:
                unit_effect.apply(outputs, inputs)

        own = unit_effect.state if unit_effect is not None else list
        effect = UnitEffect(publish, lambda: [*publication.state(), *self._finite.state(), *own()])
        start = self._clock.now()
        loss, _, _, update_rows, _ = self.graphs.run(captured.key, inputs, compute, effect)
        trace.add_span("compute_s", start, self._clock.now())
        trace.record.exchange = "local"
        trace.update_rows = update_rows.clone()  # the graph's count, rewritten by the next replay
        self.stats.file(trace)
        return loss

    def _average_dense_gradients(self, unit_id: int) -> None:
        grads = [param.grad for param in self.dense_params if param.grad is not None]
        self.context.all_reduce_mean_(grads, f"dense gradients of unit {unit_id}")

    def _stage(self, unit_id: int, staging: Staging, visible: torch.Tensor, trace: UnitTrace) -> StagedUnit:
        gradient_table, gradients = staging
        self._finite.observe(unit_id, gradient_table)
        return StagedUnit(
            unit_id, self.structure_version, gradient_table, gradients, self._scope(visible), trace,
            self._publication.learning_rates(),
        )

    def _publish_pending(self) -> None:
        """Exchange and publish the staged unit, if any, with no unit waiting on it."""
        if self._pending is not None:
            staged, self._pending = self._pending, None
            check_version(staged, self.structure_version)
            self._publish_all(self._exchange.launch(staged, read_scope=None))

    def _publish_run(self, in_flight: InFlightExchange, run: list[int]) -> None:
        """Publish the consecutive buckets ``run`` once they arrived: one optimizer step over their rows (the unit's
        first step advances the step count). One run instead of one publication per bucket: the host cost is per
        launch, not per row. Selective Adam, or dense Adam whose other rows drifted already, steps the update
        scope's rows; dense Adam otherwise steps every row of the run."""
        check_version(in_flight.staged, self.structure_version, in_flight)
        self._exchange.arrive(in_flight, run)
        start = self._clock.now()
        ranges = self._exchange.buckets.ranges
        staged = in_flight.staged
        scope_only = self._publication.selective or in_flight.drifted_outside_scope
        self._publication.publish(
            staged.gradient_table,
            in_flight.update_scope if scope_only else None,
            (ranges[run[0]][0], ranges[run[-1]][1]),
            staged.learning_rates,
            first=not in_flight.advanced,
        )
        in_flight.advanced = True
        in_flight.published.update(run)
        staged.trace.add_span("publish_s", start, self._clock.now())

    def _drift_outside_update_scope(self, in_flight: InFlightExchange) -> None:
        """Dense Adam's step of every row outside the update scope (known: the scope gather was read), whose averaged
        gradient is zero on every rank: it needs nothing from the exchange, so it runs before the next unit reads."""
        self._drift(in_flight, in_flight.update_scope, (0, self.num_rows))
        in_flight.drifted_outside_scope = True

    def _drift_run(self, in_flight: InFlightExchange, run: list[int]) -> None:
        """Dense Adam's step of the consecutive buckets ``run``, which hold no updated row: their averaged gradient is
        zero, so they are stepped without it (and were not exchanged)."""
        ranges = self._exchange.buckets.ranges
        self._drift(in_flight, None, (ranges[run[0]][0], ranges[run[-1]][1]))
        in_flight.published.update(run)

    def _drift(self, in_flight: InFlightExchange, skipped: torch.Tensor | None, row_range: tuple[int, int]) -> None:
        """The unit's zero-gradient step of the rows of ``row_range`` outside the bitmap ``skipped`` (None: all)."""
        start = self._clock.now()
        staged = in_flight.staged
        self._publication.drift(skipped, row_range, staged.learning_rates, first=not in_flight.advanced)
        in_flight.advanced = True
        staged.trace.add_span("publish_s", start, self._clock.now())

    def _publish_all(self, in_flight: InFlightExchange) -> None:
        """Publish every remaining bucket of ``in_flight`` in row order, then file its trace."""
        if in_flight.update_scope is None:
            self._exchange.read_scopes(in_flight)
        remaining = [b for b in range(len(self._exchange.buckets.ranges)) if b not in in_flight.published]
        for run in consecutive_runs(remaining):
            self._publish_run(in_flight, run)
        trace = in_flight.staged.trace
        collectives = in_flight.collectives()
        trace.add_span("comm_s", in_flight.scopes.started, latest([c.finished for c in collectives]))
        self.stats.file(trace)
        if self._predictor is not None:  # inside a sync-path stretch nothing reads the bounds until it ends
            self._predictor.published(self._params, refresh=not self._stretches.in_stretch)

    def _saw_stale_rows(
        self, in_flight: InFlightExchange, late_buckets: list[int], visible: torch.Tensor, visible_fn: VisibleFn
    ) -> bool:
        with torch.no_grad():
            seen_after = self._scope(visible_fn(self._params))
        return saw_stale_rows(in_flight, late_buckets, self._exchange.buckets, self._scope(visible), seen_after)


def _on_loss_and_rows(effect: UnitEffect | None) -> UnitEffect | None:
    """``effect`` applied to the first two of a compute's outputs: a unit's effect sees (loss, rows its views saw)
    whichever path ran the unit."""
    if effect is None:
        return None
    return UnitEffect(lambda outputs, inputs: effect.apply(outputs[:2], inputs), effect.state)


def _apply_effect(captured: CapturedCompute | None, outputs: tuple[torch.Tensor, ...]) -> None:
    """Apply a unit's effect after its last compute (``outputs``: what that compute returned) where no graph
    applied it."""
    if captured is not None and captured.effect is not None:
        captured.effect.apply(outputs, captured.inputs)
