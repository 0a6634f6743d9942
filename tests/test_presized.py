"""Tile intersections sized ahead (odin_ns.rendering.presized): gsplat's pairs in gsplat's order, the budget's
late and deterministic sizing, and, on CUDA, gsplat's own pairs and renders bit for bit."""

from __future__ import annotations

import math
import types

import pytest
import torch

from odin_ns.kernels.dispatch import triton_available, triton_interpreting
from odin_ns.model import OdinSplatfactoModel, OdinSplatfactoModelConfig
from odin_ns.rendering.presized import (
    ROUND_TO,
    IntersectionBudget,
    PresizedIntersections,
    RenderKey,
    padded_tile_mask,
    presized_isect_tiles,
    tile_key_bits,
)
from odin_ns.rendering.reference import _intersect_tiles, _TileGrid

WIDTH, HEIGHT, TILE = 200, 120, 16
TILES_X, TILES_Y = 13, 8


def projected(n_cameras: int = 3, n_gaussians: int = 400, seed: int = 0):
    """Random screen-space Gaussians, some off screen, some culled (radius 0), some at equal depths."""
    generator = torch.Generator().manual_seed(seed)
    means2d = torch.rand(n_cameras, n_gaussians, 2, generator=generator) * torch.tensor([WIDTH + 80.0, HEIGHT + 80.0])
    means2d -= 40.0
    radii = torch.randint(0, 30, (n_cameras, n_gaussians), generator=generator, dtype=torch.int32)
    depths = torch.rand(n_cameras, n_gaussians, generator=generator) * 5 + 0.1
    depths[:, ::7] = 2.5  # ties: gsplat keeps them in Gaussian order
    return means2d, radii, depths


def decode(keys: torch.Tensor, n_cameras: int) -> tuple[torch.Tensor, torch.Tensor]:
    bits = tile_key_bits(n_cameras, TILES_X, TILES_Y)
    return keys >> (32 + bits), (keys >> 32) & ((1 << bits) - 1)


@pytest.mark.parametrize("extra_slots", [0, 1, 5000])
def test_presized_pairs_are_gsplats_in_gsplats_order_followed_by_padding(extra_slots):
    means2d, radii, depths = projected()
    pair_gauss, pair_tile, tiles_per_gauss = _intersect_tiles(means2d, radii, depths, _TileGrid(3, WIDTH, HEIGHT, TILE))
    count = len(pair_gauss)
    assert count > 1000, "the scene should make many pairs"
    per_gauss, keys, flat_ids, per_camera = presized_isect_tiles(
        means2d, radii, depths, TILE, TILES_X, TILES_Y, count + extra_slots
    )
    assert torch.equal(per_camera, per_gauss.long().sum(1)) and int(per_camera.sum()) == count
    assert keys.shape == flat_ids.shape == (count + extra_slots,)
    assert torch.equal(per_gauss, tiles_per_gauss)
    camera, tile = decode(keys, 3)
    assert torch.equal(flat_ids[:count].long(), pair_gauss)
    assert torch.equal(camera[:count] * TILES_X * TILES_Y + tile[:count], pair_tile)
    assert torch.equal(keys[:count] & 0xFFFFFFFF, depths.reshape(-1).view(torch.int32).long()[pair_gauss])
    # padding: the last tile of the extra row of the last camera, which the tile mask leaves out
    assert (camera[count:] == 2).all() and (tile[count:] == TILES_X * (TILES_Y + 1) - 1).all()
    mask = padded_tile_mask(3, TILES_X, TILES_Y, torch.device("cpu"))
    assert mask[:, :TILES_Y].all() and not mask[:, TILES_Y].any()


def test_a_capacity_below_the_count_keeps_the_nearest_gaussians_pairs_and_reports_the_count():
    """The slots hold each camera's pairs in depth order before the sort, cameras in order, so an overflowing render
    keeps the pairs of the first cameras' nearest Gaussians (whole Gaussians but the last one cut) and drops the
    farthest, which a front-to-back composite weights least."""
    means2d, radii, depths = projected(seed=1)
    per_gauss, keys, flat_ids, per_camera = presized_isect_tiles(means2d, radii, depths, TILE, TILES_X, TILES_Y, 300)
    assert int(per_camera.sum()) > 300 and keys.shape == (300,)
    by_depth = torch.sort(depths, dim=1, stable=True).indices + torch.arange(3)[:, None] * depths.shape[1]
    flat_by_depth = by_depth.reshape(-1)
    first_pairs = torch.repeat_interleave(flat_by_depth, per_gauss.reshape(-1)[flat_by_depth].long())[:300]
    assert torch.equal(torch.sort(flat_ids.long()).values, torch.sort(first_pairs).values)


