"""Counting the operators whose result the host must read from the device, with where they were called from.

On a GPU every such read (``.item()``, ``.tolist()``, ``bool(tensor)``, ``nonzero`` and boolean-mask indexing, whose
output size the host must learn) stalls the host until the GPU queue drains; on the CPU a dispatch hook sees them.
"""

from __future__ import annotations

import traceback
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

HOST_READS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique2",
              "aten::unique_dim", "aten::equal", "aten::is_nonzero", "aten::unique_consecutive"}
"""Operators whose result the host must read from the device (``item``/``tolist``/``bool`` dispatch
``_local_scalar_dense``)."""


class HostReadCounter(TorchDispatchMode):
    """Counts host-reading operators, with where they were called from."""

    def __init__(self, excluded_scalars: set[int]):
        super().__init__()
        self.excluded_scalars = excluded_scalars
        self.paused = False
        self.reads: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        boolean_index = name == "aten::index" and any(
            isinstance(index, torch.Tensor) and index.dtype == torch.bool for index in (args[1] or ())
        )
        excluded = name == "aten::_local_scalar_dense" and args[0].data_ptr() in self.excluded_scalars
        if not self.paused and (name in HOST_READS or boolean_index) and not excluded:
            frames = [f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} {frame.name}"
                      for frame in traceback.extract_stack()[:-1] if "torch/" not in frame.filename]
            self.reads[(name, " <- ".join(reversed(frames[-3:])))] += 1
        return func(*args, **(kwargs or {}))
