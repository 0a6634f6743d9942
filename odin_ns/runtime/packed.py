"""Packed Gaussian state: the row-aligned parameters, a unit's gradients and the Adam moments, each one [N, C] table.

Every parameter group (means, scales, quats, ...) is a column range of one table, and the tensors the model,
gsplat's densification and the optimizers see are views of it. What that buys, per unit:

* the exchange all-reduces contiguous row ranges of the one gradient table in place: nothing is packed before the
  collective or unpacked after it;
* publication is one fused Adam launch over every column, each column group at its own learning rate and eps;
* the NaN/Inf watch is one reduction over the table.

A unit's gradients are packed into a fresh table after its backward, in one launch (``pack_columns``): autograd hands each
shadow view the gradient its backward produced (stolen, not copied, where the layout allows), so nothing zeroes a
table first or accumulates into its strided column views (an uncoalesced read-modify-write per parameter group).
gsplat's densification operations replace the parameters with new tensors; the runtime packs them again at the
structural barrier (``OdinRuntime.rebind``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

import torch

from odin_ns.kernels import pack_columns
from odin_ns.runtime.optimizer import RowOptimizer

MOMENTS = ("exp_avg", "exp_avg_sq")


@dataclass(frozen=True)
class ColumnLayout:
    """Where each named [N, ...] tensor lives in a packed [N, width] table."""

    row_shapes: dict[str, tuple[int, ...]]
    spans: dict[str, tuple[int, int]]
    width: int

    @classmethod
    def of(cls, tensors: Mapping[str, torch.Tensor]) -> ColumnLayout:
        """Side by side, in the mapping's order."""
        spans, column = {}, 0
        for name, tensor in tensors.items():
            size = math.prod(tensor.shape[1:])
            spans[name] = (column, column + size)
            column += size
        return cls({name: tuple(t.shape[1:]) for name, t in tensors.items()}, spans, column)

    def views(self, table: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each name's [N, ...] view of ``table`` (shares its memory)."""
        rows = table.shape[0]
        return {name: table[:, lo:hi].view(rows, *self.row_shapes[name]) for name, (lo, hi) in self.spans.items()}

    def group_of_column(self) -> list[int]:
        """The index (in ``spans`` order) of the name owning each column."""
        return [index for index, (lo, hi) in enumerate(self.spans.values()) for _ in range(lo, hi)]


@dataclass
class PackedGaussians:
    """The packed tables of the bound parameters and of their Adam moments."""

    layout: ColumnLayout
    params: torch.Tensor
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor

    def gradient_table(self, gradients: Mapping[str, torch.Tensor | None]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One unit's ``gradients`` (each name's [N, ...] gradient, None where its backward produced none: zeros)
        copied into a fresh table, and the table's per-name views."""
        rows = self.params.shape[0]
        columns = []
        for name, (lo, hi) in self.layout.spans.items():
            gradient = gradients.get(name)
            if gradient is not None and gradient.shape != (rows, *self.layout.row_shapes[name]):
                raise ValueError(f"the gradient of '{name}' is {tuple(gradient.shape)}, its parameter "
                                 f"{(rows, *self.layout.row_shapes[name])}")
            columns.append(self.params.new_zeros(rows, hi - lo) if gradient is None else gradient)
        table = pack_columns(columns)
        return table, self.layout.views(table)


@torch.no_grad()
def pack_gaussians(params: MutableMapping[str, torch.Tensor], optimizers: Mapping[str, RowOptimizer]) -> PackedGaussians:
    """Copy ``params`` and their optimizers' moments into packed tables and rebind both to views of them, in place:
    each entry of ``params`` becomes a view of the parameter table (an ``nn.Parameter`` where it was one), and each
    optimizer steps it with moments that are views of the moment tables (zeros where it had not stepped yet)."""
    first = next(iter(params.values()))
    layout = ColumnLayout.of(params)
    tables = {key: torch.empty(first.shape[0], layout.width, dtype=first.dtype, device=first.device)
              for key in ("params", *MOMENTS)}
    views = {key: layout.views(table) for key, table in tables.items()}
    for name, old in params.items():
        views["params"][name].copy_(old)
        optimizer = optimizers[name]
        state = optimizer.state.pop(old, {})
        for key in MOMENTS:
            views[key][name].copy_(state[key]) if key in state else views[key][name].zero_()
            state[key] = views[key][name]
        state.setdefault("step", torch.tensor(0.0, dtype=torch.float32))
        new = views["params"][name]
        if isinstance(old, torch.nn.Parameter):
            new = torch.nn.Parameter(new, requires_grad=old.requires_grad)
        for group in optimizer.param_groups:
            group["params"] = [new if p is old else p for p in group["params"]]
        optimizer.state[new] = state
        params[name] = new
    return PackedGaussians(layout, tables["params"], tables["exp_avg"], tables["exp_avg_sq"])
