"""Where odin's one-rank sync step (dense Adam) and nerfstudio's plain loop with torch Adam part, step by step, on the
tiny demo scene on the CPU: the largest difference of every Gaussian tensor after each step, then the Adam state of
the rows that differ most. Not part of odin-ns; run from the repository root: ``python <this file> STEPS``.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, "tests")
from test_stock_equivalence import adam_state, plain_adam_step, with_torch_adam  # noqa: E402

from odin_ns.benchmarks.host_waits import in_process_trainer, run_step  # noqa: E402
from odin_ns.data.demo_scene import generate_demo_scene  # noqa: E402

scene = Path("/tmp/divergence/scene")
if not scene.exists():
    generate_demo_scene(scene, num_views=24, width=64, height=48, gaussians_per_region=400, seed=3)
steps = int(sys.argv[1])
trainers = []
for name in ("odin", "plain"):
    torch.manual_seed(0)
    trainers.append(in_process_trainer(scene, Path(f"/tmp/divergence/{name}"), "cpu",
                                       runtime_options={"adam": "dense"}))
odin, plain = trainers
with_torch_adam(plain)
for step in range(steps):
    run_step(odin, step)
    plain_adam_step(plain, step)
    a, b = odin.pipeline.model.gauss_params, plain.pipeline.model.gauss_params
    print(step, {name: f"{float((a[name] - b[name]).abs().max()):.2e}" for name in a})
for name in ("quats", "opacities", "scales"):
    sa, sb = adam_state(odin, name), adam_state(plain, name)
    parted = (odin.pipeline.model.gauss_params[name] - plain.pipeline.model.gauss_params[name]).abs().amax(-1)
    rows = parted.argsort(descending=True)[:3]
    print(name, "rows", rows.tolist(), "parted by", parted[rows].tolist(),
          "exp_avg there", sb["exp_avg"][rows].tolist(),
          "moments differ by at most", float((sa["exp_avg"] - sb["exp_avg"]).abs().max()))