def test_the_sort_takes_the_narrowest_integer_holding_camera_and_tile():
    from odin_ns.rendering.presized import _narrowest_signed

    assert _narrowest_signed(3 * 2**11) == torch.int16 and _narrowest_signed(2**15) == torch.int32
    assert _narrowest_signed(2**31 - 1) == torch.int32 and _narrowest_signed(2**31) == torch.int64


_TRITON = [pytest.param("cpu", id="triton-cpu", marks=pytest.mark.skipif(
    not (triton_available() and triton_interpreting()), reason="Triton on the CPU needs TRITON_INTERPRET=1 "
    "(test_kernels.py::test_triton_kernels_under_interpreter runs this under it)"))]
_TRITON += [pytest.param("cuda", id="triton-cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA")])]


@pytest.mark.parametrize("device", _TRITON)
@pytest.mark.parametrize("extra_slots", [-700, 0, 5000])
def test_the_triton_fill_sorts_to_the_torch_fills_pairs(device, extra_slots):
    """The training path (the Triton fill of the slots, then the sort) returns what the torch fill does, bit for bit,
    whether the capacity cuts the pairs, holds them exactly or leaves padding."""
    means2d, radii, depths = (tensor.to(device) for tensor in projected(seed=5))
    count = int(presized_isect_tiles(means2d, radii, depths, TILE, TILES_X, TILES_Y, 1, backend="torch")[3].sum())
    args = (means2d, radii, depths, TILE, TILES_X, TILES_Y, count + extra_slots)
    for got, want in zip(presized_isect_tiles(*args, backend="triton"), presized_isect_tiles(*args, backend="torch")):
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_the_budget_sizes_from_the_counts_adopted_a_fixed_number_of_renders_later():
    budget = IntersectionBudget(headroom=0.25, lag=2)
    assert budget.capacity(["a"]) is None  # never rendered: sized exactly
    budget.observe(["a"], None, torch.tensor([100_000]))
    budget.observe(["b", "c"], None, torch.tensor([10, 50_000]))
    assert budget.capacity(["a"]) is None, "a count is adopted two renders later, not as soon as it is known"
    budget.observe(["a"], 2 * ROUND_TO, torch.tensor([110_000]))
    assert budget.capacity(["a"]) == 2 * ROUND_TO  # 125,000 rounded up to whole blocks
    assert budget.capacity(["a", "c"]) is None
    budget.observe(["d"], None, torch.tensor([1]))
    assert budget.capacity(["b"]) == ROUND_TO and budget.overflows == 0
    # a render's count is the sum of its cameras': views rendered in other combinations before size it
    assert budget.capacity(["c", "a"]) == 3 * ROUND_TO  # (50,000 + 100,000) x 1.25 = 187,500
    with pytest.raises(ValueError, match="2 camera keys for 1 cameras rendered"):
        budget.observe(["a", "b"], None, torch.tensor([1]))


def test_the_budget_keeps_the_most_recently_adopted_counts():
    budget = IntersectionBudget(lag=1, max_keys=2)
    for key in ("a", "b", "c", "b", "d"):
        budget.observe([key], None, torch.tensor([ROUND_TO]))
    assert list(budget.counts) == ["c", "b"]  # "d" awaits adoption; "a" was dropped


def test_a_render_above_its_capacity_is_reported_and_widens_the_headroom(capsys):
    budget = IntersectionBudget(headroom=0.25, lag=1)
    budget.observe(["a", "b"], ROUND_TO, torch.tensor([ROUND_TO, 7]))
    budget.observe(["c"], None, torch.tensor([1]))
    assert budget.overflows == 1 and budget.headroom == 0.75
    assert "dropped 7 of them" in capsys.readouterr().out


