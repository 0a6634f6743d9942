"""Publication: a unit's averaged gradients stepped into the shared Gaussians, one run of row buckets at a time.

A unit publishes with the learning rates it ran under (snapshotted when it was staged: a scheduler may move them
while its exchange is in flight), over its update scope's rows (selective Adam) or every row (dense Adam), and in as
many row ranges as its window needs; the first of its steps advances the step count.

Dense Adam also steps the rows outside the update scope, whose averaged gradient is exactly zero on every rank: their
step (the moments decay, the parameter moves along its momentum) reads nothing the exchange brings, so ``drift``
publishes it as soon as the update scope is known, and the rows of the scope follow when their buckets arrive. Each
element goes through the same operations either way, so the split publication is bitwise the dense one. The
Gaussians are packed (``odin_ns.runtime.packed``): a publication is one fused Adam launch over the parameter table,
each column group at the learning rate and eps of the optimizer group holding it, replayed from a CUDA graph once
its operands repeat (``PackedAdam``), which saves the host the launch's argument checks and Triton's launcher; the
step is bitwise the launched one. The optimizers keep the state (moments as views of the packed tables, the step
count) and the hyperparameters; publication reads them and steps the tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from odin_ns.kernels import ColumnGroup, PackedAdam, packed_adam_hyper, packed_adam_step_from
from odin_ns.runtime.optimizer import RowOptimizer
from odin_ns.runtime.packed import PackedGaussians
from odin_ns.sync.gate import AdamRows

REQUIRED_METHODS = ("holds", "learning_rates", "adam_rows")
LearningRates = tuple[list[float], ...]
"""Each distinct optimizer's per-group learning rates, in the order of ``Publication.optimizers``."""


@dataclass(frozen=True)
class _GroupOf:
    """Where a parameter's hyperparameters live: optimizer ``optimizer`` (index into ``Publication.optimizers``),
    its param group ``group``."""

    optimizer: int
    group: int


