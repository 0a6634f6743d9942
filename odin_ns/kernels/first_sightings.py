"""First-sighting records on the device: per watched item, the first unit it was seen in (``NEVER``: not yet).

Units are numbered in the order they run, so the first sighting is the minimum unit: the record is lowered, never
raised, which a Triton kernel can do with an atomic minimum and torch with one clamp under a mask. The kernels that
fold a check into such a record (``finite``, ``guard``) and ``odin_ns.sync.sightings.FirstSightings`` keep it by
this one rule.
"""

from __future__ import annotations

import torch

NEVER = torch.iinfo(torch.int64).max
"""The record of an item never seen."""


def lower_first_sightings(first_unit: torch.Tensor, seen: torch.Tensor, unit_id: int | torch.Tensor) -> torch.Tensor:
    """``first_unit`` (int64 [items]) with ``unit_id`` recorded for the items of bool ``seen`` [items] (a new
    tensor)."""
    return torch.where(seen, first_unit.clamp(max=unit_id), first_unit)