def gsplat_like_rendering() -> types.ModuleType:
    """A stand-in for ``gsplat.rendering`` on the CPU: its three intersection functions follow gsplat's kernels
    (pairs and keys as ``isect_tiles`` builds them, offsets as ``isect_offset_encode`` decodes them from the tile
    count it is given, each tile's range as the rasterization kernels take it, the last tile's ending at the buffer's
    end, masked tiles skipped), and its ``rasterization`` calls them as gsplat's does. A render returns, for every
    tile the kernels would walk, the Gaussians they would walk through."""
    module = types.ModuleType("gsplat_rendering_stand_in")

    def isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height, sort=True, packed=False,
                    n_cameras=None, camera_ids=None, gaussian_ids=None):
        grid = _TileGrid(means2d.shape[0], tile_width * tile_size, tile_height * tile_size, tile_size)
        pair_gauss, pair_tile, per_gauss = _intersect_tiles(means2d, radii, depths, grid)
        bits = int(math.floor(math.log2(tile_width * tile_height))) + 1
        camera, tile = pair_tile // (tile_width * tile_height), pair_tile % (tile_width * tile_height)
        depth_bits = depths.reshape(-1).view(torch.int32).long()[pair_gauss]
        return per_gauss, (camera << (32 + bits)) | (tile << 32) | depth_bits, pair_gauss.int()

    def isect_offset_encode(isect_ids, n_cameras, tile_width, tile_height):
        n_tiles = tile_width * tile_height
        bits = int(math.floor(math.log2(n_tiles))) + 1
        ids = (isect_ids >> (32 + bits)) * n_tiles + ((isect_ids >> 32) & ((1 << bits) - 1))
        offsets = torch.searchsorted(ids, torch.arange(n_cameras * n_tiles), right=False)
        return offsets.int().view(n_cameras, tile_height, tile_width)

    def rasterize_to_pixels(means2d, conics, colors, opacities, width, height, tile_size, isect_offsets, flatten_ids,
                            backgrounds=None, masks=None, packed=False, absgrad=False):
        n_cameras, tile_height, tile_width = isect_offsets.shape
        offsets = isect_offsets.reshape(-1).tolist()
        walked = {}
        for index, start in enumerate(offsets):
            camera, tile = divmod(index, tile_width * tile_height)
            if masks is not None and not masks.reshape(-1)[index]:
                continue
            end = flatten_ids.numel() if index == len(offsets) - 1 else offsets[index + 1]
            walked[(camera, tile // tile_width, tile % tile_width)] = flatten_ids[start:end].tolist()
        return walked

    def rasterization(means2d, radii, depths, width, height, tile_size=TILE):
        tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
        per_gauss, isect_ids, flatten_ids = module.isect_tiles(
            means2d, radii, depths, tile_size, tile_width, tile_height, packed=False, n_cameras=radii.shape[0],
            camera_ids=None, gaussian_ids=None,
        )
        offsets = module.isect_offset_encode(isect_ids, radii.shape[0], tile_width, tile_height)
        return module.rasterize_to_pixels(means2d, None, None, None, width, height, tile_size, offsets, flatten_ids,
                                          backgrounds=None, packed=False, absgrad=False)

    module.isect_tiles, module.isect_offset_encode = isect_tiles, isect_offset_encode
    module.rasterize_to_pixels, module.rasterization = rasterize_to_pixels, rasterization
    return module


def test_routed_renders_walk_gsplats_tiles_and_never_the_padding():
    """Through a stand-in of gsplat's rendering module: a render sized exactly, then ahead (with padding), walks
    every real tile's Gaussians as gsplat's own path does, and no tile the kernels walk holds padding; renders
    outside ``render()`` take gsplat's path unchanged; a render that outgrew its capacity is reported."""
    module = gsplat_like_rendering()
    means2d, radii, depths = projected(seed=2)
    expected = module.rasterization(means2d, radii, depths, WIDTH, HEIGHT)
    assert sum(map(len, expected.values())) > 1000
    presized = PresizedIntersections(IntersectionBudget(lag=1), rendering=module)
    cameras = ["view 0", "view 1", "view 2"]
    for render in range(3):
        with presized.render(cameras):
            walked = module.rasterization(means2d, radii, depths, WIDTH, HEIGHT)
        real = {tile: ids for tile, ids in walked.items() if tile[1] < TILES_Y}
        assert real == expected, f"render {render}: the real tiles differ from gsplat's"
        assert not any(walked[tile] for tile in walked.keys() - real.keys()), "a walked tile holds padding"
    assert presized.budget.capacity(cameras) > sum(map(len, expected.values())), "sized ahead, with headroom"
    assert module.rasterization(means2d, radii, depths, WIDTH, HEIGHT) == expected

    wider = radii * 20  # footprints grown: more pairs than the capacity sized from the last render
    capacity = presized.budget.capacity(cameras)
    assert int(presized_isect_tiles(means2d, wider, depths, TILE, TILES_X, TILES_Y, 1)[3].sum()) > capacity
    with presized.render(cameras):
        module.rasterization(means2d, wider, depths, WIDTH, HEIGHT)
    with presized.render(["view 3", "view 4", "view 5"]):
        module.rasterization(means2d, radii, depths, WIDTH, HEIGHT)
    assert presized.budget.overflows == 1


def test_inside_a_render_gsplats_view_inverse_is_torchs_without_the_host_check():
    """gsplat's ``rasterization`` inverts the view matrices with ``torch.inverse``, whose singularity check reads the
    device; inside a presized render it gets ``torch.linalg.inv_ex``'s inverse, bit for bit the same."""
    module = gsplat_like_rendering()
    module.torch = torch
    presized = PresizedIntersections(IntersectionBudget(lag=1), rendering=module)
    viewmats = torch.eye(4).expand(3, 4, 4) + 0.1 * torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(4))
    assert module.torch is not torch and module.torch.zeros is torch.zeros
    with presized.render(["view 0", "view 1", "view 2"]):
        inside = module.torch.inverse(viewmats)
        module.torch.inverse(torch.zeros(4, 4))  # no check: a singular matrix passes
    assert torch.equal(inside, torch.inverse(viewmats))
    assert torch.equal(module.torch.inverse(viewmats), torch.inverse(viewmats))
    with pytest.raises(RuntimeError, match="singular"):  # outside a render, torch's own, check included
        module.torch.inverse(torch.zeros(4, 4))


def test_training_renders_invert_gsplats_view_matrices_without_the_host_check_presized_or_not():
    """Routed once (``route_view_inverse``), gsplat's module inverts without the check inside
    ``unchecked_view_inverse`` (every training render of the model) and with it everywhere else."""
    from odin_ns.rendering.presized import route_view_inverse, unchecked_view_inverse

    module = types.SimpleNamespace(torch=torch)
    route_view_inverse(module)
    routed = module.torch
    route_view_inverse(module)
    assert module.torch is routed and module.torch.zeros is torch.zeros  # routed once, torch's own otherwise
    viewmats = torch.eye(4).expand(2, 4, 4) + 0.1 * torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(1))
    with unchecked_view_inverse():
        assert torch.equal(module.torch.inverse(viewmats), torch.inverse(viewmats))
        module.torch.inverse(torch.zeros(4, 4))
    with pytest.raises(RuntimeError, match="singular"):
        module.torch.inverse(torch.zeros(4, 4))


