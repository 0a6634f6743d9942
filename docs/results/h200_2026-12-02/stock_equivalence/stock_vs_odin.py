"""Stock splatfacto and odin-splatfacto trained in one process from the same Gaussians, on the same views in the same
order, with the same random backgrounds and (on refine steps) the same split samples: what is left between them is
the training step itself. Not part of odin-ns. From the repository root (cup77 in data/cup77), on a GPU:

    python <this file> probe DATA [STEP..]   # one step from one state at each STEP (default 0 300 699); where the
                                             # next step refines or resets, that one too; after the last, five
                                             # steps' losses
    python <this file> probe-stock-twice DATA [STEP..]  # stock's step twice from one state (default 300 699):
                                                        # the floor under probe's differences
    python <this file> ab DATA STEPS SEED..  # every arm trained STEPS steps per seed, held-out PSNR of each
    python <this file> order DATA STEPS SEED..  # odin's rlg order against a plain shuffle, and stock
    python <this file> orders DATA STEPS SEED..  # the same with dense Adam, each seed seeding the view sequences
    python <this file> sequences DATA STEPS SEED..  # odin and stock, the seed also seeding the view sequence
    python <this file> counts DATA STEPS EVERY SEED..  # Gaussian counts and held-out PSNR every EVERY steps: odin,
                                                       # stock, and stock with its SSIM's TF32 convolutions off

``probe`` copies odin's state (Gaussians, Adam moments and step, densification statistics; odin with dense Adam,
stock's optimizer; stock's learning rates set to the step's) into stock's model, runs one step of each on the same
view and prints how far the two land apart; at the end, the held-out PSNR each pipeline's evaluation gives the same
Gaussians.
``ab`` trains odin (Selective and dense Adam) and three stock arms from the same Gaussians: on odin's views with
odin's backgrounds and split seeds, on odin's views with its own draws, and on its own shuffled views and draws; one
JSON line per (seed, arm). ``counts`` trains odin's defaults, stock, and stock with cuDNN's TF32 off ("stock-exact", whose SSIM then rounds as
float32 does) from the same Gaussians, each on its own views and draws; stock and stock-exact on the same ones (the
generators reseeded before each), so what parts those two is the SSIM's rounding alone. With ``ODIN_TF32=0`` every mode
runs with cuDNN's TF32 off. ``ODIN_DOWNSCALES`` (default 2, splatfacto's) sets the resolution warm-up; the bench
trains at full resolution (0). ``ODIN_RUNTIME`` and ``ODIN_MODEL`` set odin's runtime and model options (to bisect
what of odin's step parts it from stock's: ``ODIN_RUNTIME="captured_units=False"``, with and without
``ODIN_MODEL="presized_intersections=True"``). With ``ODIN_DRY_RUN=1`` it runs on the CPU with the reference
rasterizer standing in for gsplat in stock's model (no absgrad there), to check the plumbing only.
"""
from __future__ import annotations

import ast
import copy
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import torch

DRY = os.environ.get("ODIN_DRY_RUN") == "1"
DEVICE = "cpu" if DRY else "cuda"
DOWNSCALES = int(os.environ.get("ODIN_DOWNSCALES", "2"))
"""splatfacto's resolution warm-up (halvings); the dry run's tiny scene needs 0, since odin stops halving at 120 px."""
RUNTIME_OPTIONS = dict(option.split("=", 1) for option in os.environ.get("ODIN_RUNTIME", "").split())
"""odin's runtime options (``--pipeline.odin.*``), e.g. ``ODIN_RUNTIME="captured_units=False"``; values are Python
literals."""
if os.environ.get("ODIN_TF32") == "0":
    torch.backends.cudnn.allow_tf32 = False
MODEL_OPTIONS = dict(option.split("=", 1) for option in os.environ.get("ODIN_MODEL", "").split())
"""odin's model options (``--pipeline.model.*``), e.g. ``ODIN_MODEL="presized_intersections=True"``."""

import nerfstudio.models.splatfacto as splatfacto  # noqa: E402
import torchmetrics.image.lpip  # noqa: E402
from odin_bench.stock_splatfacto import UnavailableLPIPS  # noqa: E402

