"""Odin's one-rank sync (selective and dense Adam) against nerfstudio's plain loop with torch Adam, through
densification, on the CPU: held-out PSNR after STEPS steps for SEEDS seeds. Each configuration trains the same
generated scene (40 views of 128x96) in-process from the same initial Gaussians, on the same views in the same order,
refining every 30 steps from step 90 (warm-up 60 steps, opacity reset every 300). Not part of odin-ns; from the
repository root: ``python <this file> STEPS SEEDS``.
"""
import sys, torch, statistics
from pathlib import Path
sys.path.insert(0, "tests")
from test_stock_equivalence import plain_adam_step, with_torch_adam
from odin_ns.in_process import in_process_trainer, run_step
from odin_ns.data.demo_scene import generate_demo_scene

scene = Path("/tmp/adam_densify/scene")
if not scene.exists():
    generate_demo_scene(scene, num_views=40, width=128, height=96, gaussians_per_region=1500, seed=5)
K = int(sys.argv[1]); seeds = int(sys.argv[2])
opts = dict(warmup_length=60, refine_every=30, reset_alpha_every=10)
res = {}
for seed in range(seeds):
    for name in ("plain", "dense", "selective"):
        torch.manual_seed(seed)
        t = in_process_trainer(scene, Path(f"/tmp/adam_densify/{name}{seed}"), "cpu",
                               runtime_options={"adam": "selective" if name == "selective" else "dense"}, **opts)
        if name == "plain":
            with_torch_adam(t)
        for step in range(K):
            (plain_adam_step if name == "plain" else run_step)(t, step)
        if name != "plain":
            t.pipeline.drain()
        t.pipeline.model.eval()
        with torch.no_grad():
            m = t.pipeline.get_average_eval_image_metrics(step=K)
        res.setdefault(name, []).append(m["psnr"])
        print(seed, name, t.pipeline.model.num_points, round(m["psnr"], 3), flush=True)
for name, v in res.items():
    print(name, "mean", round(statistics.mean(v), 3), [round(x, 3) for x in v])
