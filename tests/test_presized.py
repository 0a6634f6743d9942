"""Tile intersections sized ahead (odin_ns.rendering.presized): gsplat's pairs in gsplat's order, the budget's
late and deterministic sizing, and, on CUDA, renders and gradients bitwise gsplat's own."""

from __future__ import annotations

import pytest
import torch

from odin_ns.model import OdinSplatfactoModel, OdinSplatfactoModelConfig
from odin_ns.rendering.presized import (
    ROUND_TO,
    IntersectionBudget,
    PresizedIntersections,
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
    per_gauss, keys, flat_ids, total = presized_isect_tiles(
        means2d, radii, depths, TILE, TILES_X, TILES_Y, count + extra_slots
    )
    assert int(total) == count and keys.shape == flat_ids.shape == (count + extra_slots,)
    assert torch.equal(per_gauss, tiles_per_gauss)
    camera, tile = decode(keys, 3)
    assert torch.equal(flat_ids[:count].long(), pair_gauss)
    assert torch.equal(camera[:count] * TILES_X * TILES_Y + tile[:count], pair_tile)
    assert torch.equal(keys[:count] & 0xFFFFFFFF, depths.reshape(-1).view(torch.int32).long()[pair_gauss])
    # padding: the last tile of the extra row of the last camera, which the tile mask leaves out
    assert (camera[count:] == 2).all() and (tile[count:] == TILES_X * (TILES_Y + 1) - 1).all()
    mask = padded_tile_mask(3, TILES_X, TILES_Y, torch.device("cpu"))
    assert mask[:, :TILES_Y].all() and not mask[:, TILES_Y].any()


def test_a_capacity_below_the_count_keeps_a_prefix_of_the_pairs_and_reports_the_count():
    """The slots hold the pairs in the Gaussians' flat order before the sort, so an overflowing render keeps the
    first ``capacity`` of them (whole Gaussians but the last one cut) and drops the rest."""
    means2d, radii, depths = projected(seed=1)
    per_gauss, keys, flat_ids, total = presized_isect_tiles(means2d, radii, depths, TILE, TILES_X, TILES_Y, 300)
    assert int(total) > 300 and keys.shape == (300,)
    first_pairs = torch.repeat_interleave(torch.arange(per_gauss.numel()), per_gauss.reshape(-1).long())[:300]
    assert torch.equal(torch.sort(flat_ids.long()).values, first_pairs)


def test_the_budget_sizes_from_the_count_adopted_a_fixed_number_of_renders_later():
    budget = IntersectionBudget(headroom=0.25, lag=2)
    assert budget.capacity("a") is None  # never rendered: sized exactly
    budget.observe("a", None, torch.tensor([100_000]))
    budget.observe("b", None, torch.tensor([10]))
    assert budget.capacity("a") is None, "a count is adopted two renders later, not as soon as it is known"
    budget.observe("a", 2 * ROUND_TO, torch.tensor([110_000]))
    assert budget.capacity("a") == 2 * ROUND_TO  # 125,000 rounded up to whole blocks
    budget.observe("c", None, torch.tensor([1]))
    assert budget.capacity("b") == ROUND_TO and budget.overflows == 0


def test_a_render_above_its_capacity_is_reported_and_widens_the_headroom(capsys):
    budget = IntersectionBudget(headroom=0.25, lag=1)
    budget.observe("a", ROUND_TO, torch.tensor([ROUND_TO + 7]))
    budget.observe("b", None, torch.tensor([1]))
    assert budget.overflows == 1 and budget.headroom == 0.75
    assert "dropped 7 of them" in capsys.readouterr().out


def test_presized_intersections_refuse_the_reference_renderer():
    model = OdinSplatfactoModel.__new__(OdinSplatfactoModel)
    torch.nn.Module.__init__(model)
    model.config = OdinSplatfactoModelConfig(renderer="reference", presized_intersections=True)
    model.kwargs = {"device": "cpu"}
    with pytest.raises(ValueError, match="presized_intersections sizes gsplat's intersection buffers; the renderer here is 'reference'"):
        model.populate_modules()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (gsplat's rasterizer)")
def test_presized_renders_and_gradients_are_gsplats_bitwise():
    """gsplat's rasterization with and without presized intersections, sized exactly (first render) and ahead
    (later renders, with padding): colors, alphas and the gradients of every input equal bit for bit."""
    from gsplat.rendering import rasterization

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
        with presized.render(("views", 0, 1)):
            got = render_and_grads()
        for want, have in zip((expected[0], expected[1], *expected[2]), (got[0], got[1], *got[2])):
            assert torch.equal(want, have), f"render {render} differs from gsplat's"
    assert presized.budget.capacity(("views", 0, 1)) is not None and presized.budget.overflows == 0
    assert torch.equal(render_and_grads()[0], expected[0]), "outside render() gsplat's path must be unchanged"
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # a render sized ahead, and its backward, wait for nothing on the host
    try:
        with presized.render(("views", 0, 1)):
            render_and_grads()
    finally:
        torch.cuda.set_sync_debug_mode("default")