def test_renders_take_the_inverse_of_the_view_matrices_they_are_handed_instead_of_inverting_them():
    """Inside ``known_view_inverse(viewmats, inverse)`` gsplat's module gets ``inverse`` for that very tensor (no LU
    launches), and inverts any other matrices (an equal copy included) as before; None leaves everything as it was."""
    from odin_ns.rendering.presized import known_view_inverse, route_view_inverse, unchecked_view_inverse

    module = types.SimpleNamespace(torch=torch)
    route_view_inverse(module)
    viewmats = torch.eye(4).expand(2, 4, 4) + 0.1 * torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(2))
    held = torch.full((2, 4, 4), 7.0)  # not the inverse: shows which one was returned
    with unchecked_view_inverse(), known_view_inverse(viewmats, held):
        assert module.torch.inverse(viewmats) is held
        assert torch.equal(module.torch.inverse(viewmats.clone()), torch.inverse(viewmats))
        with known_view_inverse(viewmats, None):
            assert torch.equal(module.torch.inverse(viewmats), torch.inverse(viewmats))
        assert module.torch.inverse(viewmats) is held
    assert torch.equal(module.torch.inverse(viewmats), torch.inverse(viewmats))


def test_presized_intersections_refuse_the_reference_renderer():
    model = OdinSplatfactoModel.__new__(OdinSplatfactoModel)
    torch.nn.Module.__init__(model)
    model.config = OdinSplatfactoModelConfig(renderer="reference", presized_intersections=True)
    model.kwargs = {"device": "cpu"}
    with pytest.raises(ValueError, match="presized_intersections sizes gsplat's intersection buffers; the renderer here is 'reference'"):
        model.populate_modules()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (gsplat's rasterizer)")
def test_presized_pairs_and_renders_are_gsplats_bitwise_on_cuda():
    """On CUDA, against gsplat's own kernels: the presized pairs are gsplat's ``isect_tiles`` keys and ids bit for bit
    (then padding); renders sized exactly (first) and ahead (later, with padding) give gsplat's colors and alphas
    bit for bit, and gradients equal to within the rounding of gsplat's backward, which accumulates them with atomic
    adds in whatever order the threads arrive (so two of gsplat's own runs need not agree bitwise either)."""
    from gsplat.cuda._wrapper import isect_tiles
    from gsplat.rendering import rasterization

    means2d, radii, depths = (tensor.cuda() for tensor in projected(seed=3))
    gsplat_per_gauss, gsplat_keys, gsplat_ids = isect_tiles(means2d, radii, depths, TILE, TILES_X, TILES_Y)
    count = gsplat_keys.numel()
    per_gauss, keys, flat_ids, per_camera = presized_isect_tiles(
        means2d, radii, depths, TILE, TILES_X, TILES_Y, count + 777
    )
    camera, tile = decode(keys[:count], 3)
    gsplat_tile_bits = int(math.floor(math.log2(TILES_X * TILES_Y))) + 1  # gsplat's grid has no padding row
    gsplat_camera, gsplat_tile = gsplat_keys >> (32 + gsplat_tile_bits), (gsplat_keys >> 32) & ((1 << gsplat_tile_bits) - 1)
    assert torch.equal(per_gauss, gsplat_per_gauss) and int(per_camera.sum()) == count
    assert torch.equal(flat_ids[:count], gsplat_ids)
    assert torch.equal(camera, gsplat_camera) and torch.equal(tile, gsplat_tile)
    assert torch.equal(keys[:count] & 0xFFFFFFFF, gsplat_keys & 0xFFFFFFFF)

    generator = torch.Generator().manual_seed(0)
    n = 20_000
    inputs = dict(
        means=torch.randn(n, 3, generator=generator) * 0.6 + torch.tensor([0.0, 0.0, 3.0]),
        quats=torch.randn(n, 4, generator=generator),
        scales=torch.rand(n, 3, generator=generator) * 0.05 + 0.005,
        opacities=torch.rand(n, generator=generator),
        colors=torch.rand(n, 3, generator=generator),
    )
    inputs = {name: tensor.cuda().requires_grad_() for name, tensor in inputs.items()}
    viewmats = torch.eye(4).expand(2, 4, 4).clone().cuda()
    viewmats[1, 0, 3] = 0.3
    Ks = torch.tensor([[300.0, 0.0, 160.0], [0.0, 300.0, 100.0], [0.0, 0.0, 1.0]]).expand(2, 3, 3).cuda()

    def render_and_grads():
        colors, alphas, _ = rasterization(**inputs, viewmats=viewmats, Ks=Ks, width=320, height=200, packed=False,
                                          absgrad=True, render_mode="RGB+ED")
        weights = torch.linspace(0.1, 1.0, colors.numel(), device="cuda").view_as(colors)
        grads = torch.autograd.grad((colors * weights).sum() + alphas.sum(), list(inputs.values()))
        return colors.detach(), alphas.detach(), grads

    expected = render_and_grads()
    presized = PresizedIntersections(IntersectionBudget(lag=1))
    for render in range(3):  # exact, then sized ahead
        with presized.render(["view 0", "view 1"]):
            got = render_and_grads()
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1]), f"render {render} differs"
        for want, have in zip(expected[2], got[2]):
            torch.testing.assert_close(have, want, rtol=1e-5, atol=1e-6 * float(want.abs().max()))
    assert presized.budget.capacity(["view 0", "view 1"]) is not None and presized.budget.overflows == 0
    assert torch.equal(render_and_grads()[0], expected[0]), "outside render() gsplat's path must be unchanged"
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # a render sized ahead, and its backward, wait for nothing on the host
    try:
        with presized.render(["view 0", "view 1"]):
            render_and_grads()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_a_shared_render_takes_its_capacity_for_any_views_and_leaves_its_counts_for_the_budget():
    """A captured step's render (``render_shared``): the capacity given, whatever the cameras, the real tiles still
    gsplat's, no count read or observed inside; observed after, its counts size the next shared capacity."""
    module = gsplat_like_rendering()
    means2d, radii, depths = projected(seed=5)
    expected = module.rasterization(means2d, radii, depths, WIDTH, HEIGHT)
    pairs = sum(map(len, expected.values()))
    presized = PresizedIntersections(IntersectionBudget(lag=1), rendering=module)
    with presized.render_shared(pairs + 5000) as shared:
        walked = module.rasterization(means2d, radii, depths, WIDTH, HEIGHT)
    assert {tile: ids for tile, ids in walked.items() if tile[1] < TILES_Y} == expected
    assert int(shared.counts.sum()) == pairs and presized.budget.counts == {}, "counted, not observed inside"
    keys = [RenderKey(view, WIDTH, HEIGHT, 400) for view in range(radii.shape[0])]
    presized.budget.observe(keys, pairs + 5000, shared.counts)
    presized.budget.observe(keys, pairs + 5000, shared.counts)  # lag 1: the first is adopted now
    assert presized.budget.latest[(WIDTH, HEIGHT)] == {view: (count, 400) for view, count in enumerate(shared.counts.tolist())}