torchmetrics.image.lpip.LearnedPerceptualImagePatchSimilarity = UnavailableLPIPS  # as odin_bench.stock_splatfacto
if DRY:
    from odin_ns.rendering.reference import rasterize_reference

    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    splatfacto.rasterization = lambda **kw: rasterize_reference(**{k: v for k, v in kw.items() if k != "absgrad"})

from nerfstudio.configs.method_configs import method_configs  # noqa: E402
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig  # noqa: E402

from odin_ns.in_process import in_process_trainer, run_step  # noqa: E402
from odin_ns.gaussians import GAUSSIAN_GROUPS  # noqa: E402
from odin_ns.model import training_views  # noqa: E402
from odin_ns.strategy import morton_order  # noqa: E402

STATISTICS = ("grad2d", "count", "radii")
SCRATCH = Path(tempfile.gettempdir()) / "stock_vs_odin"
"""Where the trainers write (under $TMPDIR: probes run side by side each give their own)."""


def stock_trainer(data: Path, out: Path, seed: int, sampling_seed: int = 42):
    config = copy.deepcopy(method_configs["splatfacto"])
    config.pipeline.datamanager.train_cameras_sampling_seed = sampling_seed  # its view shuffles (default 42)
    config.data = config.pipeline.datamanager.data = data
    config.pipeline.datamanager.dataparser = ColmapDataParserConfig(colmap_path=Path("sparse/0"), downscale_factor=1)
    config.output_dir, config.vis, config.machine.device_type, config.machine.seed = out, "tensorboard", DEVICE, seed
    config.pipeline.model.num_downscales = DOWNSCALES
    if DRY:
        config.pipeline.model.use_absgrad = False
        config.pipeline.model.densify_grad_thresh = 0.0002
    config.logging.steps_per_log = 1_000_000
    config.steps_per_eval_image = config.steps_per_eval_all_images = config.steps_per_save = 1_000_000
    config.set_timestamp()
    torch.manual_seed(seed)
    trainer = config.setup(local_rank=0, world_size=1)
    trainer.setup()
    return trainer


def odin_trainer(data: Path, out: Path, seed: int, adam: str, order: str = "rlg", sampling_seed: int = 42):
    """``sampling_seed`` seeds odin's plan (its view sequence), as ``train_cameras_sampling_seed`` does stock's."""
    from odin_ns.method_configs import odin_splatfacto

    datamanager = odin_splatfacto.config.pipeline.datamanager  # in_process_trainer copies the registered config
    defaults = datamanager.order, datamanager.train_cameras_sampling_seed
    datamanager.order, datamanager.train_cameras_sampling_seed = order, sampling_seed
    try:
        torch.manual_seed(seed)
        runtime = {"adam": adam, **{name: ast.literal_eval(value) for name, value in RUNTIME_OPTIONS.items()}}
        model = {name: ast.literal_eval(value) for name, value in MODEL_OPTIONS.items()}
        return in_process_trainer(data, out, DEVICE, runtime_options=runtime, num_downscales=DOWNSCALES, **model)
    finally:
        datamanager.order, datamanager.train_cameras_sampling_seed = defaults


def odin_background(step: int, view: int) -> torch.Tensor:
    """odin's training background of (step, view) (OdinSplatfactoModel._training_backgrounds)."""
    generator = torch.Generator(DEVICE).manual_seed(step * 65_537 + view)
    return torch.rand(3, generator=generator, device=DEVICE)


class Controlled:
    """A stock trainer that trains on the views odin served and, with ``odin_randomness``, with odin's backgrounds and
    split seeds (else stock's own draws from the global generator)."""

    def __init__(self, trainer, odin_randomness: bool = True):
        self.trainer, self.model = trainer, trainer.pipeline.model
        dm = trainer.pipeline.datamanager
        self.view = None
        self.step = None
        self.views_from = dm.next_train

        def next_train(step):
            data = dict(dm.cached_train[self.view])
            data["image"] = data["image"].to(dm.device)
            camera = dm.train_cameras[self.view : self.view + 1].to(dm.device)
            camera.metadata = {"cam_idx": self.view}
            return camera, data

        dm.next_train = next_train
        if not odin_randomness:
            return
        original_background = self.model._get_background_color
        self.model._get_background_color = (
            lambda: odin_background(self.step, self.view) if self.model.training else original_background())
        strategy_step = self.model.strategy.step_post_backward

        def seeded(**kw):  # odin seeds the split samples by step (OdinStrategy)
            with torch.random.fork_rng(devices=[] if DRY else [torch.device(DEVICE)]):
                torch.manual_seed(kw["step"])
                strategy_step(**kw)

        self.model.strategy.step_post_backward = seeded

    def run(self, step: int, view: Optional[int]):
        """One step on ``view``; None: on the view stock's own datamanager draws (its shuffled epochs)."""
        if view is None:
            view = int(self.views_from(step)[0].metadata["cam_idx"])
        self.step, self.view = step, view
        return float(run_step(self.trainer, step)[0])


