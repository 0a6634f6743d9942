"""NaN/Inf in a unit's gradients, caught where it starts and reported before it reaches a checkpoint.

A non-finite gradient on one rank spreads to every replica through the exchange, and a later barrier would only see
ranks holding the same NaNs. So each rank watches its own local gradients as units are staged, on the device (the
first unit each column of the gradient table went non-finite, no host read), and the runtime compares the ranks'
records at logging steps and at every drain: every rank then raises the same error, naming the step, the rank and
the parameter groups where it began, before the drain's checkpoint is written.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from odin_ns.comm.context import DistContext
from odin_ns.kernels import record_nonfinite_columns
from odin_ns.sync.sightings import FirstSightings


class NonFiniteGradientError(RuntimeError):
    """A unit's gradients held NaN or Inf."""


class FiniteWatch:
    """Per column of the packed gradient table, the first unit whose gradient on this rank held NaN or Inf there."""

    def __init__(self, names: Sequence[str], group_of_column: Sequence[int], device: torch.device):
        self.names = list(names)
        self.group_of_column = list(group_of_column)
        """The index in ``names`` of the group owning each column of a packed gradient table."""
        self._sightings = FirstSightings(len(self.group_of_column), device)

    def observe(self, unit_id: int | torch.Tensor, gradient_table: torch.Tensor) -> None:
        """Record the columns of ``gradient_table`` [N, columns] that hold a non-finite value (device work only:
        one launch on Triton, a pass and a few small launches in torch; the watch runs on every unit, so its
        launches and its read of the table count). ``unit_id`` may be on the device (a captured unit's); the record
        is written in place."""
        first_unit = self._sightings.first_unit
        recorded = record_nonfinite_columns(gradient_table, first_unit, unit_id)
        if recorded is not first_unit:
            first_unit.copy_(recorded)

    def state(self) -> list[torch.Tensor]:
        """The tensors ``observe`` writes."""
        return [self._sightings.first_unit]

    def check(self, context: DistContext) -> None:
        """Raise NonFiniteGradientError on every rank if any rank saw a non-finite gradient (collective)."""
        sightings = self._sightings.earliest(context, "non-finite gradient check")
        if not sightings:
            return
        unit, rank, _ = sightings[0]
        groups = sorted({self.names[self.group_of_column[column]] for _, _, column in sightings})
        raise NonFiniteGradientError(
            f"non-finite gradient (NaN or Inf) in parameter group(s) {groups} on rank {rank} at step {unit}: "
            "training stops before it spreads into a checkpoint (the last one written is intact)"
        )