def test_the_shared_capacity_covers_the_largest_counts_of_any_views_and_keeps_its_value_while_it_fits():
    """Sized from every training view's latest count at the size, scaled by the Gaussians' growth since it was
    counted; none until every view has one; kept while it holds the largest counts with half the headroom and is not
    oversized."""
    budget = IntersectionBudget(headroom=0.25, lag=1)

    def seen(view_counts, gaussians):
        for view, count in view_counts.items():
            budget.observe([RenderKey(view, 800, 600, gaussians)], None, torch.tensor([count]))
        budget.observe([RenderKey(99, 64, 64, 1)], None, torch.tensor([1]))  # adopts the last one (lag 1)

    def capacity(cameras=1, gaussians=1000, current=None, width=800):
        return budget.shared_capacity(width, 600, views=3, cameras=cameras, gaussians=gaussians, current=current)

    seen({0: 400_000, 1: 100_000}, gaussians=1000)
    assert capacity() is None, "view 2 has no count yet"
    seen({2: 300_000}, gaussians=1000)
    one = capacity()
    assert one % ROUND_TO == 0 and 400_000 * 1.25 <= one < 400_000 * 1.25 + ROUND_TO
    two = capacity(cameras=2)
    assert 700_000 * 1.25 <= two < 700_000 * 1.25 + ROUND_TO, "the two largest counts"
    grown = capacity(gaussians=1500)
    assert 600_000 * 1.25 <= grown < 600_000 * 1.25 + ROUND_TO, "counted with 1,000 Gaussians, rendered with 1,500"
    seen({0: 420_000}, gaussians=1000)
    assert capacity(current=one) == one, "still fits: kept"
    seen({0: 480_000}, gaussians=1000)
    larger = capacity(current=one)
    assert larger > one and larger >= 480_000 * 1.25
    seen({0: 150_000}, gaussians=1000)
    assert capacity(current=larger) < larger, "oversized: resized down"
    assert capacity(width=400) is None, "another size: no counts"


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_the_harmonics_on_the_current_stream_are_gsplats_evaluation(degree):
    """Inside presized renders the colours' spherical harmonics are torch operations (gsplat's CUDA kernels for them
    launch on the legacy stream, which a captured step does not record): gsplat's own torch reference, to float
    rounding, for every degree and for coefficients beyond the degree in use."""
    from gsplat.cuda._torch_impl import _spherical_harmonics

    from odin_ns.rendering.presized import spherical_harmonics_on_current_stream

    generator = torch.Generator().manual_seed(degree)
    dirs = torch.randn(2, 300, 3, generator=generator) * 3
    coeffs = torch.randn(2, 300, 16, 3, generator=generator)
    got = spherical_harmonics_on_current_stream(degree, dirs, coeffs, masks=torch.ones(2, 300, dtype=torch.bool))
    torch.testing.assert_close(got, _spherical_harmonics(degree, dirs, coeffs), rtol=1e-5, atol=1e-5)