def odin_step(trainer, step: int) -> float:
    """run_step, returning the step's loss."""
    return float(run_step(trainer, step)[0])


def served_views(odin):
    """Wrap odin's datamanager so each step's view is recorded."""
    dm = odin.pipeline.datamanager
    served = {}
    original = dm.next_train

    def next_train(step):
        camera, batch = original(step)
        served[step] = training_views(camera)[0]
        return camera, batch

    dm.next_train = next_train
    return served


def copy_initial_gaussians(odin, stock):
    for name in GAUSSIAN_GROUPS:
        with torch.no_grad():
            stock.pipeline.model.gauss_params[name].copy_(odin.pipeline.model.gauss_params[name])


@torch.no_grad()
def load_state(stock, odin, step: int):
    """Stock's Gaussians, Adam state and densification statistics := odin's; stock's learning-rate schedules := those
    of ``step`` (stock only trains the probed steps, so its schedulers would otherwise stand near their start)."""
    odin.pipeline.drain()
    sm, om = stock.pipeline.model, odin.pipeline.model
    for name in GAUSSIAN_GROUPS:
        src_opt = odin.optimizers.optimizers[name]
        src_state = src_opt.state[src_opt.param_groups[0]["params"][0]]
        new = torch.nn.Parameter(om.gauss_params[name].detach().clone())
        opt = stock.optimizers.optimizers[name]
        old = opt.param_groups[0]["params"][0]
        opt.state.pop(old, None)
        opt.param_groups[0]["params"] = [new]
        if "step" in src_state:  # no state before the first step
            opt.state[new] = {"step": torch.tensor(float(src_state["step"])),
                              "exp_avg": src_state["exp_avg"].clone(), "exp_avg_sq": src_state["exp_avg_sq"].clone()}
        sm.gauss_params[name] = new
        stock.optimizers.parameters[name] = [new]
    for key in STATISTICS:
        value = om.strategy_state.get(key)
        sm.strategy_state[key] = None if value is None else value.clone()
    for name, scheduler in stock.optimizers.schedulers.items():
        scheduler.last_epoch = step
        for group, base, factor in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
            group["lr"] = base * factor(step)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def stock_rows(stock, odin) -> torch.Tensor:
    """Stock's rows in odin's order. The two start a probe in one order; odin re-sorts its rows into Morton order
    after a structural change (the opacity reset of step 0, a refine), stock keeps gsplat's: the same sort of
    stock's near-equal positions puts its rows where odin's went."""
    strategy = odin.pipeline.model.strategy
    step = odin.pipeline.model.step
    if strategy.changes_structure(step):
        return morton_order(stock.pipeline.model.gauss_params["means"].detach())
    return torch.arange(stock.pipeline.model.num_points, device=stock.pipeline.model.device)


@torch.no_grad()
def trained_state(trainer) -> dict:
    """A trainer's Gaussians, Adam moments and densification statistics, cloned (odin's drained first)."""
    if hasattr(trainer.pipeline, "drain"):
        trainer.pipeline.drain()
    model = trainer.pipeline.model
    state = {}
    for name in GAUSSIAN_GROUPS:
        optimizer = trainer.optimizers.optimizers[name]
        adam = optimizer.state[optimizer.param_groups[0]["params"][0]]
        state[name] = {"param": model.gauss_params[name].detach().clone(),
                       **{key: adam[key].clone() for key in ("exp_avg", "exp_avg_sq")}}
    for key in STATISTICS:
        value = model.strategy_state.get(key)
        state[key] = None if value is None else value.clone()
    return state


