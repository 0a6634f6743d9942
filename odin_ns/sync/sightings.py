"""First sightings kept on the device: per watched item, the first unit in which this rank saw it happen.

What a watch on every unit needs (a NaN in a gradient, a row outside its predicted scope) without a host read per
unit: the flag is folded into a device tensor, and the ranks' records are gathered and read only where all ranks
meet (logging steps, barriers), where every rank then sees the same earliest sighting.
"""

from __future__ import annotations

import torch

from odin_ns.comm.context import DistContext
from odin_ns.kernels.first_sightings import NEVER, lower_first_sightings


class FirstSightings:
    """int64 [items] on the device: the first unit each item was seen in on this rank (``NEVER``: not yet).

    The record is lowered by ``odin_ns.kernels.first_sightings``'s rule, here and by the kernels that fold a check into
    ``first_unit`` (``odin_ns.kernels.record_nonfinite_columns``, ``record_rows_outside_buckets``)."""

    def __init__(self, items: int, device: torch.device):
        self.first_unit = torch.full((items,), NEVER, dtype=torch.int64, device=device)

    def observe(self, unit_id: int, seen: torch.Tensor) -> None:
        """Record unit ``unit_id`` for the items of bool ``seen`` [items] (device work only)."""
        self.first_unit = lower_first_sightings(self.first_unit, seen, unit_id)

    def earliest(self, context: DistContext, what: str) -> list[tuple[int, int, int]]:
        """(unit, rank, item) of the earliest unit any rank saw something in, one entry per item that rank saw then,
        identical on every rank; empty if nothing was seen (collective)."""
        per_rank = context.gather(self.first_unit, what).tolist()
        sightings = sorted((unit, rank, item) for rank, units in enumerate(per_rank)
                           for item, unit in enumerate(units) if unit != NEVER)
        return [sighting for sighting in sightings if sighting[:2] == sightings[0][:2]]
