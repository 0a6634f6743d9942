"""Throughput-first admission: delayed reads whose skipped update is bounded before it is known.

A *delayed read* lets unit t+1 run on rows of unit t's update scope whose averaged gradient is still on the wire:
it reads p instead of p + Δ, where Δ is the Adam step unit t's publication will take. The paper admits one when the
producer's *local* gradient is small, which says nothing about Δ: Adam normalises the gradient (a fresh row moves by
about lr whatever the gradient's size), momentum moves a row with no gradient at all, and the other ranks' gradients
enter the average. This gate bounds Δ itself, from what every rank knows before the gradient buckets arrive:

* the Adam moments and step count before the step (identical on every replica),
* the learning rate the unit ran under,
* ``G``, the largest |local gradient| over every rank for each 32-row block, gathered with the scope bitmaps that the
  overlap decision waits for anyway (the average of the ranks' gradients is no larger than their maximum),

and translates it into the reader's terms: screen-space displacement of a delayed Gaussian's centre in the reader's
cameras and change of its opacity. docs/throughput_first.md derives every bound and says what the gate guarantees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from odin_ns.kernels import BITS_PER_WORD, num_words
from odin_ns.sync.hazards import AdmissionPolicy, DelayBound, WindowHazards


@dataclass(frozen=True)
class DelayLimits:
    """What a delayed read may skip: the admission thresholds of throughput-first."""

    tau: float = 0.2
    """Largest fraction of any rank's read scope that it may read stale (0: never delay)."""
    max_pixels: float = 0.5
    """Largest displacement, in pixels of any reader camera, of a delayed Gaussian's centre."""
    max_opacity: float = 0.01
    """Largest change of a delayed Gaussian's opacity (sigmoid of its logit)."""
    max_param_step: float = 0.05
    """Largest change of any other delayed parameter element, in its own units (log-scale, SH coefficient, quaternion
    component): the parameters whose effect on the image is not translated."""
    position: str = "means"
    """Name of the row-aligned tensor holding the Gaussians' 3D centres (world units)."""
    opacity_logit: str = "opacities"
    """Name of the tensor holding the Gaussians' opacity logits."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.tau <= 1.0:
            raise ValueError(f"tau must be within [0, 1], got {self.tau}")
        for name in ("max_pixels", "max_opacity", "max_param_step"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    def admit(self, bound: DelayBound) -> bool:
        """Whether a skipped update of this size is admissible (a NaN bound never is)."""
        return (
            bound.pixels <= self.max_pixels
            and bound.opacity <= self.max_opacity
            and bound.param_step <= self.max_param_step
        )


class ReaderSensitivity(NamedTuple):
    """How strongly the reader's cameras see each row move: per row, over the reader's cameras (0 for rows it does
    not read)."""

    pixels_per_unit: torch.Tensor
    """float [N]: max over cameras of f * sqrt(1 + x² + y²) / z, pixels per world unit of centre displacement
    (first order), with (x, y) the normalised image coordinates and z the depth."""
    inverse_depth: torch.Tensor
    """float [N]: max over cameras of 1 / z, for the finite-step correction 1 / (1 - |Δ| / z)."""


@dataclass(frozen=True)
class AdamRows:
    """The Adam state a step bound needs for one parameter tensor, as it stands before the pending step."""

    param: torch.Tensor
    exp_avg: torch.Tensor | None
    """None before the optimizer's first step (moments are zero)."""
    exp_avg_sq: torch.Tensor | None
    lr: float
    beta1: float
    beta2: float
    step: int
    """The step count the pending publication uses for bias correction (1-based)."""


def pinhole_sensitivity(means: torch.Tensor, viewmats: torch.Tensor, Ks: torch.Tensor) -> ReaderSensitivity:
    """``ReaderSensitivity`` of Gaussians ``means`` [N, 3] in pinhole cameras (world-to-camera ``viewmats`` [C, 4, 4]
    with orthonormal rotations, intrinsics ``Ks`` [C, 3, 3], +z forward); rows behind a camera get 0 for it."""
    if means.dim() != 2 or means.shape[1] != 3 or viewmats.shape[-2:] != (4, 4) or Ks.shape[-2:] != (3, 3):
        raise ValueError(
            f"need means [N, 3], viewmats [C, 4, 4] and Ks [C, 3, 3], got {tuple(means.shape)}, "
            f"{tuple(viewmats.shape)}, {tuple(Ks.shape)}"
        )
    camera_points = torch.einsum("cij,nj->cni", viewmats[:, :3, :3], means) + viewmats[:, None, :3, 3]
    depth = camera_points[..., 2]
    in_front = depth > 0
    inverse_depth = torch.where(in_front, 1.0 / depth, torch.zeros_like(depth))
    normalised = camera_points[..., :2] * inverse_depth[..., None]
    focal = torch.maximum(Ks[:, 0, 0], Ks[:, 1, 1])[:, None]
    pixels_per_unit = focal * torch.sqrt(1.0 + normalised.square().sum(-1)) * inverse_depth
    return ReaderSensitivity(pixels_per_unit.amax(0), inverse_depth.amax(0))


