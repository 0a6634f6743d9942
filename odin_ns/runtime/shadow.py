"""Shadow Graph: every unit computes on private leaf views of the shared Gaussians.

A view ``p.detach().requires_grad_(True)`` shares ``p``'s storage (no copy: the unit reads the live parameters) but is
a new autograd leaf, so the unit's backward leaves its gradient in the view's own ``.grad``. Each unit's gradient
staging is therefore private: unit t's exchange and publication never see a half-written gradient of unit t+1, and unit t+1's
backward never writes where unit t's collectives read.

Aliasing hazard of this design: ``detach()`` also shares ``p``'s autograd version counter. Publishing in place into
``p`` while a graph that saved a view is alive would make that graph's backward raise "modified by an inplace
operation". The runtime therefore publishes only outside a unit's graph lifetime: before its forward (buckets holding
rows it reads) or after its backward (the rest). See docs/design.md.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


def shadow_views(params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Private leaf views of ``params`` (same storage, no ``.grad``) for one unit's forward and backward."""
    return {name: param.detach().requires_grad_(True) for name, param in params.items()}


def staged_gradients(views: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
    """The unit's private gradients, read from its views (None where its backward reached no view)."""
    return {name: view.grad for name, view in views.items()}
