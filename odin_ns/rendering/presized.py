"""Tile intersections sized ahead: gsplat's ``rasterization`` without the host read in its forward.

gsplat sizes its (Gaussian, tile) intersection buffers by reading their count on the host (``isect_tiles``: a
cumulative sum, then ``.item()``). That read waits for everything queued on the stream before it, so in a training
step it ties the host to the GPU once per forward, and under data parallelism to the previous unit's exchange and
through it to the slowest peer: the host cannot run ahead, and the exchange shows as host-blocked time
(docs/results.md, "Where the step goes").

Here the buffers have a capacity chosen on the host from the counts the same views produced when they were last
rendered (``IntersectionBudget``; a render's count is the sum of its cameras', so views rendered together in other
combinations before still size it), read a few renders later behind an event that has long completed. The
intersections are built on the device for the tile grid extended by one row: the slots past the true count hold
padding keyed to that extra row's last tile, which the sort leaves at the end and the tile mask skips in both
kernels, so the real pairs, their order and the rendered image are gsplat's own. A render whose count exceeded its
capacity (the views' Gaussians grew their footprint faster than the headroom) has lost the pairs past it; the budget
sees that when it reads the count, warns and doubles its headroom. Views without a count yet (first renders, a new
resolution or Gaussian count) are sized exactly, with gsplat's read.

A captured training step (``odin_ns.runtime.capture``) replays one set of buffers for every view: there the
capacity is shared, sized from the largest counts the training views had at the render's resolution
(``IntersectionBudget.shared_capacity``), and the counts are observed after the step (``render_shared``).

``PresizedIntersections`` installs the three functions gsplat's ``rasterization`` calls for this (tile intersection,
offset encoding, rasterization to pixels) so that a render inside ``render(keys)`` on the installing thread takes this
path and every other call, such as the viewer's renders from its own thread, takes gsplat's unchanged. It also routes
the colours' spherical harmonics inside those renders to torch operations (``spherical_harmonics_on_current_stream``):
gsplat 1.4's CUDA kernels for them launch on the legacy default stream, which a CUDA graph captured on another stream
does not record (its colours would be those of the capture), while every other kernel of the render launches on the
current stream.

gsplat's ``rasterization`` also inverts the view matrices with ``torch.inverse``, whose singularity check is a host
read of the device, and the step's first: it waits for everything queued before the render. Inside a presized
render, and in every training render of the model (``unchecked_view_inverse``, whatever the sizing), that inverse is
``torch.linalg.inv_ex``'s without the check: the same values (view matrices are rigid, never singular).
"""

from __future__ import annotations

import heapq
import math
import threading
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple

import torch

from nerfstudio.utils.rich_utils import CONSOLE

from odin_ns.kernels import copy_to_host_behind_event, fill_tile_intersections, tile_intersection_counts

ROUND_TO = 1 << 16
"""Capacities are multiples of this many slots, so that a view's buffers keep their size while its count drifts
(the caching allocator then hands back the same blocks)."""

COUNT_LAG = 2
"""Renders between a render and the adoption of its count. An eager step's host is behind the GPU, so by then the
non-blocking copy has completed; a host that launches whole captured steps runs ahead of the GPU, and adopting the
count then waits for the render two units back, which bounds how far the host queues work ahead (docs/results.md,
"Where a step's time goes")."""


SH_C0 = 0.28209479177387814
"""The degree-0 spherical harmonic's constant, 1 / (2 sqrt(pi))."""


