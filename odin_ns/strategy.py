"""gsplat's DefaultStrategy with a barrier around structural changes.

Densification, pruning and opacity reset rewrite the parameter tensors and optimizer state, so every in-flight unit
must be published before them and every rank must make identical decisions. The strategy stays gsplat's: this
subclass only calls a ``StructuralBarrier`` at the right moments (after the step's statistics are accumulated, before
anything changes; after the change) and draws the split samples from a generator seeded by the step, identically on
every rank, and re-sorts the Gaussians spatially after each change (new rows are appended at the end).
What the barrier does (drain, all-reduce statistics, rebind) is the training loop's business
(``odin_ns.structural_barrier``); the strategy tells it whether the change refines, since only a refine reads the
statistics and zeroes them afterwards.
"""

from __future__ import annotations

from typing import Any, Dict, Protocol

import torch
from gsplat.strategy import DefaultStrategy
from gsplat.strategy.ops import _update_param_with_optimizer

MORTON_BITS = 10
"""Grid cells per axis = 2**10: fine enough that a chunk of rows is a compact piece of the scene."""


def morton_order(means: torch.Tensor, bits: int = MORTON_BITS) -> torch.Tensor:
    """Permutation sorting points along a Z-order curve, so rows close in index are close in space.

    Odin publishes a unit's update by row ranges and a conflicting unit waits only for the ranges holding rows it
    reads; with spatially sorted rows a view's Gaussians fall in few ranges. The grid spans the 1st-99th
    percentiles so a few far outliers do not squash the scene into one cell.
    """
    lo = torch.quantile(means, 0.01, dim=0) if len(means) > 1 else means.amin(0)
    hi = torch.quantile(means, 0.99, dim=0) if len(means) > 1 else means.amax(0)
    scaled = (means - lo) / (hi - lo).clamp_min(1e-12)
    cells = (scaled.clamp(0, 1) * (2**bits - 1)).long()
    code = torch.zeros(len(means), dtype=torch.long, device=means.device)
    for bit in range(bits):
        for axis in range(3):
            code |= ((cells[:, axis] >> bit) & 1) << (3 * bit + axis)
    return torch.argsort(code, stable=True)


@torch.no_grad()
def sort_gaussians_spatially(params, optimizers, state: Dict[str, Any]) -> None:
    """Permute the Gaussians, their optimizer state and per-Gaussian strategy statistics into Morton order."""
    order = morton_order(params["means"])
    _update_param_with_optimizer(
        lambda _, param: torch.nn.Parameter(param[order], requires_grad=param.requires_grad),
        lambda _, value: value[order],
        params,
        optimizers,
    )
    for key, value in state.items():
        if isinstance(value, torch.Tensor) and value.shape[:1] == order.shape:
            state[key] = value[order]


class StructuralBarrier(Protocol):
    """Called around a structural change of the Gaussians."""

    def before_change(self, state: Dict[str, Any], refines: bool) -> None:
        """Everything in flight is published; when the change ``refines`` (grows and prunes), ``state`` holds the
        statistics of every rank's views since the last refine, identical on all ranks."""

    def after_change(self, params: Dict[str, torch.nn.Parameter]) -> None:
        """The Gaussians were replaced (resized or reset): rebind to ``params``."""


class NoBarrier:
    """A single process training synchronously needs no barrier."""

    def before_change(self, state: Dict[str, Any], refines: bool) -> None:
        return None

    def after_change(self, params: Dict[str, torch.nn.Parameter]) -> None:
        return None


