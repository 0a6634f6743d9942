"""gsplat's DefaultStrategy with a barrier around structural changes.

Densification, pruning and opacity reset rewrite the parameter tensors and optimizer state, so every in-flight unit
must be published before them and every rank must make identical decisions. The strategy stays gsplat's: this
subclass only calls a ``StructuralBarrier`` at the right moments (after the step's statistics are accumulated, before
anything changes; after the change) and draws the split samples from a generator seeded by the step, identically on
every rank. What the barrier does (drain, all-reduce statistics, rebind) is the training loop's business.
"""

from __future__ import annotations

from typing import Any, Dict, Protocol

import torch
from gsplat.strategy import DefaultStrategy


class StructuralBarrier(Protocol):
    """Called around a structural change of the Gaussians."""

    def before_change(self, state: Dict[str, Any]) -> None:
        """Everything in flight is published and ``state`` holds statistics identical on all ranks."""

    def after_change(self, params: Dict[str, torch.nn.Parameter]) -> None:
        """The Gaussians were replaced (resized or reset): rebind to ``params``."""


class NoBarrier:
    """A single process training synchronously needs no barrier."""

    def before_change(self, state: Dict[str, Any]) -> None:
        return None

    def after_change(self, params: Dict[str, torch.nn.Parameter]) -> None:
        return None


class OdinStrategy(DefaultStrategy):
    """DefaultStrategy that drains to a barrier before densify/prune/reset and seeds its splits by step."""

    barrier: StructuralBarrier = NoBarrier()
    _changing_structure: bool = False

    def changes_structure(self, step: int) -> bool:
        """Whether ``step_post_backward`` at ``step`` refines (grow/prune) or resets opacities."""
        if step >= self.refine_stop_iter:
            return False
        refines = (
            step > self.refine_start_iter
            and step % self.refine_every == 0
            and step % self.reset_every >= self.pause_refine_after_reset
        )
        return refines or step % self.reset_every == 0

    def step_post_backward(self, params, optimizers, state, step, info, packed=False) -> None:
        self._changing_structure = self.changes_structure(step)
        if not self._changing_structure:
            super().step_post_backward(params, optimizers, state, step, info, packed=packed)
            return
        devices = [params["means"].device] if params["means"].is_cuda else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(step)
            super().step_post_backward(params, optimizers, state, step, info, packed=packed)
        self._changing_structure = False
        self.barrier.after_change(params)

    def _update_state(self, params, state, info, packed=False) -> None:
        super()._update_state(params, state, info, packed=packed)
        if self._changing_structure:
            self.barrier.before_change(state)
