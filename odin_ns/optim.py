"""SelectiveAdam: Adam that publishes only the Gaussians of an update scope, via the fused Triton kernel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple, Type

import torch
from nerfstudio.engine.optimizers import OptimizerConfig

from odin_ns.kernels import check_bitmap, pack_bitmap, selective_adam_step


class SelectiveAdam(torch.optim.Optimizer):
    """Adam whose step touches only selected rows (Gaussians) of each [N, ...] parameter.

    Differences from ``torch.optim.Adam``:

    * Rows outside the selection keep their parameter *and* both moments bit-identical: a Gaussian that no camera
      of the step saw is not decayed towards zero-gradient momentum, and its memory is not even read.
    * The step count is global: every ``step()`` advances ``state["step"]`` for every parameter with a gradient,
      whether or not a row was selected, so bias correction follows the optimizer's step count, not a per-row one.
    * Only ``betas``, ``eps``, ``lr`` and ``weight_decay=0`` are supported (no AMSGrad, maximize, foreach, ...).

    With no selection (``visible_rows is None``) a step is exactly ``torch.optim.Adam``'s (non-foreach) step.
    State uses torch Adam's keys ``step``/``exp_avg``/``exp_avg_sq``, so gsplat's densification ops, which rewrite
    ``optimizer.state[p]`` and swap ``param_groups[i]["params"]``, and torch Adam checkpoints work unchanged.

    Set ``visible_rows`` (a bool mask [N] or a packed int32 bitmap) before ``step()``; it stays in force until
    changed. For chunked publication call ``step_rows`` per chunk instead.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        if lr < 0:
            raise ValueError(f"SelectiveAdam lr must be >= 0, got {lr}")
        if eps < 0:
            raise ValueError(f"SelectiveAdam eps must be >= 0, got {eps}")
        if not all(0.0 <= beta < 1.0 for beta in betas) or len(betas) != 2:
            raise ValueError(f"SelectiveAdam betas must be two values in [0, 1), got {betas}")
        if weight_decay != 0:
            raise ValueError(f"SelectiveAdam supports only weight_decay=0, got {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))
        self.visible_rows: Optional[torch.Tensor] = None

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None):
        """One Adam step on the rows in ``visible_rows`` (all rows when None) of every parameter."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._publish(self.visible_rows, row_range=None, advance_step=True)
        return loss

    @torch.no_grad()
    def step_rows(
        self, rows: Optional[torch.Tensor], row_range: Optional[tuple[int, int]] = None, advance_step: bool = True
    ) -> None:
        """Adam step on ``rows`` (mask or bitmap; None = all) restricted to ``row_range`` (lo, hi) when given.

        Chunked publication of one optimizer step publishes several disjoint ranges; the step count must advance
        only once, so pass ``advance_step=True`` for the first chunk of a step and False for the others.
        """
        self._publish(rows, row_range, advance_step)

    def _publish(self, rows: Optional[torch.Tensor], row_range: Optional[tuple[int, int]], advance_step: bool) -> None:
        bitmaps_by_size: dict[int, Optional[torch.Tensor]] = {}
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                if param.grad.is_sparse:
                    raise ValueError("SelectiveAdam does not support sparse gradients")
                state = self.state[param]
                if not state:
                    state["step"] = torch.tensor(0.0, dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                if advance_step:
                    state["step"] += 1
                step = int(state["step"].item())
                if step == 0:
                    raise ValueError("step_rows(advance_step=False) called before any step advanced the step count")
                n = param.shape[0]
                if n not in bitmaps_by_size:
                    bitmaps_by_size[n] = _as_bitmap(rows, n)
                selective_adam_step(
                    param,
                    param.grad,
                    state["exp_avg"],
                    state["exp_avg_sq"],
                    bitmaps_by_size[n],
                    lr=float(group["lr"]),
                    beta1=beta1,
                    beta2=beta2,
                    eps=group["eps"],
                    step=step,
                    row_range=row_range,
                )


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


@dataclass
class SelectiveAdamOptimizerConfig(OptimizerConfig):
    """nerfstudio optimizer config that builds a SelectiveAdam (drop-in for AdamOptimizerConfig)."""

    _target: Type = SelectiveAdam
    betas: Tuple[float, float] = (0.9, 0.999)
    """Adam's betas; the trainer raises them to the power B for B views per step (Grendel-GS's rule)."""
    weight_decay: float = 0
    """Must stay 0: SelectiveAdam has no weight decay."""
