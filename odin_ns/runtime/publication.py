"""Publication: a unit's averaged gradients stepped into the shared Gaussians, one run of row buckets at a time.

A unit publishes with the learning rates it ran under (snapshotted when it was staged: a scheduler may move them
while its exchange is in flight), over its update scope's rows (``selective``) or every row (``dense``), and in as
many row ranges as its window needs; the first range advances the optimizers' step count. Everything goes to the
optimizers as arguments of ``RowOptimizer.step_rows``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from odin_ns.runtime.optimizer import RowOptimizer
from odin_ns.sync.gate import AdamRows

REQUIRED_METHODS = ("holds", "learning_rates", "step_rows", "adam_rows")
LearningRates = tuple[list[float], ...]
"""Each distinct optimizer's per-group learning rates, in the order of ``Publication.optimizers``."""


class Publication:
    """Steps the optimizers of the bound row-aligned parameters."""

    def __init__(self, selective: bool):
        self.selective = selective
        """Step only the update scope's rows; False: every row (stock Adam)."""
        self.params: dict[str, torch.Tensor] = {}
        self.optimizer_of: dict[str, RowOptimizer] = {}
        self.optimizers: list[RowOptimizer] = []

    def bind(self, params: Mapping[str, torch.Tensor], optimizers: Mapping[str, RowOptimizer]) -> None:
        """Publish into ``params`` with ``optimizers`` (keyed like ``params``; one may serve several names)."""
        for name, param in params.items():
            if name in optimizers and not all(hasattr(optimizers[name], m) for m in REQUIRED_METHODS):
                raise ValueError(
                    f"the optimizer for '{name}' ({type(optimizers[name]).__name__}) does not implement RowOptimizer "
                    f"({', '.join(REQUIRED_METHODS)}): use odin_ns.runtime.optimizer.ScopedAdam"
                )
            if name not in optimizers:
                raise ValueError(f"no optimizer given for parameter '{name}'")
            if not optimizers[name].holds(param):
                raise ValueError(f"the optimizer for '{name}' does not hold the bound tensor: rebind it after replacing it")
        self.params = dict(params)
        self.optimizer_of = {name: optimizers[name] for name in params}
        self.optimizers = list({id(optimizer): optimizer for optimizer in self.optimizer_of.values()}.values())

    def learning_rates(self) -> LearningRates:
        """The current learning rates, to publish a unit with later."""
        return tuple(optimizer.learning_rates() for optimizer in self.optimizers)

    def publish(
        self,
        grads: Mapping[str, torch.Tensor],
        update_scope: torch.Tensor,
        row_range: tuple[int, int],
        learning_rates: LearningRates,
        first: bool,
    ) -> None:
        """One step of ``row_range`` from the averaged ``grads`` (keyed like the parameters)."""
        gradients = {self.params[name]: grad for name, grad in grads.items()}
        rows = update_scope if self.selective else None
        for optimizer, rates in zip(self.optimizers, learning_rates):
            optimizer.step_rows(gradients, rows, row_range, rates, advance_step=first)

    def adam_rows(self, learning_rates: LearningRates) -> dict[str, AdamRows]:
        """Each parameter's Adam state as the next publication will find it, at ``learning_rates``."""
        rates_of = {id(optimizer): rates for optimizer, rates in zip(self.optimizers, learning_rates)}
        return {
            name: self.optimizer_of[name].adam_rows(param, rates_of[id(self.optimizer_of[name])])
            for name, param in self.params.items()
        }
