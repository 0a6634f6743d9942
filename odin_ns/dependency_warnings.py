"""Warnings that dependencies raise while odin-splatfacto trains and that its user cannot act on, filtered where they
are raised.

Each filter names the warning's category, the start of its message and the module the warning is attributed to: the
same warning raised from another module, and every other warning, still shows. The filters are installed by the
first odin_ns module that ns-train imports, the dataparser (nerfstudio discovers dataparsers before it imports its
models, which raise the first of these warnings).
"""

from __future__ import annotations

import warnings

DEPENDENCY_WARNINGS = (
    # nerfstudio 1.1.5 decorates its activations and builds its (disabled) gradient scaler with torch.cuda.amp's
    # deprecated spellings
    (FutureWarning, r"`torch\.cuda\.amp\.custom_(fwd|bwd)\(args\.\.\.\)` is deprecated", r"nerfstudio\."),
    (FutureWarning, r"`torch\.cuda\.amp\.GradScaler\(args\.\.\.\)` is deprecated", r"nerfstudio\.engine\.trainer"),
    # the runtime steps the optimizers inside the unit, not through the instance method the scheduler watches; the
    # schedulers do step after them
    (UserWarning, r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`",
     r"nerfstudio\.engine\.optimizers"),
    # nerfstudio's tensorboard writer converts each logged scalar with float(), graph or not
    (UserWarning, r"Converting a tensor with requires_grad=True to a scalar", r"nerfstudio\.utils\.writer"),
)
"""(category, message pattern, module pattern) of each filtered warning; patterns match from the start."""


def filter_dependency_warnings() -> None:
    """Ignore the warnings of ``DEPENDENCY_WARNINGS`` (installing them again leaves one filter each)."""
    for category, message, module in DEPENDENCY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