def spherical_harmonics_on_current_stream(
    degrees_to_use: int, dirs: torch.Tensor, coeffs: torch.Tensor, masks: torch.Tensor | None = None
) -> torch.Tensor:
    """gsplat's ``spherical_harmonics`` (colours [..., 3] from view directions [..., 3] and coefficients
    [..., K, 3] up to degree ``degrees_to_use``) in torch operations, which launch on the current stream: gsplat's
    reference evaluation of the bases, contracted with the coefficients in place of its fused kernel. ``masks`` is
    accepted as gsplat's: its kernel leaves the colours of masked-out entries unset, these are computed (whatever
    they are, the rasterizer reads no colour of a Gaussian it does not draw, and sends it no gradient)."""
    if degrees_to_use == 0:  # the constant basis: no direction needed
        return SH_C0 * coeffs[..., 0, :]
    from gsplat.cuda._torch_impl import _eval_sh_bases_fast

    bases = _eval_sh_bases_fast((degrees_to_use + 1) ** 2, torch.nn.functional.normalize(dirs, p=2, dim=-1))
    return torch.einsum("...k,...kc->...c", bases, coeffs[..., : bases.shape[-1], :])


def tile_key_bits(n_cameras: int, tile_width: int, tile_height: int) -> int:
    """Bits of a tile id in an intersection key over the grid extended by one padding row (what gsplat's offset
    encoding decodes with when given ``tile_height + 1`` rows)."""
    tile_bits = int(math.floor(math.log2(tile_width * (tile_height + 1)))) + 1
    camera_bits = int(math.floor(math.log2(n_cameras))) + 1
    if tile_bits + camera_bits > 32:
        raise ValueError(f"{n_cameras} cameras of {tile_width}x{tile_height} tiles do not fit gsplat's 32-bit key")
    return tile_bits


