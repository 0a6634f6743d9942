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
from test_stock_equivalence import GAUSSIAN_GROUPS, plain_adam_step  # noqa: E402

from odin_ns.benchmarks.host_waits import in_process_trainer  # noqa: E402
from odin_ns.data.demo_scene import generate_demo_scene  # noqa: E402


def visible_rows_adam(lazy: bool):
    @torch.no_grad()
    def gaussian_step(trainer) -> None:
        model = trainer.pipeline.model
        rows = (model.info["radii"] > 0).any(dim=0)
        for name in GAUSSIAN_GROUPS:
            optimizer = trainer.optimizers.optimizers[name]
            group = optimizer.param_groups[0]
            param = group["params"][0]
            state = optimizer.state.setdefault(param, {})
            if "exp_avg" not in state:
                state.update(exp_avg=torch.zeros_like(param), exp_avg_sq=torch.zeros_like(param), step=torch.tensor(0.0))
            if state.get("last_seen") is None or state["last_seen"].shape[0] != param.shape[0]:
                state["last_seen"] = torch.full((param.shape[0],), float(state["step"]))  # rows new since: not stale
            state["step"] += 1
            beta1, beta2 = group["betas"]
            step = float(state["step"])
            exp_avg, exp_avg_sq = state["exp_avg"][rows], state["exp_avg_sq"][rows]
            if lazy:  # the steps each visible row went unseen since its last update
                unseen = (step - 1 - state["last_seen"][rows]).clamp_min(0).view(-1, *([1] * (param.dim() - 1)))
                exp_avg.mul_(beta1**unseen)
                exp_avg_sq.mul_(beta2**unseen)
            grad = param.grad[rows]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(group["eps"])
            seen = param[rows]
            seen.addcdiv_(exp_avg, denom, value=-(group["lr"] / (1 - beta1**step)))
            state["exp_avg"][rows], state["exp_avg_sq"][rows], param[rows] = exp_avg, exp_avg_sq, seen
            state["last_seen"][rows] = step
    return gaussian_step


scene = Path("/tmp/adam_densify/scene")
if not scene.exists():
    generate_demo_scene(scene, num_views=40, width=128, height=96, gaussians_per_region=1500, seed=5)
steps, seeds = int(sys.argv[1]), int(sys.argv[2])
results = {}
for seed in range(seeds):
    for name, lazy in (("frozen", False), ("decayed", True)):
        torch.manual_seed(seed)
        trainer = in_process_trainer(scene, Path(f"/tmp/lazy_adam/{name}{seed}"), "cpu", warmup_length=60,
                                     refine_every=30, reset_alpha_every=10)
        for step in range(steps):
            plain_adam_step(trainer, step, gaussian_step=visible_rows_adam(lazy))
        trainer.pipeline.model.eval()
        with torch.no_grad():
            psnr = trainer.pipeline.get_average_eval_image_metrics(step=steps)["psnr"]
        results.setdefault(name, []).append(psnr)
        print(seed, name, trainer.pipeline.model.num_points, round(psnr, 3), flush=True)
for name, values in results.items():
    print(name, "mean", round(statistics.mean(values), 3), [round(v, 3) for v in values])