def differences(state: dict, reference: dict, reference_rows=slice(None)) -> dict:
    """``relative`` of every tensor of ``state`` to ``reference``'s, whose rows ``reference_rows`` puts in ``state``'s
    order."""
    row = {name: {key: relative(value, reference[name][key][reference_rows]) for key, value in state[name].items()}
           for name in GAUSSIAN_GROUPS}
    for key in STATISTICS:
        a, b = state[key], reference[key]
        row[key] = None if a is None or b is None else relative(a, b[reference_rows])
    return row


def compare(stock, odin, label: str, losses):
    sm, om = stock.pipeline.model, odin.pipeline.model
    odin_state = trained_state(odin)
    row = {"probe": label, "n": [sm.num_points, om.num_points], "loss": losses}
    if sm.num_points == om.num_points:
        row.update(differences(odin_state, trained_state(stock), reference_rows=stock_rows(stock, odin)))
    print(json.dumps(row), flush=True)


def probed_pair(data: Path, out: Path):
    """odin (dense Adam) and stock from the same Gaussians: (odin, stock, the views odin serves by step, stock run on
    those views with odin's draws)."""
    odin = odin_trainer(data, out / "odin", 0, "dense")
    stock = stock_trainer(data, out / "stock", 42)
    views = served_views(odin)
    controlled = Controlled(stock)
    copy_initial_gaussians(odin, stock)
    return odin, stock, views, controlled


def probe(data: Path, steps=(0, 300, 699)):
    odin, stock, views, controlled = probed_pair(data, SCRATCH / "probe")
    strategy = odin.pipeline.model.strategy
    followed = {step + 1 for step in steps if strategy.changes_structure(step + 1)}  # stock goes on from its own state
    last = max(steps) + 1 if max(steps) + 1 in followed else max(steps)
    for step in range(last + 6):
        if step in steps:
            load_state(stock, odin, step)
        odin_loss = odin_step(odin, step)
        if step > last:  # after the last probe rows no longer pair up: compare what the two render
            print(json.dumps({"step": step, "loss": [controlled.run(step, views[step]), odin_loss]}), flush=True)
        if step in steps or step in followed:
            stock_loss = controlled.run(step, views[step])
            label = f"one step at {step}" + (f" ({'refine' if strategy.refines(step) else 'reset'}, after "
                                             f"{step - 1}'s)" if step in followed else "")
            compare(stock, odin, label, [stock_loss, odin_loss])
    load_state(stock, odin, last + 6)  # what each pipeline's evaluation makes of the same Gaussians
    print(json.dumps({"held_out_psnr_of_one_state": {"step": last + 6, "stock": held_out_psnr(stock, last + 6, False),
                                                     "odin": held_out_psnr(odin, last + 6, True)}}), flush=True)


def probe_stock_twice(data: Path, steps=(300, 699)):
    """The control for ``probe``: at each step, stock's step run twice from odin's state on the same view, background
    and split seed. How far the two land apart is what gsplat's atomic accumulation alone leaves between two runs of
    one step, the floor under ``probe``'s stock-odin differences."""
    odin, stock, views, controlled = probed_pair(data, SCRATCH / "probe_stock_twice")
    for step in range(max(steps) + 1):
        odin_step(odin, step)
        if step not in steps:
            continue
        runs, losses = [], []
        for _ in range(2):
            load_state(stock, odin, step)
            losses.append(controlled.run(step, views[step]))
            runs.append(trained_state(stock))
        print(json.dumps({"probe": f"stock twice at {step}", "loss": losses, **differences(runs[1], runs[0])}),
              flush=True)


def held_out_psnr(trainer, step: int, drains: bool) -> float:
    if drains:
        trainer.pipeline.drain()
    return float(trainer.pipeline.get_average_eval_image_metrics(step=step)["psnr"])


STOCK_ARMS = {"stock": (True, True), "stock-odin-views": (True, False), "stock-own": (False, False)}
"""Stock trainers of ``ab``: (trains on odin's views, draws backgrounds and split samples as odin does)."""