def presized_isect_tiles(
    means2d: torch.Tensor,
    radii: torch.Tensor,
    depths: torch.Tensor,
    tile_size: int,
    tile_width: int,
    tile_height: int,
    capacity: int,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """gsplat's ``isect_tiles`` (unpacked, sorted) into ``capacity`` slots, with no host read.

    Returns tiles_per_gauss [C, N] int32, the sorted keys [capacity] int64 and flat Gaussian ids [capacity] int32
    (keys over the grid extended by one row: ``tile_key_bits``; the slots past the count are padding, flat id 0), and
    each camera's count [C] int64 on the device. Ties in depth keep the Gaussians' order, as gsplat's stable radix
    sort does.

    The counts and the slots come from ``odin_ns.kernels`` (``backend``: its dispatch): on CUDA one Triton launch
    each (the counts, then the fill, which writes each Gaussian's run of slots in place, as gsplat's kernel does), both
    computing the Gaussians' tile rectangles from their centres and radii; on the CPU, or with ``backend="torch"``,
    torch, bitwise the same. gsplat's radix sort orders the pairs by (camera, tile, depth) over the key's
    ``32 + tile_bits + camera_bits`` bits; ``torch.sort`` has no bit range and would take all 64. So the depth part
    is sorted per Gaussian instead of per pair: each camera's Gaussians are sorted by depth (N keys, not one per
    pair), the slots are filled in that order, and a stable sort by (camera, tile) alone, in the narrowest integer
    that holds it, leaves each tile's pairs in depth order, ties in Gaussian order: gsplat's order. A capacity below
    the count keeps each camera's nearest Gaussians' pairs, in camera order.
    """
    n_cameras, n_gaussians = radii.shape
    tile_bits = tile_key_bits(n_cameras, tile_width, tile_height)
    # Culled Gaussians (radius 0) have no pairs; where their depth sorts them does not matter.
    by_depth = torch.sort(depths, dim=1, stable=True).indices
    depth_means = means2d.gather(1, by_depth[..., None].expand(-1, -1, 2))
    depth_radii, depth_depths = radii.gather(1, by_depth), depths.gather(1, by_depth)
    counts = tile_intersection_counts(depth_means, depth_radii, tile_size, tile_width, tile_height, backend=backend)
    ends = torch.cumsum(counts, 0)
    padding_key = ((n_cameras - 1) << (32 + tile_bits)) | ((tile_width * (tile_height + 1) - 1) << 32)
    keys, depth_ids = fill_tile_intersections(
        depth_means, depth_radii, ends, depth_depths, tile_size, tile_width, tile_height, tile_bits, padding_key,
        capacity, backend=backend,
    )
    order = torch.sort((keys >> 32).to(_narrowest_signed(padding_key >> 32)), stable=True).indices
    flat_by_depth = (by_depth + torch.arange(n_cameras, device=radii.device)[:, None] * n_gaussians).reshape(-1)
    real = torch.arange(capacity, device=radii.device) < ends[-1]
    flat_ids = torch.where(real, flat_by_depth[depth_ids[order].long()], 0).int()
    per_camera = torch.empty_like(counts).view(n_cameras, n_gaussians)
    per_camera.scatter_(1, by_depth, counts.view(n_cameras, n_gaussians))
    return per_camera.int(), keys[order], flat_ids, per_camera.sum(1)


def _narrowest_signed(largest: int) -> torch.dtype:
    """The narrowest signed integer type holding 0..``largest``: a radix sort takes as many passes as its bits."""
    for dtype in (torch.int16, torch.int32):
        if largest <= torch.iinfo(dtype).max:
            return dtype
    return torch.int64


def padded_tile_mask(n_cameras: int, tile_width: int, tile_height: int, device: torch.device) -> torch.Tensor:
    """bool [C, tile_height + 1, tile_width]: every real tile, not the padding row (both rasterization kernels
    return at once for a masked tile)."""
    mask = torch.ones((n_cameras, tile_height + 1, tile_width), dtype=torch.bool, device=device)
    mask[:, -1] = False
    return mask


class RenderKey(NamedTuple):
    """What decides a camera's intersection count in a training render: its view, the rendered size and the
    Gaussian count (a count of rows, not their values)."""

    view: int
    width: int
    height: int
    gaussians: int


@dataclass
class RenderCounts:
    """Filled by a ``render_shared`` block: each camera's intersection count [cameras] int64 on the device."""

    counts: torch.Tensor | None = None


@dataclass
class _PendingCount:
    keys: tuple[Hashable, ...]
    capacity: int
    counts: torch.Tensor
    """[cameras] int64 in pinned host memory, written behind ``ready``."""
    ready: torch.cuda.Event | None


class IntersectionBudget:
    """The capacity of each render's intersection buffers, from the counts its cameras' keys produced before.

    A render's per-camera counts reach the host by a non-blocking copy and are adopted ``lag`` renders later, whatever
    the timing, so the capacities (and with them every render) are the same from run to run."""

    def __init__(self, headroom: float = 0.25, lag: int = COUNT_LAG, max_keys: int = 8192):
        if headroom < 0 or lag < 1 or max_keys < 1:
            raise ValueError(f"headroom must be >= 0, lag and max_keys >= 1, got {headroom}, {lag}, {max_keys}")
        self.headroom = headroom
        self.lag = lag
        self.max_keys = max_keys
        """Camera counts kept, the least recently adopted dropped first: keys carry the Gaussian count, so every
        densification starts a new set and the old ones are never asked for again."""
        self.counts: OrderedDict[Hashable, int] = OrderedDict()
        self.latest: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}
        """(width, height) -> view -> (its latest count at that size, the Gaussian count then) (``RenderKey`` keys
        only): what a shared capacity is sized from."""
        self.overflows = 0
        """Renders whose count exceeded their capacity (seen when their count was adopted)."""
        self._pending: deque[_PendingCount] = deque()

    def capacity(self, keys: Sequence[Hashable]) -> int | None:
        """Slots for the next render of cameras ``keys``; None: some camera has no count yet (size it exactly)."""
        if any(key not in self.counts for key in keys):
            return None
        count = sum(self.counts[key] for key in keys)
        return max(ROUND_TO, -(-int(count * (1.0 + self.headroom)) // ROUND_TO) * ROUND_TO)

    def shared_capacity(
        self, width: int, height: int, views: int, cameras: int, gaussians: int, current: int | None
    ) -> int | None:
        """Slots for a render of any ``cameras`` of the ``views`` training views at ``width`` x ``height`` with
        ``gaussians`` Gaussians: the ``cameras`` largest latest counts, each scaled by how much the Gaussians grew
        since it was counted (a densification adds pairs before any render of the new Gaussians is counted), with the
        headroom; None while some view has no count at that size. ``current`` (the capacity in use) is kept while it
        holds the largest counts with half the headroom and is not oversized: every change of capacity costs a
        captured step its recapture."""
        latest = self.latest.get((width, height), {})
        if len(latest) < views:
            return None
        scaled = (count * max(1.0, gaussians / counted_with) for count, counted_with in latest.values())
        needed = int(sum(heapq.nlargest(cameras, scaled)))
        if current is not None and needed * (1.0 + self.headroom / 2) <= current <= needed * (1.0 + 2 * self.headroom) + ROUND_TO:
            return current
        return max(ROUND_TO, -(-int(needed * (1.0 + self.headroom)) // ROUND_TO) * ROUND_TO)

    def observe(self, keys: Sequence[Hashable], capacity: int | None, counts: torch.Tensor) -> None:
        """A render of cameras ``keys`` into ``capacity`` slots (None: sized exactly) counted ``counts`` [cameras]
        (on the device)."""
        if len(keys) != counts.numel():
            raise ValueError(f"{len(keys)} camera keys for {counts.numel()} cameras rendered")
        host, ready = copy_to_host_behind_event(counts)
        self._pending.append(_PendingCount(tuple(keys), capacity if capacity is not None else -1, host, ready))
        while len(self._pending) > self.lag:
            self._adopt(self._pending.popleft())

    def _adopt(self, pending: _PendingCount) -> None:
        if pending.ready is not None and not pending.ready.query():  # recorded ``lag`` renders ago: done by now
            pending.ready.synchronize()
        counts = pending.counts.tolist()
        for key, count in zip(pending.keys, counts):
            self.counts[key] = count
            self.counts.move_to_end(key)
            if isinstance(key, RenderKey):
                self.latest.setdefault((key.width, key.height), {})[key.view] = (count, key.gaussians)
        while len(self.counts) > self.max_keys:
            self.counts.popitem(last=False)
        count = sum(counts)
        if 0 <= pending.capacity < count:
            self.overflows += 1
            self.headroom = 2 * self.headroom + 0.25
            CONSOLE.log(
                f"[yellow]a render of {list(pending.keys)} counted {count:,} tile intersections, above the "
                f"{pending.capacity:,} sized ahead: it dropped {count - pending.capacity:,} of them; headroom is now "
                f"{self.headroom:.2f}[/yellow]"
            )


class _Render(threading.local):
    """The render in progress on this thread through ``PresizedIntersections.render`` (none: gsplat's path)."""

    keys: tuple[Hashable, ...] | None = None
    tile_height: int | None = None
    shared: RenderCounts | None = None
    """Inside ``render_shared``: the counts' destination (the capacity is ``shared_capacity``'s)."""
    shared_capacity: int = 0
    unchecked_inverse: bool = False
    """Inside ``unchecked_view_inverse``: gsplat's view inverse without its host check, presized or not."""
    known_inverse: tuple[torch.Tensor, torch.Tensor] | None = None
    """Inside ``known_view_inverse``: view matrices and their inverses, which gsplat is handed instead of computing
    them."""


class PresizedIntersections:
    """Routes gsplat ``rasterization`` calls made inside ``render(keys)`` through presized intersection buffers."""

    _installed_lock = threading.RLock()  # route_view_inverse takes it inside _install too
    _render = _Render()
    _budget_of_thread: dict[int, IntersectionBudget] = {}

    def __init__(self, budget: IntersectionBudget | None = None, rendering: ModuleType | None = None):
        """``rendering``: the module whose ``rasterization`` to route (gsplat's, unless a test gives a stand-in)."""
        self.budget = budget or IntersectionBudget()
        if rendering is None:
            import gsplat.rendering as rendering
        self._install(rendering)

    @contextmanager
    def render(self, keys: Sequence[Hashable]) -> Iterator[None]:
        """Calls to gsplat's ``rasterization`` in this block size their intersections ahead from ``keys``, one per
        camera rendered (what decides its count: the view, its resolution, the Gaussian count)."""
        state = PresizedIntersections._render
        if state.keys is not None:
            raise RuntimeError("presized renders do not nest")
        state.keys, state.tile_height = tuple(keys), None
        PresizedIntersections._budget_of_thread[threading.get_ident()] = self.budget
        try:
            yield
        finally:
            state.keys, state.tile_height = None, None

    @contextmanager
    def render_shared(self, capacity: int) -> Iterator[RenderCounts]:
        """Calls to gsplat's ``rasterization`` in this block take ``capacity`` slots, whatever their cameras, and
        read no count (a captured step's: its launches may neither depend on its views nor read the host). The
        per-camera counts are in the yielded ``RenderCounts`` after the block, for ``budget.observe``."""
        state = PresizedIntersections._render
        if state.keys is not None:
            raise RuntimeError("presized renders do not nest")
        if capacity < 1:
            raise ValueError(f"need at least one slot, got {capacity}")
        state.keys, state.tile_height, state.shared, state.shared_capacity = (), None, RenderCounts(), capacity
        try:
            yield state.shared
        finally:
            state.keys, state.tile_height, state.shared = None, None, None

    @classmethod
    def _install(cls, rendering: ModuleType) -> None:
        with cls._installed_lock:
            if getattr(rendering, "_odin_presized", False):
                return
            isect_tiles, offset_encode, to_pixels = (
                rendering.isect_tiles, rendering.isect_offset_encode, rendering.rasterize_to_pixels
            )
            harmonics = getattr(rendering, "spherical_harmonics", None)  # a stand-in may render without colours

            def harmonics_routed(degrees_to_use, dirs, coeffs, masks=None):
                if cls._render.keys is None:
                    return harmonics(degrees_to_use, dirs, coeffs, masks=masks)
                return spherical_harmonics_on_current_stream(degrees_to_use, dirs, coeffs, masks)

            def isect_tiles_routed(means2d, radii, depths, tile_size, tile_width, tile_height, **kwargs):
                state = cls._render
                if state.keys is None or kwargs.get("packed", False) or not kwargs.get("sort", True):
                    return isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height, **kwargs)
                if state.shared is not None:
                    tiles_per_gauss, isect_ids, flat_ids, state.shared.counts = presized_isect_tiles(
                        means2d, radii, depths, tile_size, tile_width, tile_height, state.shared_capacity
                    )
                    state.tile_height = tile_height
                    return tiles_per_gauss, isect_ids, flat_ids
                budget = cls._budget_of_thread[threading.get_ident()]
                capacity = budget.capacity(state.keys)
                if capacity is None:  # no count yet: gsplat's own path, sized by its host read
                    tiles_per_gauss, isect_ids, flat_ids = isect_tiles(
                        means2d, radii, depths, tile_size, tile_width, tile_height, **kwargs
                    )
                    budget.observe(state.keys, None, tiles_per_gauss.sum(1))
                    return tiles_per_gauss, isect_ids, flat_ids
                tiles_per_gauss, isect_ids, flat_ids, per_camera = presized_isect_tiles(
                    means2d, radii, depths, tile_size, tile_width, tile_height, capacity
                )
                budget.observe(state.keys, capacity, per_camera)
                state.tile_height = tile_height
                return tiles_per_gauss, isect_ids, flat_ids

            def offset_encode_routed(isect_ids, n_cameras, tile_width, tile_height):
                if cls._render.keys is None or cls._render.tile_height != tile_height:
                    return offset_encode(isect_ids, n_cameras, tile_width, tile_height)
                return offset_encode(isect_ids, n_cameras, tile_width, tile_height + 1)

            def to_pixels_routed(means2d, conics, colors, opacities, width, height, tile_size, isect_offsets,
                                 flatten_ids, **kwargs):
                state = cls._render
                if state.keys is not None and state.tile_height is not None and kwargs.get("masks") is None:
                    n_cameras, rows, tile_width = isect_offsets.shape
                    if rows == state.tile_height + 1:
                        kwargs["masks"] = padded_tile_mask(n_cameras, tile_width, state.tile_height,
                                                           isect_offsets.device)
                return to_pixels(means2d, conics, colors, opacities, width, height, tile_size, isect_offsets,
                                 flatten_ids, **kwargs)

            rendering.isect_tiles = isect_tiles_routed
            rendering.isect_offset_encode = offset_encode_routed
            rendering.rasterize_to_pixels = to_pixels_routed
            if harmonics is not None:
                rendering.spherical_harmonics = harmonics_routed
            route_view_inverse(rendering)
            rendering._odin_presized = True


def route_view_inverse(rendering: ModuleType | None = None) -> None:
    """Give gsplat's ``rendering`` module (or a stand-in) the torch whose ``inverse`` skips the host check inside
    presized renders and ``unchecked_view_inverse`` blocks, and is torch's own elsewhere (once per module)."""
    if rendering is None:
        import gsplat.rendering as rendering
    with PresizedIntersections._installed_lock:
        if not isinstance(getattr(rendering, "torch", None), _TorchWithUncheckedInverse):
            rendering.torch = _TorchWithUncheckedInverse(PresizedIntersections._render)


@contextmanager
def unchecked_view_inverse() -> Iterator[None]:
    """gsplat renders in this block, on this thread, invert their view matrices without the host check (a module
    routed by ``route_view_inverse``)."""
    state = PresizedIntersections._render
    previous, state.unchecked_inverse = state.unchecked_inverse, True
    try:
        yield
    finally:
        state.unchecked_inverse = previous


@contextmanager
def known_view_inverse(viewmats: torch.Tensor | None, inverse: torch.Tensor | None) -> Iterator[None]:
    """gsplat renders in this block, on this thread, take ``inverse`` as the inverse of ``viewmats`` (that tensor
    object, not equal values) instead of inverting them (a module routed by ``route_view_inverse``); nothing changes
    where either is None."""
    state = PresizedIntersections._render
    previous = state.known_inverse
    state.known_inverse = None if viewmats is None or inverse is None else (viewmats, inverse)
    try:
        yield
    finally:
        state.known_inverse = previous


class _TorchWithUncheckedInverse:
    """torch, as gsplat's ``rendering`` module sees it once routed: inside a presized render or an
    ``unchecked_view_inverse`` block ``torch.inverse`` (which ``rasterization`` applies to the view matrices for the
    SH directions) is ``torch.linalg.inv_ex``, the same inverse without the host read of its singularity flag
    (``torch.inverse`` is ``inv_ex`` followed by that check); everything else, and every call outside, is torch's
    own; matrices whose inverse a ``known_view_inverse`` block holds are not inverted at all."""

    def __init__(self, render: _Render):
        self._render = render

    def __getattr__(self, name: str):
        value = getattr(torch, name)
        setattr(self, name, value)  # found in the instance from now on: no proxy call per lookup
        return value

    def inverse(self, matrices: torch.Tensor) -> torch.Tensor:
        known = self._render.known_inverse
        if known is not None and matrices is known[0]:
            return known[1]
        if self._render.keys is None and not self._render.unchecked_inverse:
            return torch.inverse(matrices)
        return torch.linalg.inv_ex(matrices).inverse

