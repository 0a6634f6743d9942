"""The pure-torch reference rasterizer: exact gradients, gsplat's compositing rules, gsplat's meta contract."""

from __future__ import annotations

import math

import pytest
import torch

from odin_ns.rendering.reference import (
    ALPHA_MAX,
    ALPHA_MIN,
    TRANSMITTANCE_MIN,
    rasterize_reference,
    rasterize_to_pixels_reference,
)

RED, BLUE = (1.0, 0.0, 0.0), (0.0, 0.0, 1.0)


def _camera(width: int, height: int, focal: float, dtype=torch.float32, device="cpu"):
    """One pinhole camera at the origin looking down +z (gsplat's viewmat is world-to-camera)."""
    viewmats = torch.eye(4, dtype=dtype, device=device)[None]
    intrinsics = [[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]]
    Ks = torch.tensor([intrinsics], dtype=dtype, device=device)
    return viewmats, Ks


def _gaussians(centres, scale, opacity, colors, dtype=torch.float32):
    """Isotropic Gaussians (identity rotation) at world ``centres`` with one scale and opacity each."""
    means = torch.tensor(centres, dtype=dtype)
    count = len(means)
    quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * count, dtype=dtype)
    scales = torch.full((count, 3), scale, dtype=dtype)
    opacities = torch.full((count,), opacity, dtype=dtype)
    return means, quats, scales, opacities, torch.tensor(colors, dtype=dtype)


def _dense_alphas(meta) -> torch.Tensor:
    """[C, N, H, W] alpha of every Gaussian at every pixel centre, from the projected meta (no thresholds)."""
    ys, xs = torch.meshgrid(torch.arange(meta["height"]), torch.arange(meta["width"]), indexing="ij")
    dx = meta["means2d"][..., 0, None, None] - (xs + 0.5)
    dy = meta["means2d"][..., 1, None, None] - (ys + 0.5)
    a, b, c = (meta["conics"][..., k, None, None] for k in range(3))
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    return meta["opacities"][..., None, None] * torch.exp(-sigma)


def test_gradients_match_finite_differences():
    """float64 gradcheck for means, quats, scales, opacities and colors, with depth and a background.

    Compositing has kinks (alpha < 1/255 is skipped, alpha is clamped to 0.999, blending stops at transmittance
    1e-4, tiles are chosen from an integer radius). The case is built away from all of them: three wide,
    half-transparent Gaussians cover the whole 8x8 image (one tile) with alphas well inside (1/255, 0.999),
    which the test checks before differentiating.
    """
    viewmats, Ks = _camera(8, 8, focal=10.0, dtype=torch.float64)
    centres = [[0.3, -0.2, 4.5], [-0.4, 0.1, 5.0], [0.1, 0.3, 6.0]]
    colors = [[0.9, 0.2, 0.1], [0.1, 0.8, 0.3], [0.2, 0.3, 0.7]]
    means, quats, scales, opacities, colors = _gaussians(centres, 1.3, 0.5, colors, dtype=torch.float64)
    quats = quats + torch.tensor([[0.0, 0.1, -0.2, 0.3]], dtype=torch.float64)
    scales = scales * torch.tensor([[1.0, 0.8, 1.2], [0.9, 1.1, 1.0], [1.2, 1.0, 0.9]], dtype=torch.float64)
    opacities = torch.tensor([0.45, 0.6, 0.7], dtype=torch.float64)
    backgrounds = torch.tensor([[0.2, 0.4, 0.6]], dtype=torch.float64)

    def render(means, quats, scales, opacities, colors):
        image, alpha, _ = rasterize_reference(
            means, quats, scales, opacities, colors, viewmats, Ks, 8, 8, backgrounds=backgrounds, render_mode="RGB+ED"
        )
        return image, alpha

    with torch.no_grad():
        _, _, meta = rasterize_reference(means, quats, scales, opacities, colors, viewmats, Ks, 8, 8)
        alphas = _dense_alphas(meta)
    assert (meta["radii"] > 0).all()
    assert alphas.min() > 2 * ALPHA_MIN and alphas.max() < 0.9 * ALPHA_MAX
    assert torch.prod(1 - alphas, dim=1).min() > 100 * TRANSMITTANCE_MIN

    inputs = [t.clone().requires_grad_() for t in (means, quats, scales, opacities, colors)]
    assert torch.autograd.gradcheck(render, inputs, eps=1e-6, atol=1e-6)


