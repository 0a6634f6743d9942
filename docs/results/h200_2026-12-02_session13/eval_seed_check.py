"""Odin's cup77 held-out split, seed points and initial Gaussians against stock nerfstudio's COLMAP dataparser and FullImageDatamanager (the bench's stock arguments). Not part of odin-ns; from the repository root: ``python <this file>``."""
import torch, numpy as np
from pathlib import Path
from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanagerConfig
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig
from odin_ns.benchmarks.host_waits import in_process_trainer
t = in_process_trainer(Path("data/cup77"), Path("/tmp/dmc"), "cpu", warmup_length=10000)
dm = t.pipeline.datamanager
stock_parser = ColmapDataParserConfig(data=Path("data/cup77"), colmap_path=Path("sparse/0"), downscale_factor=1)
stock = FullImageDatamanagerConfig(dataparser=stock_parser).setup(device="cpu")
print("train", len(dm.train_dataset), len(stock.train_dataset), "eval", len(dm.eval_dataset), len(stock.eval_dataset))
print("eval filenames equal", [p.name for p in dm.eval_dataset.image_filenames] == [p.name for p in stock.eval_dataset.image_filenames])
for name in ("camera_to_worlds", "fx", "fy", "cx", "cy", "width", "height"):
    a, b = getattr(dm.eval_dataset.cameras, name), getattr(stock.eval_dataset.cameras, name)
    print("eval cam", name, torch.equal(a, b))
oi = dm.cached_eval if hasattr(dm, "cached_eval") else None
print("odin eval cache type", type(oi))
for i in range(len(stock.eval_dataset)):
    ref = stock.cached_eval[i]["image"]
    ours = dm.cached_eval[i]["image"] if oi is not None else dm.eval_dataset[i]["image"]
    ours = ours.float() / 255 if ours.dtype == torch.uint8 else ours
    if not (ours.shape == ref.shape and torch.allclose(ours, ref, atol=1e-6)):
        print("eval image differs", i, ours.shape, ref.shape)
so = dm.train_dataparser_outputs.metadata; ss = stock.train_dataparser_outputs.metadata
print("seed xyz equal", torch.equal(so["points3D_xyz"], ss["points3D_xyz"]), "rgb", torch.equal(so["points3D_rgb"], ss["points3D_rgb"]))
print("scale", dm.train_dataparser_outputs.dataparser_scale, stock.train_dataparser_outputs.dataparser_scale)
m = t.pipeline.model
print("model seed points", m.seed_points[0].shape, "N", m.num_points)
gp = m.gauss_params
print({k: (tuple(v.shape), float(v.float().mean())) for k, v in gp.items()})