class OdinStrategy(DefaultStrategy):
    """DefaultStrategy that drains to a barrier before densify/prune/reset and seeds its splits by step."""

    barrier: StructuralBarrier = NoBarrier()
    statistics_accumulated: bool = False
    """Set by a training loop that accumulated this step's statistics itself (``accumulate_statistics``, inside
    the unit's graph): the step's ``step_post_backward`` then only reads them."""
    _changing_structure: bool = False
    _refining: bool = False

    def refines(self, step: int) -> bool:
        """Whether ``step_post_backward`` at ``step`` grows and prunes (gsplat's condition)."""
        return (
            self.refine_start_iter < step < self.refine_stop_iter
            and step % self.refine_every == 0
            and step % self.reset_every >= self.pause_refine_after_reset
        )

    def changes_structure(self, step: int) -> bool:
        """Whether ``step_post_backward`` at ``step`` refines or resets opacities."""
        return step < self.refine_stop_iter and (self.refines(step) or step % self.reset_every == 0)

    def step_pre_backward(self, params, optimizers, state, step, info) -> None:
        """gsplat's keeps the 2D means' gradient (``retain_grad``) for the statistics; with absgrad they read the
        absolute gradient gsplat's backward sets instead, so nothing is kept: no copy of a [C, N, 2] gradient per
        step, and no hook in a backward that a CUDA graph captures."""
        if not self.absgrad:
            super().step_pre_backward(params, optimizers, state, step, info)

    def step_post_backward(self, params, optimizers, state, step, info, packed=False) -> None:
        self._changing_structure = self.changes_structure(step)
        if not self._changing_structure:
            super().step_post_backward(params, optimizers, state, step, info, packed=packed)
            return
        self._refining = self.refines(step)
        devices = [params["means"].device] if params["means"].is_cuda else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(step)
            super().step_post_backward(params, optimizers, state, step, info, packed=packed)
        sort_gaussians_spatially(params, optimizers, state)
        self._changing_structure = False
        self.barrier.after_change(params)

    def accumulates(self, step: int) -> bool:
        """Whether ``step_post_backward`` at ``step`` accumulates the statistics (gsplat's condition)."""
        return step < self.refine_stop_iter

    def _update_state(self, params, state, info, packed=False) -> None:
        if packed:
            raise ValueError("OdinStrategy accumulates statistics from unpacked rasterization only")
        if self.statistics_accumulated:
            self.statistics_accumulated = False
        else:
            self.accumulate_statistics(params, state, info)
        if self._changing_structure:
            self.barrier.before_change(state, refines=self._refining)

    def accumulate_statistics(self, params, state, info) -> None:
        """gsplat's running statistics, accumulated with dense masked sums instead of gsplat's ``torch.where`` over
        the visible (camera, Gaussian) pairs: the same sums, with no host synchronisation (the number of visible pairs
        never has to reach the host). Per step each Gaussian gets the sum over cameras of its gradient norms, the
        number of cameras that see it, and the largest normalised radius. Device work on tensors that stay in place
        once made: a captured unit replays it."""
        gradient = info[self.key_for_gradient]
        grads = (gradient.absgrad if self.absgrad else gradient.grad) * self._screen_scale(info, gradient.device)
        n_gaussian = len(list(params.values())[0])
        for key in ("grad2d", "count") + (("radii",) if self.refine_scale2d_stop_iter > 0 else ()):
            if state[key] is None:
                state[key] = torch.zeros(n_gaussian, device=grads.device)
        seen = info["radii"] > 0.0  # [C, N]
        state["grad2d"] += torch.where(seen, grads.norm(dim=-1), 0.0).sum(0)
        state["count"] += seen.sum(0)
        if self.refine_scale2d_stop_iter > 0:  # an unseen Gaussian's radius is 0: no mask needed
            radii = info["radii"] / float(max(info["width"], info["height"]))
            torch.maximum(state["radii"], radii.amax(0), out=state["radii"])

    def statistics(self, state) -> list:
        """The statistics tensors ``accumulate_statistics`` writes (those made so far)."""
        return [state[key] for key in ("grad2d", "count", "radii") if torch.is_tensor(state.get(key))]

    def _screen_scale(self, info: Dict[str, Any], device: torch.device) -> torch.Tensor:
        """float32 [2]: gsplat's factors from normalised to pixel gradients (x, y), kept on the device per image size
        and camera count (a fresh host tensor every step would be a copy to the device, and a wait)."""
        key = (info["width"], info["height"], info["n_cameras"], device)
        scales = self.__dict__.setdefault("_screen_scales", {})
        if key not in scales:
            width, height, cameras = key[:3]
            scales[key] = torch.tensor([width / 2.0 * cameras, height / 2.0 * cameras], device=device)
        return scales[key]