def background_statistics(views, steps: int) -> dict:
    """What odin's per-(step, view) training backgrounds look like over ``steps``: per-channel mean and standard
    deviation (uniform: 0.5, 0.289), the channels' correlation, and successive steps' correlation (both about 0)."""
    colours = torch.stack([odin_background(step, views[step]) for step in range(steps)]).double().cpu()
    centred = colours - colours.mean(0)
    channel_corr = torch.corrcoef(colours.T)
    lag = torch.corrcoef(torch.stack([centred[:-1].flatten(), centred[1:].flatten()]))[0, 1]
    return {"mean": colours.mean(0).tolist(), "std": colours.std(0).tolist(),
            "channel_corr_max": float((channel_corr - torch.eye(3, dtype=torch.double)).abs().max()),
            "successive_corr": float(lag)}


def ab(data: Path, steps: int, seeds):
    for seed in seeds:
        out = SCRATCH / f"ab{seed}"
        odins = {adam: odin_trainer(data, out / f"odin-{adam}", seed, adam) for adam in ("selective", "dense")}
        reference = odins["selective"]
        views = served_views(reference)
        for odin in odins.values():
            for name in GAUSSIAN_GROUPS:
                assert torch.equal(odin.pipeline.model.gauss_params[name], reference.pipeline.model.gauss_params[name])
        stocks = {}
        for arm, (odin_views, odin_randomness) in STOCK_ARMS.items():
            stock = stock_trainer(data, out / arm, 42 + seed)
            copy_initial_gaussians(reference, stock)
            stocks[arm] = (stock, Controlled(stock, odin_randomness), odin_views)
        seconds = {}
        for arm, trainer in [*odins.items(), *((arm, None) for arm in stocks)]:
            started = time.time()
            for step in range(steps):
                if trainer is None:
                    _, controlled, odin_views = stocks[arm]
                    controlled.run(step, views[step] if odin_views else None)
                else:
                    run_step(trainer, step)
            if DEVICE == "cuda":
                torch.cuda.synchronize()
            seconds[arm] = time.time() - started
        trainers = {**odins, **{arm: stock for arm, (stock, _, _) in stocks.items()}}
        for arm, trainer in trainers.items():
            psnr = held_out_psnr(trainer, steps, drains=arm in odins)
            print(json.dumps({"seed": seed, "arm": arm, "steps": steps, "psnr": psnr, "seconds": seconds[arm],
                              "gaussians": trainer.pipeline.model.num_points}), flush=True)
        if seed == seeds[0]:
            print(json.dumps({"odin_backgrounds": background_statistics(views, steps)}), flush=True)


def order(data: Path, steps: int, seeds, adam: str = "selective", seeded_sequences: bool = False):
    """odin with its rlg view order and with a plain shuffle per epoch, beside stock on its own views and draws, all
    from the same Gaussians. ``seeded_sequences``: each seed also seeds the view sequences (odin's plan, stock's
    shuffles: 42 + seed), else all seeds keep the default sequence (42)."""
    for seed in seeds:
        out = SCRATCH / f"order{seed}"
        sampling_seed = 42 + seed if seeded_sequences else 42
        odins = {f"odin-{name}": odin_trainer(data, out / name, seed, adam, name, sampling_seed)
                 for name in ("rlg", "random")}
        reference = odins["odin-rlg"]
        for name in GAUSSIAN_GROUPS:
            assert torch.equal(odins["odin-random"].pipeline.model.gauss_params[name], reference.pipeline.model.gauss_params[name])
        stock = stock_trainer(data, out / "stock-own", 42 + seed, sampling_seed)
        copy_initial_gaussians(reference, stock)
        controlled = Controlled(stock, odin_randomness=False)
        for arm, trainer in odins.items():
            for step in range(steps):
                run_step(trainer, step)
        for step in range(steps):
            controlled.run(step, None)
        for arm, trainer in [*odins.items(), ("stock-own", stock)]:
            psnr = held_out_psnr(trainer, steps, drains=arm != "stock-own")
            print(json.dumps({"seed": seed, "sampling_seed": sampling_seed, "adam": adam, "arm": arm, "steps": steps,
                              "psnr": psnr, "gaussians": trainer.pipeline.model.num_points}), flush=True)