def adam_step_bound(rows: AdamRows, grad_bound: torch.Tensor) -> torch.Tensor:
    """Per element of ``rows.param``: the largest |Δp| of the pending Adam step over every gradient g with
    |g| <= ``grad_bound`` (broadcastable; ``inf`` for no knowledge of g).

    |Δp| <= lr sqrt(1-β2^t) / (1-β1^t) * r(g), r(g) = (a + c g) / sqrt(d + e g²) with a = β1 |m|, c = 1-β1,
    d = β2 v, e = 1-β2, g signed along m (ε dropped: it only shrinks the step). r rises on [0, g*], g* = c d / (a e),
    and falls after, and r(-g) <= r(g), so the supremum over |g| <= G is r(min(G, g*)); with G = ∞ it is
    sqrt(a²/d + c²/e). An element with m != 0 and v = 0 gets ∞. docs/throughput_first.md, section 3.1.
    """
    zeros = torch.zeros_like(rows.param)
    a = rows.beta1 * (rows.exp_avg if rows.exp_avg is not None else zeros).abs()
    d = rows.beta2 * (rows.exp_avg_sq if rows.exp_avg_sq is not None else zeros)
    c, e = 1.0 - rows.beta1, 1.0 - rows.beta2
    worst_gradient = torch.where(a > 0, c * d / (a * e), torch.full_like(a, torch.inf))
    g = torch.minimum(grad_bound.expand_as(a), worst_gradient)
    numerator = a + c * g
    ratio = torch.where(numerator == 0, zeros, numerator / torch.sqrt(d + e * g.square()))
    ratio = torch.where(g.isinf(), torch.full_like(a, c / e**0.5), ratio)  # m = 0, unbounded g: the limit c/sqrt(e)
    bias = (1.0 - rows.beta2**rows.step) ** 0.5 / (1.0 - rows.beta1**rows.step)
    return rows.lr * bias * ratio


def displacement_pixels(step_norm: torch.Tensor, sensitivity: ReaderSensitivity) -> torch.Tensor:
    """Largest screen displacement (pixels) of centres moving by at most ``step_norm`` [N] (world units): the exact
    pinhole bound s * |Δ| / (1 - |Δ| / z); ∞ where the step could reach the camera plane."""
    reach = step_norm * sensitivity.inverse_depth
    pixels = sensitivity.pixels_per_unit * step_norm / (1.0 - reach)
    return torch.where(reach < 1.0, pixels, torch.full_like(pixels, torch.inf))


def opacity_change(logits: torch.Tensor, logit_step: torch.Tensor) -> torch.Tensor:
    """Largest |sigmoid(x + Δ) - sigmoid(x)| over |Δ| <= ``logit_step``: sigmoid is monotone, so an end point (at
    most ``logit_step`` / 4, the sigmoid's largest slope)."""
    current = torch.sigmoid(logits)
    return torch.maximum(torch.sigmoid(logits + logit_step) - current, current - torch.sigmoid(logits - logit_step))


def block_maxima(values: torch.Tensor) -> torch.Tensor:
    """float32 [words]: max of ``values`` [N, ...] over each 32-row block (a bitmap word)."""
    per_row = values.reshape(values.shape[0], -1).amax(1) if values.dim() > 1 else values
    padded = per_row.new_zeros(num_words(values.shape[0]) * BITS_PER_WORD)
    padded[: values.shape[0]] = per_row
    return padded.view(-1, BITS_PER_WORD).amax(1).float()


def local_maxima(
    gradients: Sequence[torch.Tensor], sensitivity: ReaderSensitivity, read: torch.Tensor
) -> torch.Tensor:
    """float32 [len(gradients) + 2, words]: this rank's share of the delay bound's inputs, per 32-row block: the
    largest |gradient| of each tensor of unit t, then the largest sensitivity and inverse depth over the rows of
    unit t+1's views (bool ``read`` [N]). Gathered with the scope bitmaps and reduced by ``gathered_maxima``.

    Blocks, not rows, keep the payload at a few bytes per 32 Gaussians (a per-row maximum would cost a tenth of
    the gradient exchange itself)."""
    zero = torch.zeros((), device=read.device)
    reader = [torch.where(read, values, zero) for values in sensitivity]
    return torch.stack([*(block_maxima(gradient.abs()) for gradient in gradients), *map(block_maxima, reader)])


