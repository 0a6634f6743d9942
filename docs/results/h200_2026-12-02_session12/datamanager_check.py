"""The training views odin's datamanager serves on cup77 against stock nerfstudio's FullImageDatamanager with the
COLMAP dataparser the bench gives stock splatfacto: for each of 70 steps, the image (as float in [0, 1]) and the
camera (pose, fx, cx) of the view served. Not part of odin-ns; from the repository root with cup77 in data/cup77:
``python <this file>``.
"""
import torch
from pathlib import Path
from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanagerConfig
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig
from odin_ns.benchmarks.host_waits import in_process_trainer
t = in_process_trainer(Path("data/cup77"), Path("/tmp/dmc"), "cpu", warmup_length=10000)
dm = t.pipeline.datamanager
stock_parser = ColmapDataParserConfig(data=Path("data/cup77"), colmap_path=Path("sparse/0"), downscale_factor=1)
stock = FullImageDatamanagerConfig(dataparser=stock_parser).setup(device="cpu")
stock_images = stock.cached_train
bad = 0
for step in range(70):
    camera, batch = dm.next_train(step)
    idx = camera.metadata["cam_idx"]; idx = idx[0] if isinstance(idx, (list, tuple)) else int(idx)
    ref = stock_images[idx]["image"]
    img = batch["image"][0] if batch["image"].dim() == 4 else batch["image"]
    same_img = img.shape == ref.shape and torch.allclose(img.float() / 255.0, ref, atol=1e-6)
    sc = stock.train_dataset.cameras[idx]
    same_cam = (torch.equal(camera.camera_to_worlds[0], sc.camera_to_worlds) and float(camera.fx[0]) == float(sc.fx)
                and float(camera.cx[0]) == float(sc.cx))
    if not (same_img and same_cam):
        bad += 1
        print("step", step, "idx", idx, "img", same_img, img.shape, ref.shape, img.dtype, ref.dtype, "cam", same_cam)
print("mismatches", bad, "of 70; batch image_idx", batch.get("image_idx"))