def sequences(data: Path, steps: int, seeds):
    """odin (defaults) and stock on their own views and draws, from the same Gaussians, with each seed also seeding
    the view sequence (odin's plan, stock's shuffles: ``train_cameras_sampling_seed`` = 42 + seed); with the default
    both keep one sequence whatever the machine seed."""
    for seed in seeds:
        out = SCRATCH / f"sequences{seed}"
        odin = odin_trainer(data, out / "odin", seed, "selective", sampling_seed=42 + seed)
        stock = stock_trainer(data, out / "stock-own", 42 + seed, sampling_seed=42 + seed)
        copy_initial_gaussians(odin, stock)
        controlled = Controlled(stock, odin_randomness=False)
        for step in range(steps):
            run_step(odin, step)
        for step in range(steps):
            controlled.run(step, None)
        for arm, trainer in [("odin", odin), ("stock-own", stock)]:
            psnr = held_out_psnr(trainer, steps, drains=arm == "odin")
            print(json.dumps({"seed": seed, "sampling_seed": 42 + seed, "arm": arm, "steps": steps, "psnr": psnr,
                              "gaussians": trainer.pipeline.model.num_points}), flush=True)


def generator_states() -> tuple:
    return random.getstate(), torch.get_rng_state(), torch.cuda.get_rng_state_all() if DEVICE == "cuda" else None


def set_generator_states(states: tuple) -> None:
    random.setstate(states[0])
    torch.set_rng_state(states[1])
    if states[2] is not None:
        torch.cuda.set_rng_state_all(states[2])


def counts(data: Path, steps: int, every: int, seeds):
    """The arms advance together, ``every`` steps at a time, each on its own generator states."""
    torch.backends.cudnn.benchmark = True  # as ns-train sets it
    for seed in seeds:
        out = SCRATCH / f"counts{seed}"
        odin = odin_trainer(data, out / "odin", seed, "dense", sampling_seed=42 + seed)
        arms = {"odin": (odin, None, True)}  # odin runs no cuDNN convolution
        for arm, tf32 in (("stock", True), ("stock-exact", False)):
            stock = stock_trainer(data, out / arm, 42 + seed, sampling_seed=42 + seed)
            copy_initial_gaussians(odin, stock)
            arms[arm] = (stock, Controlled(stock, odin_randomness=False), tf32)
        random.seed(42 + seed)
        torch.manual_seed(42 + seed)
        states = {arm: generator_states() for arm in arms}
        seconds = dict.fromkeys(arms, 0.0)
        allow_tf32 = torch.backends.cudnn.allow_tf32
        for start in range(0, steps, every):
            for arm, (trainer, controlled, tf32) in arms.items():
                set_generator_states(states[arm])
                torch.backends.cudnn.allow_tf32 = tf32
                started = time.time()
                for step in range(start, min(start + every, steps)):
                    controlled.run(step, None) if controlled else run_step(trainer, step)
                if DEVICE == "cuda":
                    torch.cuda.synchronize()
                seconds[arm] += time.time() - started
                torch.backends.cudnn.allow_tf32 = allow_tf32
                states[arm] = generator_states()
                psnr = held_out_psnr(trainer, step + 1, drains=controlled is None)
                print(json.dumps({"seed": seed, "arm": arm, "steps": step + 1, "psnr": psnr,
                                  "gaussians": trainer.pipeline.model.num_points, "seconds": seconds[arm]}),
                      flush=True)

if __name__ == "__main__":
    mode, data = sys.argv[1], Path(sys.argv[2])
    if mode == "probe":
        probe(data, *([tuple(int(s) for s in sys.argv[3:])] if len(sys.argv) > 3 else []))
    elif mode == "probe-stock-twice":
        probe_stock_twice(data, *([tuple(int(s) for s in sys.argv[3:])] if len(sys.argv) > 3 else []))
    elif mode == "sequences":
        sequences(data, int(sys.argv[3]), [int(s) for s in sys.argv[4:]])
    elif mode == "order":
        order(data, int(sys.argv[3]), [int(s) for s in sys.argv[4:]])
    elif mode == "counts":
        counts(data, int(sys.argv[3]), int(sys.argv[4]), [int(s) for s in sys.argv[5:]])
    elif mode == "orders":
        order(data, int(sys.argv[3]), [int(s) for s in sys.argv[4:]], adam="dense", seeded_sequences=True)
    else:
        ab(data, int(sys.argv[3]), [int(s) for s in sys.argv[4:]])
