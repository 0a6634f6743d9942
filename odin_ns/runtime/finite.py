"""NaN/Inf in a unit's gradients, caught where it starts and reported before it reaches a checkpoint.

A non-finite gradient on one rank spreads to every replica through the exchange, and a later barrier would only see
ranks holding the same NaNs. So each rank watches its own local gradients as units are staged, on the device (the
first unit each parameter group went non-finite, no host read), and the runtime compares the ranks' records at
logging steps and at every drain: every rank then raises the same error, naming the step, the rank and the groups
where it began, before the drain's checkpoint is written.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from odin_ns.comm.context import DistContext
from odin_ns.sync.sightings import FirstSightings


class NonFiniteGradientError(RuntimeError):
    """A unit's gradients held NaN or Inf."""


class FiniteWatch:
    """Per parameter group, the first unit whose gradient on this rank held NaN or Inf."""

    def __init__(self, names: Sequence[str], group_of_column: torch.Tensor):
        self.names = list(names)
        self.group_of_column = group_of_column
        """int64 [columns]: the group owning each column of a packed gradient table."""
        self._sightings = FirstSightings(len(self.names), group_of_column.device)

    def observe(self, unit_id: int, gradient_table: torch.Tensor) -> None:
        """Record the groups of ``gradient_table`` [N, columns] that hold a non-finite value (device work only)."""
        bad_columns = (~torch.isfinite(gradient_table)).any(dim=0).to(torch.int64)
        bad = torch.zeros(len(self.names), dtype=torch.int64, device=bad_columns.device)
        self._sightings.observe(unit_id, bad.index_add_(0, self.group_of_column, bad_columns) > 0)

    def check(self, context: DistContext) -> None:
        """Raise NonFiniteGradientError on every rank if any rank saw a non-finite gradient (collective)."""
        sightings = self._sightings.earliest(context, "non-finite gradient check")
        if not sightings:
            return
        unit, rank, _ = sightings[0]
        groups = sorted(self.names[group] for _, _, group in sightings)
        raise NonFiniteGradientError(
            f"non-finite gradient (NaN or Inf) in parameter group(s) {groups} on rank {rank} at step {unit}: "
            "training stops before it spreads into a checkpoint (the last one written is intact)"
        )
