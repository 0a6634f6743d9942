"""NaN/Inf in a unit's gradients, caught where it starts and reported before it reaches a checkpoint.

A non-finite gradient on one rank spreads to every replica through the exchange, and a later barrier would only see
ranks holding the same NaNs. So each rank watches its own local gradients as units are staged, on the device (the
first unit each parameter group went non-finite, no host read), and the runtime compares the ranks' records at
logging steps and at every drain: every rank then raises the same error, naming the step, the rank and the groups
where it began, before the drain's checkpoint is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from odin_ns.comm.context import DistContext


class NonFiniteGradientError(RuntimeError):
    """A unit's gradients held NaN or Inf."""


class FiniteWatch:
    """Per parameter group, the first unit whose gradient on this rank held NaN or Inf (-1: none yet)."""

    def __init__(self, names: Sequence[str], device: torch.device):
        self.names = list(names)
        self.first_unit = torch.full((len(self.names),), -1, dtype=torch.int64, device=device)

    def observe(self, unit_id: int, grads: Mapping[str, torch.Tensor]) -> None:
        """Record ``grads``' groups that hold a non-finite value (device work only)."""
        bad = torch.stack([~torch.isfinite(grads[name]).all() for name in self.names])
        self.first_unit = torch.where(bad & (self.first_unit < 0), unit_id, self.first_unit)

    def check(self, context: DistContext) -> None:
        """Raise NonFiniteGradientError on every rank if any rank saw a non-finite gradient (collective)."""
        per_rank = context.gather(self.first_unit, "non-finite gradient check").tolist()
        sightings = [(unit, rank, self.names[group]) for rank, units in enumerate(per_rank)
                     for group, unit in enumerate(units) if unit >= 0]
        if not sightings:
            return
        unit, rank, _ = min(sightings)
        groups = sorted({name for first, where, name in sightings if (first, where) == (unit, rank)})
        raise NonFiniteGradientError(
            f"non-finite gradient (NaN or Inf) in parameter group(s) {groups} on rank {rank} at step {unit}: "
            "training stops before it spreads into a checkpoint (the last one written is intact)"
        )
