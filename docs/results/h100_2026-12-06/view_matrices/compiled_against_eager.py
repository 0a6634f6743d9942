"""The view matrices splatfacto renders cup77's training views with (nerfstudio's compiled ``get_viewmat``, one view
per call) against the same operations run eagerly, on the GPU; and the view odin trains on at each given step. Not
part of odin-ns. From the repository root, on a GPU:

    python <this file> DATA [STEP..]
"""
import json
import sys
import tempfile
from pathlib import Path

import torch
from nerfstudio.models.splatfacto import get_viewmat

from odin_ns.in_process import in_process_trainer

data, steps = Path(sys.argv[1]), [int(step) for step in sys.argv[2:]]
trainer = in_process_trainer(data, Path(tempfile.mkdtemp()), "cuda", num_downscales=0)
manager = trainer.pipeline.datamanager
poses = manager._device_train_cameras.camera_to_worlds
eager = get_viewmat._torchdynamo_orig_callable
differing = {}
for view in range(len(poses)):
    compiled, plain = get_viewmat(poses[view : view + 1]), eager(poses[view : view + 1])
    if not torch.equal(compiled, plain):
        differing[view] = {"largest difference": float((compiled - plain).abs().max()),
                           "entries": int((compiled != plain).sum())}
print(json.dumps({"training views": len(poses), "differing": differing}))
print(json.dumps({"view at step": {step: manager.plan.views_for(step, 0) for step in steps}}))
