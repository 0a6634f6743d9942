"""The runtime's one configuration: how a unit's gradients are exchanged and published across ranks.

``RuntimeConfig`` follows nerfstudio's ``InstantiateConfig`` protocol (a ``_target`` and ``setup(**kwargs)`` that
builds it) without importing nerfstudio, so the runtime stays usable with plain torch; the pipeline config nests it
as ``--pipeline.odin.*``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Type, get_args

import torch

from odin_ns.comm.collectives import RowBuckets
from odin_ns.sync.gate import DelayLimits

MIN_BUCKETS = 8
"""An exchange is cut into at least this many buckets where the rows allow: a unit that conflicts with the exchange
in flight waits for, and publishes, only the buckets holding rows it reads, not the whole exchange. Every mode cuts
the same buckets, so all reduce in the same order and quality-first equals sync for any world size."""
MIN_BUCKET_MB = 4.0
"""No bucket is cut smaller than this (or than ``bucket_mb``, if smaller) to reach ``MIN_BUCKETS``: a collective
costs its launch and latency whatever its size, and a host-bound step pays for every launch, while waiting for part
of an exchange saves only that part's transfer time, for a few MB over NVLink microseconds (docs/results.md)."""

Mode = Literal["sync", "quality-first", "throughput-first"]
MODES: tuple[str, ...] = get_args(Mode)
OVERLAPPED_MODES = ("quality-first", "throughput-first")
"""Modes whose unit t+1 computes while unit t's exchange is in flight."""
Exchange = Literal["dense", "scoped", "auto"]
AdamRows = Literal["dense", "selective"]
ReadScopes = Literal["measured", "predicted"]


def _runtime_class() -> Type:
    from odin_ns.runtime.executor import OdinRuntime

    return OdinRuntime


@dataclass
class RuntimeConfig:
    """How the Gaussians' gradients are exchanged and published across ranks."""

    _target: Type = field(default_factory=_runtime_class)
    mode: Mode = "quality-first"
    """sync: all-reduce then step every unit; quality-first: overlap a unit's exchange with the next unit when their
    Gaussian scopes do not conflict (same parameters as sync); throughput-first: also admit bounded delayed reads."""
    delay: DelayLimits = field(default_factory=DelayLimits)
    """throughput-first: what a delayed read may skip."""
    exchange: Exchange = "dense"
    """dense: all-reduce every row; scoped: only the rows some rank updated; auto: scoped when the update scope is
    below ``scoped_below`` of the rows. The scoped exchange needs the update scope's size on the host before it can
    launch, a read that stalls the GPU queue: it pays only where links are slow relative to the host
    (docs/results.md)."""
    scoped_below: float = 0.25
    """exchange auto: the largest |update scope| / N for which the scoped exchange is used."""
    bucket_mb: float = 25.0
    """Largest all-reduced bucket of packed gradient rows, one collective each. The exchange is also cut into at
    least ``MIN_BUCKETS`` buckets where that leaves none below min(``MIN_BUCKET_MB``, ``bucket_mb``), so a value
    below 4 MB sets the bucket size itself: more, smaller buckets let a conflicting unit wait for less of an
    exchange, at a launch each."""
    adam: AdamRows = "dense"
    """dense: Adam steps every Gaussian at every step, as stock splatfacto's, in every mode and on any number of
    ranks (the rows no view of a unit saw take their zero-gradient step without waiting for the exchange);
    selective: only the Gaussians some view of the step saw, which skips that work but freezes the moments of rows
    a step did not see: faster, lower quality where Gaussians are seen rarely (docs/results.md)."""
    captured_units: bool = True
    """sync mode on CUDA, one view per rank: replay each unit's forward, loss, backward and gradient packing from a
    CUDA graph while its shapes repeat (recaptured after densification, pruning, opacity resets and resolution or
    SH-degree changes), so the host no longer launches them one by one (``odin_ns.runtime.capture``); on one rank the
    graph also holds the unit's Adam step, finite watch and densification statistics (one launch per step); the overlapped
    modes, the CPU, units of several views (whose launches hide behind their GPU work) and units that cannot be
    captured run eagerly, said once in the log. With gsplat it sizes the tile intersections ahead
    (``--pipeline.model.presized-intersections``)."""
    timeout_s: float = 600.0
    """A rank waiting longer than this on a collective (a peer died or hung) exits with an error naming it."""
    read_scopes: ReadScopes = "measured"
    """quality-first: how the next unit's read scope is known. measured: projected, all-gathered with the update
    scope and counted on the host per window; predicted: from per-bucket geometric bounds and the plan, on every rank
    with no collective and no host wait, unit t+1 waiting only for the buckets that both units' predicted scopes
    touch; a device-side guard checks every unit's rows against the prediction (``odin_ns.sync.predicted``). Needs
    the dense exchange."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.adam not in get_args(AdamRows):
            raise ValueError(f"adam must be one of {get_args(AdamRows)}, got {self.adam!r}")
        if self.exchange not in get_args(Exchange):
            raise ValueError(f"exchange must be one of {get_args(Exchange)}, got {self.exchange!r}")
        if not 0.0 <= self.scoped_below <= 1.0:
            raise ValueError(f"scoped_below must be within [0, 1], got {self.scoped_below}")
        if self.bucket_mb <= 0:
            raise ValueError(f"bucket_mb must be positive, got {self.bucket_mb}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")
        if self.read_scopes not in get_args(ReadScopes):
            raise ValueError(f"read_scopes must be one of {get_args(ReadScopes)}, got {self.read_scopes!r}")
        if self.read_scopes == "predicted" and (self.mode != "quality-first" or self.exchange != "dense"):
            raise ValueError(
                f"read_scopes 'predicted' runs quality-first with the dense exchange, got {self.mode} with {self.exchange}"
            )

    @property
    def overlapped(self) -> bool:
        return self.mode in OVERLAPPED_MODES

    @property
    def bucket_bytes(self) -> int:
        return int(self.bucket_mb * 2**20)

    def buckets_for(self, tensors: Sequence[torch.Tensor]) -> RowBuckets:
        """The row buckets every mode cuts the exchange of ``tensors`` (row-aligned) into."""
        floor = int(min(MIN_BUCKET_MB, self.bucket_mb) * 2**20)
        return RowBuckets.for_tensors(tensors, self.bucket_bytes, MIN_BUCKETS, floor)

    def setup(self, **kwargs: Any) -> Any:
        """Build the runtime (nerfstudio's ``InstantiateConfig.setup``)."""
        return self._target(self, **kwargs)