def test_sh_gradients_match_finite_differences():
    """float64 gradcheck through degree-1 spherical harmonics (coefficients and view directions from means).

    Same kink-free construction as above; SH coefficients are small so gsplat's clamp of colour + 0.5 at 0 is
    never reached.
    """
    viewmats, Ks = _camera(8, 8, focal=10.0, dtype=torch.float64)
    means, quats, scales, opacities, _ = _gaussians([[0.3, -0.2, 4.5], [-0.4, 0.1, 5.0]], 1.3, 0.6, [], torch.float64)
    coeffs = 0.2 * torch.randn(2, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def render(means, coeffs):
        return rasterize_reference(means, quats, scales, opacities, coeffs, viewmats, Ks, 8, 8, sh_degree=1)[0]

    assert torch.autograd.gradcheck(render, [means.clone().requires_grad_(), coeffs.requires_grad_()], eps=1e-6)


def _composite_per_pixel(means2d, conics, colors, opacities, radii, depths, width, height, tile_size, backgrounds):
    """gsplat's forward rules, one pixel and one Gaussian at a time (slow, obviously correct)."""
    n_cameras, n_gaussians = radii.shape
    image = torch.zeros(n_cameras, height, width, colors.shape[-1], dtype=torch.float64)
    accumulated = torch.zeros(n_cameras, height, width, 1, dtype=torch.float64)
    for cam in range(n_cameras):
        drawn = sorted((n for n in range(n_gaussians) if radii[cam, n] > 0), key=lambda n: float(depths[cam, n]))
        for y in range(height):
            for x in range(width):
                transmittance = 1.0
                for n in drawn:
                    mean_x, mean_y = means2d[cam, n].tolist()
                    tile_x, tile_y = mean_x / tile_size, mean_y / tile_size
                    tile_radius = float(radii[cam, n]) / tile_size
                    tiles_x = range(max(0, math.floor(tile_x - tile_radius)), math.ceil(tile_x + tile_radius))
                    tiles_y = range(max(0, math.floor(tile_y - tile_radius)), math.ceil(tile_y + tile_radius))
                    if x // tile_size not in tiles_x or y // tile_size not in tiles_y:
                        continue
                    a, b, c = conics[cam, n].tolist()
                    dx, dy = mean_x - (x + 0.5), mean_y - (y + 0.5)
                    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
                    alpha = min(ALPHA_MAX, float(opacities[cam, n]) * math.exp(-sigma))
                    if sigma < 0 or alpha < ALPHA_MIN:
                        continue
                    if transmittance * (1 - alpha) <= TRANSMITTANCE_MIN:
                        break
                    image[cam, y, x] += alpha * transmittance * colors[cam, n].double()
                    transmittance *= 1 - alpha
                accumulated[cam, y, x, 0] = 1 - transmittance
                image[cam, y, x] += transmittance * backgrounds[cam].double()
    return image, accumulated


def test_compositing_matches_per_pixel_loop():
    """Tiles, depth order, thresholds and early termination agree with a plain per-pixel loop over 2 cameras."""
    generator = torch.Generator().manual_seed(1)
    n_cameras, n_gaussians, width, height, tile_size = 2, 40, 21, 13, 4
    means2d = torch.rand(n_cameras, n_gaussians, 2, generator=generator) * torch.tensor([width, height])
    factors = torch.randn(n_cameras, n_gaussians, 2, 2, generator=generator) * 1.5
    covariances = factors @ factors.transpose(-1, -2) + 0.3 * torch.eye(2)
    inverse = torch.linalg.inv(covariances)
    conics = torch.stack([inverse[..., 0, 0], inverse[..., 0, 1], inverse[..., 1, 1]], dim=-1)
    opacities = torch.rand(n_cameras, n_gaussians, generator=generator)
    opacities[:, :10] = 0.995  # saturates some pixels, so early termination is exercised
    colors = torch.rand(n_cameras, n_gaussians, 3, generator=generator)
    depths = torch.rand(n_cameras, n_gaussians, generator=generator)
    radii = torch.ceil(3 * torch.sqrt(torch.linalg.eigvalsh(covariances)[..., -1])).int()
    radii[0, 10:15] = 0
    backgrounds = torch.rand(n_cameras, 3, generator=generator)
    args = (means2d, conics, colors, opacities, radii, depths, width, height, tile_size, backgrounds)

    image, alpha, _ = rasterize_to_pixels_reference(*args)
    expected_image, expected_alpha = _composite_per_pixel(*args)

    assert (expected_alpha > 1 - 1e-3).any(), "the scene must saturate some pixels"
    torch.testing.assert_close(image.double(), expected_image, atol=1e-5, rtol=0)
    torch.testing.assert_close(alpha.double(), expected_alpha, atol=1e-5, rtol=0)


def test_blending_stops_before_transmittance_falls_to_1e_minus_4():
    """gsplat's exclusive early stop, by hand: at the shared centre the first alpha 0.999 leaves T = 1e-3 and a
    second alpha of 0.95 would leave 5e-5 <= 1e-4, so it is skipped; one pixel to the right both blend."""
    means2d = torch.tensor([[[4.5, 4.5], [4.5, 4.5]]])
    conics = torch.tensor([[[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]]])
    colors = torch.tensor([[RED, BLUE]])
    opacities = torch.tensor([[1.0, 0.95]])
    radii = torch.tensor([[3, 3]], dtype=torch.int32)
    depths = torch.tensor([[1.0, 2.0]])
    image, alpha, _ = rasterize_to_pixels_reference(means2d, conics, colors, opacities, radii, depths, 8, 8)

    torch.testing.assert_close(image[0, 4, 4], torch.tensor([ALPHA_MAX, 0.0, 0.0]))
    torch.testing.assert_close(alpha[0, 4, 4, 0], torch.tensor(ALPHA_MAX))
    first_alpha = math.exp(-0.5)
    torch.testing.assert_close(image[0, 4, 5, 2], torch.tensor((1 - first_alpha) * 0.95 * first_alpha))


def test_opaque_gaussian_covers_its_centre_and_not_the_corners():
    viewmats, Ks = _camera(64, 64, focal=50.0)
    gaussian = _gaussians([[0.0, 0.0, 5.0]], 0.2, 0.99, [RED])
    image, alpha, meta = rasterize_reference(*gaussian, viewmats, Ks, 64, 64)

    torch.testing.assert_close(meta["means2d"][0, 0], torch.tensor([32.0, 32.0]))
    assert alpha[0, 31:33, 31:33].min() > 0.9
    torch.testing.assert_close(image[0, 32, 32], torch.tensor(RED) * alpha[0, 32, 32])
    for corner in (alpha[0, 0, 0], alpha[0, 0, -1], alpha[0, -1, 0], alpha[0, -1, -1]):
        assert corner.item() == 0.0


def test_a_gaussian_on_the_camera_plane_is_culled_with_a_zero_gradient():
    """Depth 0 (and behind the camera): culled, as gsplat culls it, and its gradient is zero, not NaN (projecting it
    would divide by its depth); the Gaussian in view renders and gets a gradient."""
    viewmats, Ks = _camera(32, 32, focal=30.0)
    means, quats, scales, opacities, colors = _gaussians([[0.3, 0.1, 0.0], [0.0, 0.0, -2.0], [0.0, 0.0, 4.0]], 0.3,
                                                         0.9, [RED, BLUE, RED])
    for tensor in (means, quats, scales, opacities):
        tensor.requires_grad_(True)
    image, _, meta = rasterize_reference(means, quats, scales, opacities, colors, viewmats, Ks, 32, 32)
    image.sum().backward()
    assert meta["radii"][0, :2].eq(0).all() and meta["radii"][0, 2] > 0
    for tensor in (means, quats, scales, opacities):
        assert torch.isfinite(tensor.grad).all() and tensor.grad[:2].eq(0).all()
    assert all(tensor.grad[2].ne(0).any() for tensor in (means, scales, opacities))  # isotropic: no rotation gradient


@pytest.mark.parametrize("near_first", [True, False])
def test_nearer_gaussian_wins_regardless_of_input_order(near_first):
    viewmats, Ks = _camera(32, 32, focal=30.0)
    near, far = ([0.0, 0.0, 3.0], RED), ([0.2, 0.0, 6.0], BLUE)
    first, second = (near, far) if near_first else (far, near)
    gaussians = _gaussians([first[0], second[0]], 0.4, 0.99, [first[1], second[1]])
    image, _, _ = rasterize_reference(*gaussians, viewmats, Ks, 32, 32)

    centre = image[0, 16, 16]
    assert centre[0] > 0.95 and centre[2] < 0.05


def test_background_fills_empty_pixels():
    viewmats, Ks = _camera(48, 32, focal=30.0)
    background = torch.tensor([[0.1, 0.5, 0.9]])
    gaussian = _gaussians([[0.0, 0.0, 5.0]], 0.1, 0.9, [RED])
    image, alpha, _ = rasterize_reference(*gaussian, viewmats, Ks, 48, 32, backgrounds=background)

    torch.testing.assert_close(image[0, 0, 0], background[0])
    centre_alpha = alpha[0, 16, 24]
    torch.testing.assert_close(image[0, 16, 24], torch.tensor(RED) * centre_alpha + (1 - centre_alpha) * background[0])


def test_gaussian_behind_the_camera_is_not_rendered():
    viewmats, Ks = _camera(32, 32, focal=30.0)
    gaussians = _gaussians([[0.0, 0.0, 5.0], [0.0, 0.0, -5.0]], 0.5, 0.9, [RED, BLUE])
    image, _, meta = rasterize_reference(*gaussians, viewmats, Ks, 32, 32)
    image_front_only, _, _ = rasterize_reference(*(t[:1] for t in gaussians), viewmats, Ks, 32, 32)

    assert meta["radii"].dtype == torch.int32
    assert meta["radii"][0, 0] > 0 and meta["radii"][0, 1] == 0
    torch.testing.assert_close(image, image_front_only)


def test_nothing_visible_renders_background_and_zero_gradients():
    """DefaultStrategy reads means2d.grad every step, so it must exist (as zeros) even when nothing is drawn."""
    viewmats, Ks = _camera(16, 16, focal=20.0)
    means, quats, scales, opacities, colors = _gaussians([[0.0, 0.0, -5.0]], 0.3, 0.9, [RED])
    means.requires_grad_()
    background = torch.tensor([[0.2, 0.3, 0.4]])
    image, alpha, meta = rasterize_reference(
        means, quats, scales, opacities, colors, viewmats, Ks, 16, 16, backgrounds=background
    )
    meta["means2d"].retain_grad()
    image.sum().backward()

    torch.testing.assert_close(image, background[:, None, None, :].expand(1, 16, 16, 3))
    assert (alpha == 0).all()
    assert (meta["means2d"].grad == 0).all() and (means.grad == 0).all()


def test_means2d_gradient_is_the_compositing_gradient_and_zero_when_invisible():
    """meta['means2d'].grad (as DefaultStrategy reads it) equals d loss / d means2d of compositing alone."""
    viewmats, Ks = _camera(32, 32, focal=30.0)
    gaussians = _gaussians([[0.1, 0.0, 4.0], [-0.2, 0.1, 5.0], [0.0, 0.0, -5.0]], 0.4, 0.8, [RED, BLUE, RED])
    means = gaussians[0].clone().requires_grad_()
    image, alpha, meta = rasterize_reference(means, *gaussians[1:], viewmats, Ks, 32, 32)
    meta["means2d"].retain_grad()
    weights = torch.rand(image.shape, generator=torch.Generator().manual_seed(0))
    ((image * weights).sum() + alpha.sum()).backward()

    grad = meta["means2d"].grad
    assert grad is not None and grad.shape == (1, 3, 2)
    assert grad[0, :2].abs().sum(dim=-1).min() > 0
    assert (grad[0, 2] == 0).all()
    assert torch.isfinite(means.grad).all() and (means.grad[2] == 0).all()

    leaf_means2d = meta["means2d"].detach().requires_grad_()
    colors = torch.tensor([[RED, BLUE, RED]])
    image_2d, alpha_2d, _ = rasterize_to_pixels_reference(
        leaf_means2d, meta["conics"].detach(), colors, meta["opacities"].detach(), meta["radii"], meta["depths"], 32, 32
    )
    ((image_2d * weights).sum() + alpha_2d.sum()).backward()
    torch.testing.assert_close(grad, leaf_means2d.grad)


def test_default_strategy_accumulates_screen_gradients_from_meta():
    """gsplat's DefaultStrategy runs its pre/post-backward hooks on this meta without modification."""
    from gsplat.strategy import DefaultStrategy

    viewmats, Ks = _camera(32, 32, focal=30.0)
    tensors = _gaussians([[0.1, 0.0, 4.0], [0.0, 0.0, -5.0]], 0.4, 0.8, [RED, BLUE])
    names = ("means", "quats", "scales", "opacities", "colors")
    params = torch.nn.ParameterDict({name: torch.nn.Parameter(t) for name, t in zip(names, tensors)})
    optimizers = {name: torch.optim.Adam([p], lr=1e-3) for name, p in params.items()}
    strategy = DefaultStrategy(absgrad=False)
    state = strategy.initialize_state()
    image, _, info = rasterize_reference(
        *(params[name] for name in names), viewmats, Ks, 32, 32, packed=False, absgrad=False
    )
    strategy.step_pre_backward(params, optimizers, state, step=1, info=info)
    image.sum().backward()
    strategy.step_post_backward(params, optimizers, state, step=1, info=info, packed=False)

    assert state["count"].tolist() == [1.0, 0.0]
    assert state["grad2d"][0] > 0 and state["grad2d"][1] == 0


@pytest.mark.parametrize("mode, channels", [("RGB", 3), ("D", 1), ("ED", 1), ("RGB+D", 4), ("RGB+ED", 4)])
def test_render_modes_shapes_and_expected_depth(mode, channels):
    viewmats, Ks = _camera(24, 16, focal=20.0)
    gaussians = _gaussians([[0.0, 0.0, 4.0], [0.1, 0.0, 6.0]], 0.5, 0.7, [RED, BLUE])
    image, alpha, meta = rasterize_reference(*gaussians, viewmats, Ks, 24, 16, render_mode=mode)
    depth_sum, _, _ = rasterize_reference(*gaussians, viewmats, Ks, 24, 16, render_mode="D")

    assert image.shape == (1, 16, 24, channels) and alpha.shape == (1, 16, 24, 1)
    assert meta["n_cameras"] == 1 and meta["width"] == 24 and meta["height"] == 16 and meta["gaussian_ids"] is None
    if mode.endswith("ED"):
        torch.testing.assert_close(image[..., -1:], depth_sum / alpha.clamp(min=1e-10))
        assert 4.0 <= image[0, 8, 12, -1] <= 6.0


def test_each_camera_renders_as_if_alone():
    viewmats, Ks = _camera(24, 16, focal=20.0)
    moved = viewmats.clone()
    moved[0, 0, 3] = 0.3
    gaussians = _gaussians([[0.0, 0.0, 4.0], [0.2, -0.1, 6.0]], 0.5, 0.7, [RED, BLUE])
    images, _, meta = rasterize_reference(*gaussians, torch.cat([viewmats, moved]), Ks.repeat(2, 1, 1), 24, 16)
    alone, _, _ = rasterize_reference(*gaussians, moved, Ks, 24, 16)

    assert meta["radii"].shape == (2, 2) and meta["means2d"].shape == (2, 2, 2)
    torch.testing.assert_close(images[1:], alone)


@pytest.mark.parametrize(
    "override, message",
    [
        (dict(absgrad=True), "absgrad"),
        (dict(packed=True), "packed=False"),
        (dict(render_mode="RGBD"), "render_mode"),
        (dict(opacities=torch.ones(3)), "opacities"),
        (dict(colors=torch.ones(2, 4, 3), sh_degree=2), "sh_degree 2 needs 9"),
        (dict(backgrounds=torch.ones(1, 4)), "backgrounds"),
    ],
)
def test_unsupported_or_malformed_arguments_raise(override, message):
    viewmats, Ks = _camera(16, 16, focal=10.0)
    means, quats, scales, opacities, colors = _gaussians([[0.0, 0.0, 4.0], [0.1, 0.0, 6.0]], 0.5, 0.7, [RED, BLUE])
    kwargs = dict(means=means, quats=quats, scales=scales, opacities=opacities, colors=colors, viewmats=viewmats, Ks=Ks)
    kwargs.update(override)
    with pytest.raises(ValueError, match=message):
        rasterize_reference(**kwargs, width=16, height=16)


def _relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    return ((value - reference).norm() / reference.norm().clamp(min=1e-12)).item()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA and gsplat's CUDA extension")
def test_matches_gsplat_cuda_forward_and_gradients():
    """Same images and gradients as gsplat's CUDA rasterizer on 3000 random Gaussians (relative errors printed)."""
    from gsplat.rendering import rasterization

    generator = torch.Generator().manual_seed(0)
    count, width, height = 3000, 160, 120
    means = torch.randn(count, 3, generator=generator) * torch.tensor([1.5, 1.0, 1.0]) + torch.tensor([0.0, 0.0, 5.0])
    inputs = {
        "means": means,
        "quats": torch.randn(count, 4, generator=generator),
        "scales": torch.rand(count, 3, generator=generator) * 0.08 + 0.01,
        "opacities": torch.rand(count, generator=generator),
        "colors": torch.randn(count, 16, 3, generator=generator) * 0.3,
    }
    viewmats, Ks = _camera(width, height, focal=120.0, device="cuda")
    backgrounds = torch.tensor([[0.2, 0.3, 0.4]], device="cuda")
    upstream = torch.rand(1, height, width, 4, generator=generator).cuda()
    outputs = {}
    for name, rasterize in (("gsplat", rasterization), ("reference", rasterize_reference)):
        leaves = {key: value.cuda().requires_grad_() for key, value in inputs.items()}
        image, alpha, meta = rasterize(
            **leaves, viewmats=viewmats, Ks=Ks, width=width, height=height, sh_degree=3,
            backgrounds=backgrounds, render_mode="RGB+ED", packed=False,
        )
        meta["means2d"].retain_grad()
        ((image * upstream).sum() + alpha.sum()).backward()
        outputs[name] = {"image": image, "alpha": alpha, "radii": meta["radii"], "means2d": meta["means2d"].grad}
        outputs[name].update({f"d_{key}": leaf.grad for key, leaf in leaves.items()})

    errors = {
        key: _relative_error(outputs["reference"][key].float(), outputs["gsplat"][key].float())
        for key in outputs["gsplat"]
    }
    print("relative errors vs gsplat CUDA:", {key: f"{error:.2e}" for key, error in errors.items()})
    assert torch.equal(outputs["reference"]["radii"], outputs["gsplat"]["radii"])
    # measured on an H200: about 1e-6 for images and gradients; the bounds leave room for float32 threshold flips
    assert errors["image"] < 1e-4 and errors["alpha"] < 1e-4
    assert max(error for key, error in errors.items() if key.startswith("d_") or key == "means2d") < 1e-3
