"""The structural barrier of a distributed run: what ``OdinStrategy`` calls around densification, pruning and
opacity reset, expressed as four calls on the runtime.

Every rank keeps gsplat's densification statistics for the views it rendered itself. A refine (grow and prune)
reads them and then zeroes them, so they are reduced over ranks just before a refine: the reduction then holds what
one process rendering every rank's views would have accumulated since the last refine, and every rank grows and
prunes the same Gaussians. An opacity reset neither reads nor zeroes them; reducing at a reset would turn each
rank's partial sums into the global sum, which every rank then carries into the next refine's reduction, counting
the steps before the reset once per rank.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

import torch

GSPLAT_STATISTIC_OPS = {"grad2d": "sum", "count": "sum", "radii": "max"}
"""How gsplat's DefaultStrategy statistics combine over ranks: gradient sums and view counts add, radii take the max."""


class BarrierRuntime(Protocol):
    """What the barrier needs from the training runtime."""

    def drain(self) -> None:
        """Publish every unit in flight and meet all ranks."""

    def reduce_statistics(self, statistics: Mapping[str, torch.Tensor], ops: Mapping[str, str]) -> dict[str, torch.Tensor]:
        """Each tensor of ``statistics`` combined over ranks by its op of ``ops`` ("sum" or "max")."""

    def rebind(self, params: Mapping[str, torch.Tensor]) -> None:
        """Work on ``params`` from now on (the Gaussians were replaced)."""

    def verify_replicas(self) -> None:
        """Raise unless every rank holds the same parameters."""


class DrainingBarrier:
    """``odin_ns.strategy.StructuralBarrier`` of a distributed run: drain before every structural change, reduce the
    densification statistics before a refine only, rebind and check the replicas after the change."""

    def __init__(self, runtime: BarrierRuntime, statistic_ops: Mapping[str, str] = GSPLAT_STATISTIC_OPS):
        self._runtime = runtime
        self._statistic_ops = dict(statistic_ops)

    def before_change(self, state: dict[str, Any], refines: bool) -> None:
        """Drain; when the change refines, replace the tensor statistics of ``state`` by their reduction over ranks."""
        self._runtime.drain()
        if refines:
            present = {name: state[name] for name in self._statistic_ops if isinstance(state.get(name), torch.Tensor)}
            state.update(self._runtime.reduce_statistics(present, self._statistic_ops))

    def after_change(self, params: Mapping[str, torch.Tensor]) -> None:
        """Rebind to the new tensors and check that every rank made the same change."""
        self._runtime.rebind(params)
        self._runtime.verify_replicas()
