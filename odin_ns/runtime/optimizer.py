"""The optimizer protocol of publication, and ScopedAdam, the Adam that implements it on the Gaussians' rows.

Publication steps the packed Gaussian table itself (``odin_ns.runtime.publication``): of an optimizer it needs the
state (Adam's moments, views of the packed moment tables, and the step count), each group's hyperparameters and
learning rate, and what throughput-first's delay bound reads of Adam's state (``adam_rows``). The learning rates
travel as arguments, snapshotted when a unit is staged: nothing goes through ``param.grad`` or by swapping
``param_groups`` learning rates, so a scheduler may move them while a unit is in flight and a unit may publish in
several row ranges.

ScopedAdam against gsplat's ``gsplat.optimizers.SelectiveAdam`` (gsplat >= 1.5), which also skips invisible rows:

* bias correction: ScopedAdam applies torch Adam's (``lr * sqrt(1 - beta2^t) / (1 - beta1^t)``); gsplat's fused
  kernel takes lr, betas and eps only and applies none, so its steps differ from torch Adam's by the factor
  ``(1 - beta1^t) / sqrt(1 - beta2^t)`` (about 3.2 at the first step with betas (0.9, 0.999), tending to 1);
* step counting: ScopedAdam's step count is global and advances once per step (per unit, however many row ranges
  publish it), whether or not a row was selected; bias correction follows that count, not a per-row one;
* selection: ScopedAdam takes a bool mask or a packed 32-row bitmap (the runtime's scope format) and an optional
  row range; gsplat's takes a per-step visibility mask over all rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Optional, Protocol

import torch

from odin_ns.kernels import check_bitmap, pack_bitmap, selective_adam_step
from odin_ns.sync.gate import AdamRows


class RowOptimizer(Protocol):
    """What publication needs of an optimizer."""

    state: Mapping[torch.Tensor, dict[str, Any]]
    """torch's per-parameter state (moments and step count), read by publication and the replica checks."""
    param_groups: Sequence[dict[str, Any]]
    """torch's parameter groups: each group's ``params``, ``betas`` and ``eps``."""

    def holds(self, param: torch.Tensor) -> bool:
        """Whether ``param`` is one of the tensors this optimizer steps."""

    def learning_rates(self) -> list[float]:
        """The current learning rate of each parameter group, in group order (a scheduler moves them)."""

    def adam_rows(self, param: torch.Tensor, learning_rates: Sequence[float]) -> AdamRows:
        """``param``'s Adam state as the next step will find it, with its group's rate from ``learning_rates``."""


class ScopedAdam(torch.optim.Optimizer):
    """Adam whose step touches only selected rows (Gaussians) of each [N, ...] parameter.

    Differences from ``torch.optim.Adam``:

    * Rows outside the selection keep their parameter *and* both moments bit-identical: a Gaussian that no camera
      of the step saw is not decayed towards zero-gradient momentum, and its memory is not even read.
    * The step count is global (see the module docstring).
    * Only ``betas``, ``eps``, ``lr`` and ``weight_decay=0`` are supported (no AMSGrad, maximize, foreach, ...).

    ``step_rows`` over all rows is exactly ``torch.optim.Adam``'s (non-foreach) step; ``step()`` is that step from
    ``param.grad``, for code that drives it as a plain torch optimizer. State uses torch Adam's keys
    ``step``/``exp_avg``/``exp_avg_sq``, so gsplat's densification ops (which rewrite ``optimizer.state[p]`` and swap
    ``param_groups[i]["params"]``) and torch Adam checkpoints work unchanged.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        if lr < 0:
            raise ValueError(f"ScopedAdam lr must be >= 0, got {lr}")
        if eps < 0:
            raise ValueError(f"ScopedAdam eps must be >= 0, got {eps}")
        if len(betas) != 2 or not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"ScopedAdam betas must be two values in [0, 1), got {betas}")
        if weight_decay != 0:
            raise ValueError(f"ScopedAdam supports only weight_decay=0, got {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def holds(self, param: torch.Tensor) -> bool:
        return any(p is param for group in self.param_groups for p in group["params"])

    def learning_rates(self) -> list[float]:
        return [float(group["lr"]) for group in self.param_groups]

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None):
        """Adam step of every row of every parameter with a ``.grad``, at the current learning rates."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        gradients = {p: p.grad for group in self.param_groups for p in group["params"] if p.grad is not None}
        self.step_rows(gradients, None, None, self.learning_rates(), advance_step=True)
        return loss

    @torch.no_grad()
    def step_rows(
        self,
        gradients: Mapping[torch.Tensor, torch.Tensor],
        rows: torch.Tensor | None,
        row_range: tuple[int, int] | None,
        learning_rates: Sequence[float],
        advance_step: bool,
    ) -> None:
        """Adam step on ``rows`` (bool mask or packed bitmap; None = all) restricted to ``row_range`` (lo, hi) when
        given, of the parameters in ``gradients`` (keyed by the parameter tensor), group g at ``learning_rates[g]``.

        A step published in several row ranges advances the step count once: ``advance_step`` on its first range
        only."""
        if len(learning_rates) != len(self.param_groups):
            raise ValueError(f"{len(learning_rates)} learning rates for {len(self.param_groups)} parameter groups")
        stepped = [
            (group, lr, param, gradients[param])
            for group, lr in zip(self.param_groups, learning_rates)
            for param in group["params"]
            if gradients.get(param) is not None
        ]
        if any(grad.is_sparse for *_, grad in stepped):
            raise ValueError("ScopedAdam does not support sparse gradients")
        bitmaps = {param.shape[0]: _as_bitmap(rows, param.shape[0]) for _, _, param, _ in stepped}  # checked first
        for group, lr, param, grad in stepped:
            state = self._state_of(param)
            step = int(state["step"].item()) + int(advance_step)
            if step == 0:
                raise ValueError("step_rows(advance_step=False) called before any step advanced the step count")
            state["step"].fill_(step)
            beta1, beta2 = group["betas"]
            selective_adam_step(
                param, grad, state["exp_avg"], state["exp_avg_sq"], bitmaps[param.shape[0]],
                lr=float(lr), beta1=beta1, beta2=beta2, eps=group["eps"], step=step, row_range=row_range,
            )

    def adam_rows(self, param: torch.Tensor, learning_rates: Sequence[float]) -> AdamRows:
        index, group = next((i, g) for i, g in enumerate(self.param_groups) if any(p is param for p in g["params"]))
        state = self.state.get(param, {})
        step = int(state["step"]) + 1 if "step" in state else 1
        beta1, beta2 = group["betas"]
        return AdamRows(
            param.detach(), state.get("exp_avg"), state.get("exp_avg_sq"), learning_rates[index], beta1, beta2, step
        )

    def _state_of(self, param: torch.Tensor) -> dict[str, torch.Tensor]:
        state = self.state[param]
        if not state:
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        return state


def _as_bitmap(rows: Optional[torch.Tensor], n: int) -> Optional[torch.Tensor]:
    """Accept a bool mask [n] or a packed bitmap for n rows; return the bitmap (None stays None = all rows)."""
    if rows is None or rows.dtype == torch.int32:
        if rows is not None:
            check_bitmap(rows, "visible rows", n)
        return rows
    if rows.dtype != torch.bool or rows.shape != (n,):
        raise ValueError(
            f"visible rows must be a bool mask of shape ({n},) or an int32 bitmap, got {rows.dtype} {tuple(rows.shape)}"
        )
    return pack_bitmap(rows)