def gathered_maxima(
    gathered: torch.Tensor, names: Sequence[str], num_rows: int
) -> tuple[dict[str, torch.Tensor], ReaderSensitivity]:
    """From every rank's ``local_maxima`` [world_size, len(names) + 2, words]: per row, a bound on |averaged gradient|
    for each tensor (the mean of the ranks' gradients is no larger than their largest) and the reader sensitivity
    of all ranks' views."""
    rows = [maximum.repeat_interleave(BITS_PER_WORD)[:num_rows] for maximum in gathered.amax(0)]
    return dict(zip(names, rows)), ReaderSensitivity(*rows[len(names) :])


def row_bounds(
    adam: Mapping[str, AdamRows],
    grad_bounds: Mapping[str, torch.Tensor],
    sensitivity: ReaderSensitivity,
    limits: DelayLimits,
) -> torch.Tensor:
    """float [3, N]: per row, the bound on (pixels, opacity, param_step) of the pending step (see ``DelayBound``).

    ``grad_bounds[name]`` [N] bounds |averaged gradient| of every element of the row.
    """
    first = next(iter(adam.values())).param
    num_rows = first.shape[0]
    pixels = opacity = param_step = first.new_zeros(num_rows)
    for name, rows in adam.items():
        step = adam_step_bound(rows, grad_bounds[name].view(-1, *[1] * (rows.param.dim() - 1)))
        step = step.reshape(num_rows, -1)
        if name == limits.position:
            pixels = displacement_pixels(step.norm(dim=1), sensitivity)
        elif name == limits.opacity_logit:
            opacity = opacity_change(rows.param.reshape(num_rows, -1), step).amax(1)
        else:
            param_step = torch.maximum(param_step, step.amax(1))
    return torch.stack([pixels, opacity, param_step])


def bucket_maxima(bounds: torch.Tensor, candidates: torch.Tensor, rows_per_bucket: int) -> torch.Tensor:
    """[3, buckets]: max of ``bounds`` [3, N] over the ``candidates`` rows (bool [N]) of each row bucket (0 where
    none; NaN propagates, so a bucket with a NaN bound is never admitted)."""
    num_rows = bounds.shape[1]
    num_buckets = -(-num_rows // rows_per_bucket)
    padded = bounds.new_zeros(3, num_buckets * rows_per_bucket)
    padded[:, :num_rows] = torch.where(candidates, bounds, torch.zeros_like(bounds))
    return padded.view(3, num_buckets, rows_per_bucket).amax(2)


class ThroughputFirstPolicy(AdmissionPolicy):
    """Delay the conflicting buckets, from the last one down, while each one's skipped-update bound is within the
    limits and every reading rank reads at most ``tau`` of its own read scope stale; publish the rest first.

    From the last bucket down because buckets arrive in row order: a unit waiting for bucket k waits for every
    bucket before it as well, so only delaying the highest conflicting buckets shortens the wait. The first bucket
    that cannot be delayed stops the search (delaying one below it would add staleness and save no time).
    """

    name = "throughput-first"
    needs_delay_bounds = True

    def __init__(self, limits: DelayLimits):
        self.limits = limits

    def buckets_to_publish_first(self, hazards: WindowHazards) -> list[int]:
        delayed = set(self.delayed_buckets(hazards))
        return [bucket for bucket, rows in enumerate(hazards.conflict_rows) if rows and bucket not in delayed]

    def delayed_buckets(self, hazards: WindowHazards) -> list[int]:
        """Conflicting buckets whose rows unit t+1 may read stale, in descending order."""
        if not hazards.raw:
            return []
        if hazards.delay_bounds is None:
            raise ValueError("throughput-first admission needs the window's delay bounds (hazards.delay_bounds)")
        delayed: list[int] = []
        for bucket in reversed(range(len(hazards.conflict_rows))):
            if not hazards.conflict_rows[bucket]:
                continue
            within_tau = hazards.delayed_share([*delayed, bucket]) <= self.limits.tau
            if not within_tau or not self.limits.admit(hazards.delay_bounds[bucket]):
                break
            delayed.append(bucket)
        return delayed
