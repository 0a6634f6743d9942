"""gsplat's own multi-GPU training (Grendel-style) as an external benchmark peer.

Each rank holds a 1/W shard of the Gaussians (rows ``rank::W``, as gsplat's ``simple_trainer`` splits them) and
renders its own view per step with ``gsplat.rendering.rasterization(..., distributed=True)``: projection runs where a
Gaussian lives, the projected Gaussians are exchanged all-to-all to the ranks whose cameras see them, and gradients
flow back the same way; each rank then steps Adam on its shard only, so there is no gradient all-reduce at all.

Driven with the same data and splits (``odin-data``), initialisation (``odin_ns.model.initial_gaussians``),
learning rates, batch scaling (``odin_ns.batch``), loss (splatfacto's 0.8 L1 + 0.2 D-SSIM), SH schedule,
number of steps and views per step as ``ns-train odin-splatfacto``. Not the same: no densification (gsplat's strategies
assume every rank sees all of its Gaussians' screen-space statistics, which sharding breaks), so compare it against
Odin runs with densification off (``--pipeline.model.stop-split-at 0``) for quality. Launch:
``torchrun --nproc-per-node W -m odin_bench.gsplat_distributed --data DIR --steps S --output-dir OUT``.
Writes ``OUT/peer.json`` (per-step seconds, Gaussians, image size) and ``OUT/eval.json`` (held-out PSNR/SSIM, the
layout ``ns-eval`` writes).
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import torch
import tyro
from tqdm import tqdm

from odin_ns.comm.context import DistContext
from odin_ns.model import initial_gaussians

BACKGROUND_FOR_EVAL = (0.1490, 0.1647, 0.2157)
"""The background odin-splatfacto evaluates with (viser's), so PSNR/SSIM compare with ns-eval's figures."""


@dataclass
class GsplatDistributedCommand:
    """Train with gsplat's distributed rasterization (Gaussians sharded over ranks) and evaluate held-out views."""

    data: Path
    """Dataset (COLMAP capture or transforms.json scene), read with odin-data."""
    output_dir: Path
    """Where peer.json and eval.json are written (by rank 0)."""
    steps: int = 1000
    """Training steps; every rank renders one view per step."""
    seed: int = 42
    """Seed of the view order, initial rotations and backgrounds."""
    renderer: str = "gsplat"
    """gsplat (CUDA, distributed); reference only for a single-rank CPU smoke test of this driver."""

    def main(self) -> None:
        context = _join_process_group(self.renderer)
        rank, world_size, device = context.rank, context.world_size, context.device
        torch.manual_seed(self.seed)
        config = _method_config(self.data, world_size)
        train, test = _load_split(config, "train"), _load_split(config, "test")
        shard = {name: tensor[rank::world_size].to(device).requires_grad_()
                 for name, tensor in initial_gaussians(config.pipeline.model, train["seed_points"]).items()}
        optimizers, schedulers = _optimizers(config, shard)
        model_config = config.pipeline.model
        render = _renderer(self.renderer, world_size)
        from pytorch_msssim import SSIM

        ssim = SSIM(data_range=1.0, size_average=True, channel=3)
        generator = torch.Generator().manual_seed(self.seed)
        order: List[int] = []
        step_seconds = []
        for step in tqdm(range(self.steps), desc="gsplat-distributed", disable=rank != 0):
            started = time.perf_counter()
            if len(order) < world_size:
                order += torch.randperm(len(train["images"]), generator=generator).tolist()
            view, order = order[rank], order[world_size:]
            sh_degree = min(step // model_config.sh_degree_interval, model_config.sh_degree)
            background = torch.rand(3, generator=torch.Generator().manual_seed(step * 65_537 + rank)).to(device)
            target = _composite(train["images"][view].to(device), background)
            image, alpha = render(shard, train["viewmats"][view].to(device), train["Ks"][view].to(device),
                                  train["size"], sh_degree)
            predicted = image + (1 - alpha) * background
            l1 = (predicted - target).abs().mean()
            dssim = 1 - ssim(target.permute(2, 0, 1)[None], predicted.permute(2, 0, 1)[None])
            loss = (1 - model_config.ssim_lambda) * l1 + model_config.ssim_lambda * dssim
            loss.backward()
            for optimizer in optimizers:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            for scheduler in schedulers:
                scheduler.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            step_seconds.append(time.perf_counter() - started)
        quality = _evaluate(shard, test, render, model_config.sh_degree, ssim, device)
        total = context.reduce_statistics({"gaussians": torch.tensor([len(shard["means"])], device=device)},
                                          {"gaussians": "sum"})["gaussians"]
        if rank == 0:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            record = {"step_s": step_seconds, "ranks": world_size, "num_gaussians": int(total.item()),
                      "image_size": list(train["size"]), "views_per_step": world_size, "densification": False}
            (self.output_dir / "peer.json").write_text(json.dumps(record))
            (self.output_dir / "eval.json").write_text(json.dumps({"results": quality}))
            print(f"gsplat-distributed: {world_size} ranks, {int(total.item())} Gaussians, "
                  f"PSNR {quality['psnr']:.3f} SSIM {quality['ssim']:.4f}")
        context.destroy()


def _join_process_group(renderer: str) -> DistContext:
    """torchrun's ranks join over NCCL (gsplat's distributed mode is CUDA only); a single process needs no group."""
    from odin_ns.trainer import launched_by_torchrun

    if renderer == "gsplat" and not torch.cuda.is_available():
        raise SystemExit("error: gsplat's distributed rasterization needs CUDA GPUs")
    if renderer != "gsplat" and launched_by_torchrun():
        raise SystemExit("error: the reference renderer runs this peer on a single rank only")
    if launched_by_torchrun():
        return DistContext.from_torchrun(backend="nccl")
    return DistContext.single("cuda" if renderer == "gsplat" else "cpu")


def _method_config(data: Path, world_size: int):
    """odin-splatfacto's configuration with Odin's batch scaling for ``world_size`` views per step, as the trainer
    applies it (the model's view-counted schedules, the SH interval among them, come back counted in steps)."""
    from odin_ns.batch import scale_run_for_batch
    from odin_ns.method_configs import odin_splatfacto

    config = copy.deepcopy(odin_splatfacto.config)
    config.pipeline.datamanager.dataparser.data = data
    scale_run_for_batch(config, world_size)
    return config


def _load_split(config, split: str) -> Dict:
    """Images (float, RGB or RGBA), gsplat cameras and seed points of one split, as odin-splatfacto reads them."""
    from nerfstudio.data.datasets.base_dataset import InputDataset
    from nerfstudio.models.splatfacto import get_viewmat

    outputs = config.pipeline.datamanager.dataparser.setup().get_dataparser_outputs(split)
    dataset = InputDataset(outputs)
    cameras = outputs.cameras
    return {
        "images": [torch.from_numpy(dataset.get_numpy_image(i)).float() / 255 for i in range(len(dataset))],
        "viewmats": get_viewmat(cameras.camera_to_worlds)[:, None],
        "Ks": cameras.get_intrinsics_matrices()[:, None],
        "size": (int(cameras.width[0, 0]), int(cameras.height[0, 0])),
        "seed_points": (outputs.metadata["points3D_xyz"], outputs.metadata["points3D_rgb"])
        if "points3D_xyz" in outputs.metadata else None,
    }


def _optimizers(config, shard: Dict[str, torch.Tensor]):
    """One Adam per Gaussian group with odin-splatfacto's (batch-scaled) learning rate, eps, betas and schedule."""
    optimizers, schedulers = [], []
    for name, tensor in shard.items():
        settings = config.optimizers[name]
        optimizer_config = settings["optimizer"]
        optimizer = torch.optim.Adam([tensor], lr=optimizer_config.lr, eps=optimizer_config.eps,
                                     betas=optimizer_config.betas)
        optimizers.append(optimizer)
        if settings["scheduler"] is not None:
            schedulers.append(settings["scheduler"].setup().get_scheduler(optimizer, optimizer_config.lr))
    return optimizers, schedulers


def _renderer(renderer: str, world_size: int):
    """Render one view from the local shard: gsplat distributed across ranks, or the CPU reference (one rank)."""
    if renderer == "gsplat":
        from gsplat.rendering import rasterization
    else:
        from odin_ns.rendering.reference import rasterize_reference as rasterization

    def render(shard, viewmat, K, size, sh_degree):
        colors = torch.cat([shard["features_dc"][:, None], shard["features_rest"]], dim=1)
        options = {"distributed": world_size > 1} if renderer == "gsplat" else {}
        image, alpha, _ = rasterization(
            means=shard["means"], quats=shard["quats"], scales=torch.exp(shard["scales"]),
            opacities=torch.sigmoid(shard["opacities"]).squeeze(-1), colors=colors, viewmats=viewmat, Ks=K,
            width=size[0], height=size[1], near_plane=0.01, far_plane=1e10, sh_degree=sh_degree, packed=False,
            **options,
        )
        return image[0], alpha[0]

    return render


def _composite(image: torch.Tensor, background: torch.Tensor) -> torch.Tensor:
    """RGBA targets over the background, as splatfacto composites them."""
    if image.shape[-1] == 4:
        return image[..., :3] * image[..., 3:] + (1 - image[..., 3:]) * background
    return image


@torch.no_grad()
def _evaluate(shard, test: Dict, render, sh_degree: int, ssim, device) -> Dict[str, float]:
    """Mean PSNR/SSIM over held-out views; every rank renders each view (distributed rendering needs them all)."""
    background = torch.tensor(BACKGROUND_FOR_EVAL, device=device)
    psnrs, ssims = [], []
    for view, image in enumerate(test["images"]):
        target = _composite(image.to(device), background)
        rendered, alpha = render(shard, test["viewmats"][view].to(device), test["Ks"][view].to(device),
                                 test["size"], sh_degree)
        predicted = torch.clamp(rendered + (1 - alpha) * background, 0.0, 1.0)
        mse = torch.mean((predicted - target) ** 2)
        psnrs.append(float(-10 * torch.log10(mse)))
        ssims.append(float(ssim(target.permute(2, 0, 1)[None], predicted.permute(2, 0, 1)[None])))
    return {"psnr": sum(psnrs) / len(psnrs), "ssim": sum(ssims) / len(ssims), "num_views": len(psnrs)}


def entrypoint() -> None:
    tyro.cli(GsplatDistributedCommand).main()


if __name__ == "__main__":
    entrypoint()
