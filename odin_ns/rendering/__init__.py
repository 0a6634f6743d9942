"""Renderer backends: gsplat's CUDA rasterizer on GPU, the pure-torch reference elsewhere.

Both take gsplat's ``rasterization`` keyword arguments and return ``(colors, alphas, info)`` with the ``info``
fields gsplat's densification strategy reads, so the model switches backend by function only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Literal

import torch

if TYPE_CHECKING:
    from nerfstudio.cameras.cameras import Cameras

RendererName = Literal["auto", "gsplat", "reference"]


def gsplat_cuda_available() -> bool:
    """True when gsplat's compiled CUDA extension can be used on this machine."""
    if not torch.cuda.is_available():
        return False
    from gsplat.cuda._backend import _C

    return _C is not None


def resolve_renderer(requested: RendererName, device: torch.device) -> Literal["gsplat", "reference"]:
    """Pick the backend for ``device``: gsplat for CUDA tensors, the torch reference otherwise."""
    if requested == "reference":
        return "reference"
    on_cuda = device.type == "cuda"
    if requested == "gsplat":
        if not (on_cuda and gsplat_cuda_available()):
            raise ValueError(f"renderer 'gsplat' needs CUDA tensors and gsplat's CUDA extension; got device {device}")
        return "gsplat"
    return "gsplat" if on_cuda and gsplat_cuda_available() else "reference"


def world_to_camera(camera_to_worlds: torch.Tensor) -> torch.Tensor:
    """[C, 4, 4] world-to-camera matrices (OpenCV axes) from nerfstudio's [C, 3, 4] camera-to-world poses: OpenGL axes
    to OpenCV's (y and z flipped), then the rigid inverse, operation for operation what nerfstudio's ``get_viewmat``
    computes, run eagerly (the host's predictions, in float64). Renders take ``splatfacto_view_matrices``."""
    inverse_rotation = _opencv_rotation(camera_to_worlds).transpose(1, 2)
    translation = -torch.bmm(inverse_rotation, camera_to_worlds[:, :3, 3:4])
    return _homogeneous(inverse_rotation, translation)


def splatfacto_view_matrices(camera_to_worlds: torch.Tensor) -> torch.Tensor:
    """[C, 4, 4] the world-to-camera matrices splatfacto renders the poses with: nerfstudio's compiled ``get_viewmat``,
    one view per call as splatfacto calls it, so that they are its matrices bit for bit whatever batching or
    compilation would change in the rounding (an ulp in a view matrix moves every pixel of the view, and the L1
    gradient's sign wherever a pixel meets its target). Compiled once per process (a one-view batch)."""
    from nerfstudio.models.splatfacto import get_viewmat

    return torch.cat([get_viewmat(camera_to_worlds[view : view + 1]) for view in range(len(camera_to_worlds))])


def view_inverses(viewmats: torch.Tensor) -> torch.Tensor:
    """[C, 4, 4] the inverse of each view matrix as gsplat's ``rasterization`` computes it when it renders that view
    alone (``torch.inverse`` of a one-view batch, on the matrices' device), for the cameras' centres of its SH
    colours' view directions. Handed to gsplat in place of its own inversion, it keeps odin's colours stock
    splatfacto's bit for bit (a pose's translation differs from the LU inverse's by rounding, and a colour that
    differs by 1e-7 flips the sign of the L1 gradient wherever a pixel meets its target), while the LU's launches
    and its singularity check's host read happen once per view instead of on every render."""
    return torch.cat([torch.linalg.inv_ex(viewmats[view : view + 1]).inverse for view in range(len(viewmats))])


def _opencv_rotation(camera_to_worlds: torch.Tensor) -> torch.Tensor:
    """The poses' rotations with nerfstudio's OpenGL camera axes turned into OpenCV's (y and z flipped)."""
    return torch.cat([camera_to_worlds[:, :3, :1], -camera_to_worlds[:, :3, 1:3]], dim=2)


def _homogeneous(rotation: torch.Tensor, translation: torch.Tensor) -> torch.Tensor:
    """[C, 4, 4] from [C, 3, 3] rotations and [C, 3, 1] translations."""
    bottom = rotation.new_zeros((rotation.shape[0], 1, 4))
    bottom[..., 3] = 1.0
    return torch.cat([torch.cat([rotation, translation], dim=2), bottom], dim=1)


def scaled_intrinsics(camera: "Cameras", scale: float) -> torch.Tensor:
    """[C, 3, 3] pinhole intrinsics of ``camera`` rendered at ``scale`` times its resolution, built where the camera
    lives: nerfstudio's ``rescale_output_resolution`` and ``get_intrinsics_matrices`` round-trip through host tensors,
    each a copy the host waits for."""
    fx, fy, cx, cy = (getattr(camera, name)[:, 0] * scale for name in ("fx", "fy", "cx", "cy"))
    zeros, ones = torch.zeros_like(fx), torch.ones_like(fx)
    return torch.stack([fx, zeros, cx, zeros, fy, cy, zeros, zeros, ones], dim=-1).view(-1, 3, 3)


def rasterize_fn(renderer: Literal["gsplat", "reference"]) -> Callable:
    """The rasterization function of a resolved backend."""
    if renderer == "gsplat":
        from gsplat.rendering import rasterization

        return rasterization
    from odin_ns.rendering.reference import rasterize_reference

    return rasterize_reference


@torch.no_grad()
def project_visibility(
    renderer: Literal["gsplat", "reference"],
    means: torch.Tensor,
    quats: torch.Tensor,
    scales: torch.Tensor,
    viewmats: torch.Tensor,
    Ks: torch.Tensor,
    width: int,
    height: int,
    near_plane: float,
    far_plane: float,
) -> torch.Tensor:
    """bool [N]: Gaussians with a non-zero screen radius in any camera, by the same projection the backend renders
    with (so it equals ``rasterize(...)[2]["radii"] > 0``), without rasterizing: Odin's cheap read-scope pass."""
    if renderer == "gsplat":
        from gsplat.cuda._wrapper import fully_fused_projection

        radii = fully_fused_projection(
            means, None, quats, scales, viewmats, Ks, width, height, near_plane=near_plane, far_plane=far_plane
        )[0]
    else:
        from gsplat.cuda._torch_impl import _fully_fused_projection, _quat_scale_to_covar_preci

        covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=False, triu=False)
        radii = _fully_fused_projection(means, covars, viewmats, Ks, width, height, near_plane=near_plane, far_plane=far_plane)[0]
    return (radii > 0).any(dim=0)
