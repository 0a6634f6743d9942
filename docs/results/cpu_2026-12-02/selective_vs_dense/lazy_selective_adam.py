"""Would Selective Adam lose less if an unseen row's moments decayed while it is unseen? On the CPU, through heavy
densification (the scene and schedule of adam_through_densification.py), nerfstudio's plain loop with the Gaussians
stepped by Adam written out on the visible rows only, (a) as odin's Selective Adam does (moments of unseen rows
frozen) and (b) with each row's moments decayed by beta ** k on its next visible step, k being the steps it went
unseen (the decay dense Adam applies, without dense Adam's momentum drift of unseen rows). Held-out PSNR after STEPS
steps for SEEDS seeds. Not part of odin-ns; from the repository root: ``python <this file> STEPS SEEDS``.
"""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, "tests")
from test_stock_equivalence import plain_adam_step, selective_adam_on_visible_rows  # noqa: E402

from odin_ns.in_process import in_process_trainer  # noqa: E402
from odin_ns.data.demo_scene import generate_demo_scene  # noqa: E402
from odin_ns.gaussians import GAUSSIAN_GROUPS  # noqa: E402


@torch.no_grad()
def decayed_then_selective(trainer) -> None:
    """Each visible row's moments decayed by beta ** k for the k steps since its last update, then the test's
    Selective Adam written out (frozen moments alone are that function by itself)."""
    rows = (trainer.pipeline.model.info["radii"] > 0).any(dim=0)
    for name in GAUSSIAN_GROUPS:
        optimizer = trainer.optimizers.optimizers[name]
        group = optimizer.param_groups[0]
        param = group["params"][0]
        state = optimizer.state.get(param, {})
        if "last_seen" not in state:  # the first step: nothing to decay
            continue
        unseen = (float(state["step"]) - state["last_seen"][rows]).clamp_min(0).view(-1, *([1] * (param.dim() - 1)))
        beta1, beta2 = group["betas"]
        state["exp_avg"][rows] = state["exp_avg"][rows] * beta1**unseen
        state["exp_avg_sq"][rows] = state["exp_avg_sq"][rows] * beta2**unseen
    selective_adam_on_visible_rows(trainer)
    for name in GAUSSIAN_GROUPS:
        optimizer = trainer.optimizers.optimizers[name]
        state = optimizer.state[optimizer.param_groups[0]["params"][0]]
        if "last_seen" not in state:  # after the first step every row counts from it (gsplat's densification and
            # opacity reset extend or zero it with the moments, whose new rows are zero)
            state["last_seen"] = torch.full((state["exp_avg"].shape[0],), float(state["step"]))
        state["last_seen"][rows] = float(state["step"])


scene = Path("/tmp/adam_densify/scene")
if not scene.exists():
    generate_demo_scene(scene, num_views=40, width=128, height=96, gaussians_per_region=1500, seed=5)
steps, seeds = int(sys.argv[1]), int(sys.argv[2])
results = {}
for seed in range(seeds):
    for name, gaussian_step in (("frozen", selective_adam_on_visible_rows), ("decayed", decayed_then_selective)):
        torch.manual_seed(seed)
        trainer = in_process_trainer(scene, Path(f"/tmp/lazy_adam/{name}{seed}"), "cpu", warmup_length=60,
                                     refine_every=30, reset_alpha_every=10)
        for step in range(steps):
            plain_adam_step(trainer, step, gaussian_step=gaussian_step)
        trainer.pipeline.model.eval()
        with torch.no_grad():
            psnr = trainer.pipeline.get_average_eval_image_metrics(step=steps)["psnr"]
        results.setdefault(name, []).append(psnr)
        print(seed, name, trainer.pipeline.model.num_points, round(psnr, 3), flush=True)
for name, values in results.items():
    print(name, "mean", round(statistics.mean(values), 3), [round(v, 3) for v in values])
