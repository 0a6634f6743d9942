"""Read scopes predicted ahead of time, at bucket granularity, and the guard that validates them behind.

A measured read scope (project the next unit's views, all-gather the bitmaps, read the hazard counts on the host)
puts the overlap decision on the critical path: the gather waits for the slowest rank, the host read waits for the
GPU. Yet which buckets a unit can read is a matter of geometry the host can bound without either: each bucket of
rows gets conservative bounds (``BucketBounds``: for Gaussians, the box of their centres and the largest 3-sigma
radius), refreshed by an asynchronous device-to-host copy after each publication and inflated by the most Adam can
have moved them since (``adam_step_factor``); the plan says which views every rank renders in every unit, so every
rank tests its views of unit t+1 and all ranks' views of unit t against the bounds (``ReadPredictor``), with no
collective. Unit t+1 then waits only for the buckets both touch.

Quality-first stays exact only if the prediction holds every row a unit reads and every row it updates. The bounds
are conservative by construction; ``ScopeGuard`` checks it anyway, on the device, after every unit (the rows a unit
saw and the rows its exchange updated, against the predicted buckets), and the runtime reads its flag late, at
logging steps and barriers, where it raises ``ScopeMispredictionError`` on every rank.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Protocol

import numpy as np
import torch

from odin_ns.comm.collectives import RowBuckets
from odin_ns.comm.context import DistContext
from odin_ns.kernels import copy_to_host_behind_event, record_rows_outside_buckets
from odin_ns.sync.sightings import FirstSightings


class ScopeMispredictionError(RuntimeError):
    """A unit read or updated a row outside its predicted buckets: predicted read scopes were not conservative."""


def adam_step_factor(beta1: float, beta2: float) -> float:
    """K such that one Adam step moves an element by at most K x its learning rate, whatever the gradients.

    By Cauchy-Schwarz, |m_t| / sqrt(v_t) <= (1 - beta1) / sqrt((1 - beta2) (1 - beta1^2 / beta2)) for zero-initialised
    moments, and the bias correction sqrt(1 - beta2^t) / (1 - beta1^t) is at most 1; eps only shrinks the step.
    K = 7.27 for splatfacto's betas (0.9, 0.999)."""
    if not beta1**2 < beta2:
        raise ValueError(f"Adam's step is unbounded in its learning rate unless beta1^2 < beta2, got {beta1}, {beta2}")
    return (1 - beta1) / math.sqrt((1 - beta2) * (1 - beta1**2 / beta2))


class ReadPredictor(Protocol):
    """Which buckets a unit's views can read, known on the host before the unit runs."""

    def rebind(self, params: Mapping[str, torch.Tensor], buckets: RowBuckets) -> None:
        """The Gaussians were (re)bound, cut into ``buckets``: bound them now (a structural barrier's host wait)."""

    def published(self, params: Mapping[str, torch.Tensor], refresh: bool = True) -> None:
        """A unit's update was published into ``params``: the bounds are one publication older; ``refresh``: start
        bounding ``params`` anew, asynchronously."""

    def read_buckets(self, unit_id: int, every_rank: bool) -> np.ndarray:
        """bool [buckets]: the buckets holding every row unit ``unit_id``'s views can see (this rank's views, or
        every rank's), under the parameters as they will be when it runs."""


class BucketBounds:
    """Per-bucket bounds computed on the device and copied to the host behind the training, with their age in units.

    ``compute(params)`` returns float32 [buckets, k] on the device. After ``refresh`` the copy lands in pinned host
    memory behind a CUDA event; the bounds are adopted one publication later (``latest``), on every rank alike, so
    that decisions made from them agree across ranks (one of them, taking sync's path, changes the order of the
    collectives). By then the copy has had a unit's time to land: waiting on its event normally costs nothing."""

    ADOPT_AFTER = 1
    """Publications after which a refresh is adopted."""

    def __init__(self, compute: Callable[[Mapping[str, torch.Tensor]], torch.Tensor]):
        self._compute = compute
        self._host: np.ndarray | None = None
        self._age = 0
        self._pending: tuple[torch.Tensor, torch.cuda.Event | None] | None = None
        self._pending_age = 0

    def refresh(self, params: Mapping[str, torch.Tensor], wait: bool = False) -> None:
        """Start bounding ``params`` as they are now, unless an earlier refresh still awaits adoption; ``wait``:
        bound them now and adopt the result before returning (a structural barrier)."""
        if self._pending is not None and not wait:
            return
        with torch.no_grad():
            values = self._compute(params)
        self._pending, self._pending_age = copy_to_host_behind_event(values), 0
        if wait:
            self._adopt()

    def tick(self) -> None:
        """One more unit was published since the bounds (and the pending ones) were taken."""
        self._age += 1
        self._pending_age += 1

    def latest(self) -> tuple[np.ndarray, int]:
        """(bounds [buckets, k], units published since they were taken)."""
        if self._pending is not None and self._pending_age >= self.ADOPT_AFTER:
            self._adopt()
        if self._host is None:
            raise RuntimeError("BucketBounds.latest before any refresh: bind the predictor first")
        return self._host, self._age

    def _adopt(self) -> None:
        host, event = self._pending
        if event is not None:
            event.synchronize()
        self._host, self._age, self._pending = host.numpy(), self._pending_age, None


def per_bucket(values: torch.Tensor, buckets: RowBuckets, reduce: str) -> torch.Tensor:
    """[buckets, k]: the column-wise minimum (``reduce="min"``) or maximum of ``values`` [rows, k] over each bucket."""
    if reduce not in ("min", "max"):
        raise ValueError(f"reduce must be 'min' or 'max', got {reduce!r}")
    count = len(buckets.ranges)
    fill = math.inf if reduce == "min" else -math.inf
    padding = values.new_full((count * buckets.rows_per_bucket - values.shape[0], values.shape[1]), fill)
    blocks = torch.cat([values, padding]).view(count, buckets.rows_per_bucket, values.shape[1])
    return blocks.amin(1) if reduce == "min" else blocks.amax(1)


class ScopeGuard:
    """The first unit whose rows escaped its predicted buckets on this rank, kept on the device."""

    def __init__(self, device: torch.device):
        self._sightings = FirstSightings(1, device)

    def observe(self, unit_id: int, rows: torch.Tensor, predicted: np.ndarray, buckets: RowBuckets) -> None:
        """Record unit ``unit_id`` if a row of bool ``rows`` [N] lies outside the buckets bool ``predicted``
        [buckets] selects (a host-to-device copy of one byte per bucket, then one launch on Triton)."""
        selected = torch.from_numpy(np.ascontiguousarray(predicted, dtype=np.bool_))
        if rows.is_cuda:
            selected = selected.pin_memory().to(rows.device, non_blocking=True)
        sightings = self._sightings
        sightings.first_unit = record_rows_outside_buckets(rows, selected, buckets.rows_per_bucket,
                                                           sightings.first_unit, unit_id)

    def check(self, context: DistContext) -> None:
        """Raise ScopeMispredictionError on every rank if some rank recorded an escape (collective)."""
        sightings = self._sightings.earliest(context, "predicted scope check")
        if sightings:
            unit, rank, _ = sightings[0]
            raise ScopeMispredictionError(
                f"unit {unit} on rank {rank} read or updated a row outside its predicted buckets: the predicted read "
                "scopes are not conservative, so quality-first may have read a stale row (train with "
                "--pipeline.odin.read-scopes measured)"
            )