class Publication:
    """Steps the packed table of the bound row-aligned parameters."""

    def __init__(self, selective: bool):
        self.selective = selective
        """Step only the update scope's rows; False: every row (stock Adam)."""
        self.adam = PackedAdam(capture=True)
        """The fused launches, replayed from CUDA graphs where their operands repeat."""
        self.params: dict[str, torch.Tensor] = {}
        self.optimizer_of: dict[str, RowOptimizer] = {}
        self.optimizers: list[RowOptimizer] = []
        self._packed: PackedGaussians | None = None
        self._group_of: dict[str, _GroupOf] = {}
        self._betas: tuple[float, float] = (0.9, 0.999)

    def bind(
        self, packed: PackedGaussians, params: Mapping[str, torch.Tensor], optimizers: Mapping[str, RowOptimizer]
    ) -> None:
        """Publish into ``packed`` (whose views are ``params``) with the hyperparameters and state of ``optimizers``
        (keyed like ``params``; one may serve several names)."""
        for name, param in params.items():
            if name not in optimizers:
                raise ValueError(f"no optimizer given for parameter '{name}'")
            if not all(hasattr(optimizers[name], m) for m in REQUIRED_METHODS):
                raise ValueError(
                    f"the optimizer for '{name}' ({type(optimizers[name]).__name__}) does not implement RowOptimizer "
                    f"({', '.join(REQUIRED_METHODS)}): use odin_ns.runtime.optimizer.ScopedAdam"
                )
            if not optimizers[name].holds(param):
                raise ValueError(f"the optimizer for '{name}' does not hold the bound tensor: rebind it after replacing it")
        self.params = dict(params)
        self.optimizer_of = {name: optimizers[name] for name in params}
        self.optimizers = list({id(optimizer): optimizer for optimizer in self.optimizer_of.values()}.values())
        index_of = {id(optimizer): index for index, optimizer in enumerate(self.optimizers)}
        self._group_of = {}
        for name, param in self.params.items():
            optimizer = self.optimizer_of[name]
            group = next(i for i, g in enumerate(optimizer.param_groups) if any(p is param for p in g["params"]))
            self._group_of[name] = _GroupOf(index_of[id(optimizer)], group)
        betas = {tuple(self._hyper(name)["betas"]) for name in self.params}
        if len(betas) != 1:
            raise ValueError(f"the Gaussians' optimizer groups must share Adam's betas to be stepped as one table, got {betas}")
        (self._betas,) = betas
        self._packed = packed

    def learning_rates(self) -> LearningRates:
        """The current learning rates, to publish a unit with later."""
        return tuple(optimizer.learning_rates() for optimizer in self.optimizers)

    def publish(
        self,
        gradient_table: torch.Tensor,
        rows: torch.Tensor | None,
        row_range: tuple[int, int],
        learning_rates: LearningRates,
        first: bool,
    ) -> None:
        """One step of the rows of ``row_range`` set in the bitmap ``rows`` (None: all of them) from the averaged
        ``gradient_table`` (packed like the parameters); ``first`` advances the step count."""
        step = self._advance(first)
        if row_range[1] > row_range[0]:
            self.adam.step(self._packed.params, gradient_table, self._packed.exp_avg, self._packed.exp_avg_sq, rows,
                           self._columns(learning_rates), *self._betas, step, row_range)

    def drift(
        self, skipped: torch.Tensor | None, row_range: tuple[int, int], learning_rates: LearningRates, first: bool
    ) -> None:
        """Dense Adam's step of the rows of ``row_range`` whose averaged gradient is zero: those not set in the bitmap
        ``skipped`` (None: all of them). No gradient is read; ``first`` advances the step count."""
        step = self._advance(first)
        if row_range[1] > row_range[0]:
            self.adam.step(self._packed.params, None, self._packed.exp_avg, self._packed.exp_avg_sq, skipped,
                           self._columns(learning_rates), *self._betas, step, row_range,
                           complement=skipped is not None)

    def unit_hyper(self, learning_rates: LearningRates) -> torch.Tensor:
        """Advance the step count for a unit published whole by ``publish_from``; return what its step reads on the
        device (``packed_adam_hyper``: a pinned host tensor)."""
        step = self._advance(first=True)
        return packed_adam_hyper(self._columns(learning_rates), self._packed.params.shape[1], *self._betas, step)

    def publish_from(self, gradient_table: torch.Tensor, rows: torch.Tensor | None, hyper: torch.Tensor) -> None:
        """A unit's whole step from ``gradient_table`` (its averaged gradients), of the rows set in the bitmap ``rows``
        (None: every row), reading the step's values from ``hyper`` (``unit_hyper``'s, on the device): nothing it
        launches depends on the step on the host, so a captured unit replays its publication."""
        packed = self._packed
        packed_adam_step_from(packed.params, gradient_table, packed.exp_avg, packed.exp_avg_sq, rows, hyper,
                              *self._betas)

    def state(self) -> list[torch.Tensor]:
        """The tensors a publication writes: the packed parameters and both moments."""
        return [self._packed.params, self._packed.exp_avg, self._packed.exp_avg_sq]

    def _advance(self, first: bool) -> int:
        """The step count of this publication, advanced on a unit's first step."""
        states = [self.optimizer_of[name].state[param] for name, param in self.params.items()]
        step = int(states[0]["step"].item()) + int(first)  # a host tensor: torch keeps Adam's step count there
        if step == 0:
            raise ValueError("a unit's first publication must advance the step count")
        if first:
            for state in states:
                state["step"].fill_(step)
        return step

    def _columns(self, learning_rates: LearningRates) -> list[ColumnGroup]:
        return [
            ColumnGroup(lo, hi, learning_rates[where.optimizer][where.group], self._hyper(name)["eps"])
            for name, (lo, hi) in self._packed.layout.spans.items()
            for where in (self._group_of[name],)
        ]

    def adam_rows(self, learning_rates: LearningRates) -> dict[str, AdamRows]:
        """Each parameter's Adam state as the next publication will find it, at ``learning_rates``."""
        rates_of = {id(optimizer): rates for optimizer, rates in zip(self.optimizers, learning_rates)}
        return {
            name: self.optimizer_of[name].adam_rows(param, rates_of[id(self.optimizer_of[name])])
            for name, param in self.params.items()
        }

    def _hyper(self, name: str) -> dict:
        where = self._group_of[name]
        return self.optimizers[where.optimizer].param_groups[where.group]
