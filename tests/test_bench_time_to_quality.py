"""odin-bench time-to-quality: its reading of the curves and of stock's checkpoints, and odin's runs on the CPU
(scoring leaves training untouched; a run split by its budget resumes to the same curves). Stock's training needs
gsplat's CUDA kernels and is exercised on the GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from odin_bench.time_to_quality import (
    STOCK,
    STOCK_CHECKPOINT_GLOBALS,
    TimeToQualityCommand,
    TimeToQualityReportCommand,
    summary_table,
    time_to_reach,
)


def curve(points):
    return [{"views": views, "train_s": seconds, "psnr": psnr} for views, seconds, psnr in points]


def test_time_to_reach_is_the_first_evaluation_at_or_above_the_target():
    points = curve([(1000, 10.0, 20.0), (2000, 20.0, 24.5), (3000, 30.0, 24.0), (4000, 40.0, 25.0)])
    assert time_to_reach(points, 24.5) == (20.0, 2000)
    assert time_to_reach(points, 25.0) == (40.0, 4000)
    assert time_to_reach(points, 25.1) is None


def test_the_table_gives_each_configurations_time_to_stocks_final_psnr_as_a_share_of_stocks():
    results = {
        STOCK: {"curve": curve([(1000, 50.0, 22.0), (2000, 100.0, 24.0)]), "done": True},
        "odin-b1": {"curve": curve([(1000, 20.0, 23.0), (2000, 40.0, 24.2)]), "done": True},
        "odin-b4": {"curve": curve([(1000, 10.0, 21.0)])},
    }
    table = summary_table(results, [STOCK, "odin-b1"]).splitlines()
    assert table[2].startswith("| stock | 2,000 | 24.000 | 100.0 | 100.0 | 2,000 | 1.00 |")
    assert table[3].startswith("| odin-b1 | 2,000 | 24.200 | 40.0 | 40.0 | 2,000 | 0.40 |")
    assert table[4].startswith("| odin-b4 (in progress) | 1,000 | 21.000 | 10.0 | not reached")


def test_stock_can_come_from_an_earlier_run_and_a_mismatched_one_is_refused_in_one_line(tmp_path: Path, capsys):
    earlier = tmp_path / "earlier.json"
    stock = {"curve": curve([(1000, 50.0, 22.0), (2000, 100.0, 24.0)]), "done": True}
    earlier.write_text(json.dumps({STOCK: stock, "odin-b1": {"curve": curve([(2000, 40.0, 24.2)]), "done": True}}))
    out = tmp_path / "out"
    TimeToQualityCommand(data=tmp_path, views=2000, views_per_step=(), stock_from=earlier, out=out).main()
    results = json.loads((out / "results.json").read_text())
    assert results.keys() == {STOCK} and results[STOCK]["curve"] == stock["curve"]
    assert results[STOCK]["from"] == str(earlier)
    assert "| stock | 2,000 | 24.000 | 100.0 |" in capsys.readouterr().out and (out / "time_to_quality.png").exists()
    with pytest.raises(SystemExit, match="^error: --stock-from .*: stock trained to 2,000 views, this run to 30,000$"):
        TimeToQualityCommand(data=tmp_path, views=30_000, stock_from=earlier, out=out).main()
    earlier.write_text(json.dumps({STOCK: {**stock, "done": False}}))
    with pytest.raises(SystemExit, match="no finished stock run in it"):
        TimeToQualityCommand(data=tmp_path, views=2000, stock_from=earlier, out=out).main()
    with pytest.raises(SystemExit, match="^error: --stock-from .*missing.json: "):
        TimeToQualityCommand(data=tmp_path, views=2000, stock_from=tmp_path / "missing.json", out=out).main()


def write_run(path: Path, stock_points, odin_points, odin_done=True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({STOCK: {"curve": curve(stock_points), "done": True},
                                "odin-b1": {"curve": curve(odin_points), "done": odin_done}}))
    return path


def test_the_report_sets_each_run_against_its_own_stock_and_averages_over_runs(tmp_path: Path, capsys):
    first = write_run(tmp_path / "seed0" / "results.json", [(1000, 50.0, 22.0), (2000, 100.0, 24.0)],
                      [(1000, 20.0, 24.5), (2000, 40.0, 23.5)])
    second = write_run(tmp_path / "seed1" / "results.json", [(1000, 60.0, 21.0), (2000, 120.0, 23.0)],
                       [(1000, 30.0, 22.0), (2000, 60.0, 23.3)])
    unfinished = write_run(tmp_path / "seed2" / "results.json", [(1000, 50.0, 22.0), (2000, 100.0, 24.0)],
                           [(1000, 20.0, 30.0)], odin_done=False)
    out = tmp_path / "report"
    TimeToQualityReportCommand(results=(first, second, unfinished), last=2, out=out).main()
    summary = json.loads((out / "summary.json").read_text())
    rows = {row["run"]: row for row in summary["runs"]}
    assert rows.keys() == {"seed0", "seed1"}  # seed2's odin run is not finished
    assert rows["seed0"]["final_difference"] == pytest.approx(-0.5)
    assert rows["seed0"]["last_mean_difference"] == pytest.approx((24.5 + 23.5) / 2 - (22.0 + 24.0) / 2)
    assert rows["seed0"]["reached_share"] == pytest.approx(20.0 / 100.0)  # first evaluation at or above 24.0
    assert rows["seed1"]["reached_share"] == pytest.approx(60.0 / 120.0) and rows["seed1"]["train_share"] == 0.5
    entry = summary["configurations"]["odin-b1"]
    assert entry["runs"] == 2 and entry["reached"] == 2
    assert entry["final_difference"] == pytest.approx((-0.5 + 0.3) / 2)
    assert entry["final_difference_error"] == pytest.approx(0.4)  # standard deviation 0.4 * sqrt(2), over sqrt(2)
    assert entry["reached_share_median"] == pytest.approx((0.2 + 0.5) / 2)
    printed = capsys.readouterr().out
    assert "| seed0 | odin-b1 | 23.500 | -0.500 |" in printed and "| odin-b1 | 2 | -0.100 ± 0.400 |" in printed
    assert (out / "report.md").read_text().strip() == printed.strip()
    assert (out / "time_to_quality_report.png").exists()


def test_the_report_keeps_an_ablation_apart_from_the_defaults(tmp_path: Path, capsys):
    """A configuration trained with --odin-args is its own configuration in the report, named with its arguments."""
    default = write_run(tmp_path / "default" / "results.json", [(1000, 50.0, 22.0)], [(1000, 20.0, 22.5)])
    ablation = write_run(tmp_path / "ablation" / "results.json", [(1000, 50.0, 22.0)], [(1000, 20.0, 21.0)])
    run = json.loads(ablation.read_text())
    run["odin-b1"]["arguments"] = ["--pipeline.lr-batch-exponent", "0"]
    ablation.write_text(json.dumps(run))
    out = tmp_path / "report"
    TimeToQualityReportCommand(results=(default, ablation), last=1, out=out).main()
    summary = json.loads((out / "summary.json").read_text())["configurations"]
    assert summary.keys() == {"odin-b1", "odin-b1 --pipeline.lr-batch-exponent 0"}
    assert summary["odin-b1"]["final_difference"] == pytest.approx(0.5)
    assert summary["odin-b1 --pipeline.lr-batch-exponent 0"]["final_difference"] == pytest.approx(-1.0)
    assert "| ablation | odin-b1 --pipeline.lr-batch-exponent 0 | 21.000 | -1.000 |" in capsys.readouterr().out


def test_the_report_counts_the_psnr_of_runs_that_shared_their_gpu_but_not_their_time(tmp_path: Path, capsys):
    timed = write_run(tmp_path / "timed" / "results.json", [(1000, 50.0, 22.0), (2000, 100.0, 24.0)],
                      [(1000, 20.0, 24.5), (2000, 40.0, 23.5)])
    shared = tmp_path / "shared" / "results.json"
    shared.parent.mkdir()
    shared.write_text(json.dumps({
        STOCK: {"curve": curve([(1000, 90.0, 21.0), (2000, 180.0, 23.0)]), "done": True, "clock_shared": True},
        "odin-b1": {"curve": curve([(1000, 30.0, 23.1), (2000, 60.0, 23.3)]), "done": True, "clock_shared": True}}))
    out = tmp_path / "report"
    TimeToQualityReportCommand(results=(timed, shared), last=2, out=out).main()
    summary = json.loads((out / "summary.json").read_text())
    rows = {row["run"]: row for row in summary["runs"]}
    assert rows["shared"]["train_share"] is None and rows["shared"]["reached_share"] is None
    assert rows["shared"]["reached_views"] == 1000 and rows["shared"]["final_difference"] == pytest.approx(0.3)
    entry = summary["configurations"]["odin-b1"]
    assert entry["runs"] == 2 and entry["timed_runs"] == 1 and entry["reached"] == 2
    assert entry["final_difference"] == pytest.approx((-0.5 + 0.3) / 2)
    assert entry["train_share_median"] == pytest.approx(0.4) and entry["reached_share_median"] == pytest.approx(0.2)
    printed = capsys.readouterr().out
    assert "| shared | odin-b1 | 23.300 | +0.300 | +1.200 | shared | 1,000 | shared |" in printed
    assert "| timed | odin-b1 | 23.500 | -0.500 | +1.000 | 0.40 | 1,000 | 0.20 |" in printed
    assert "| odin-b1 | 2 | -0.100 ± 0.400 | +1.100 ± 0.100 | 2 of 2 | 1 | 0.20 | 0.40 |" in printed


def test_the_report_counts_the_held_out_views_above_stocks_where_both_runs_recorded_them(tmp_path: Path, capsys):
    per_view = write_run(tmp_path / "per_view" / "results.json", [(1000, 50.0, 22.0)], [(1000, 20.0, 22.5)])
    run = json.loads(per_view.read_text())
    run[STOCK]["curve"][-1]["psnr_per_view"] = [20.0, 22.0, 24.0]
    run["odin-b1"]["curve"][-1]["psnr_per_view"] = [21.5, 21.0, 25.0]
    per_view.write_text(json.dumps(run))
    without = write_run(tmp_path / "without" / "results.json", [(1000, 50.0, 22.0)], [(1000, 20.0, 22.5)])
    TimeToQualityReportCommand(results=(per_view, without), last=1, out=tmp_path / "report").main()
    rows = {row["run"]: row for row in json.loads((tmp_path / "report" / "summary.json").read_text())["runs"]}
    assert rows["per_view"]["view_differences"] == pytest.approx([1.5, -1.0, 1.0])
    assert rows["without"]["view_differences"] is None
    printed = capsys.readouterr().out
    assert "| 0.40 | 1,000 | 0.40 | 2 of 3 (+1.00, -1.00) |" in printed
    assert "| 0.40 | 1,000 | 0.40 |  |" in printed
    entry = json.loads((tmp_path / "report" / "summary.json").read_text())["configurations"]["odin-b1"]
    assert entry["runs_with_views"] == 1 and entry["median_view_difference"] == pytest.approx(1.0)
    assert "| 2 of 2 | 2 | 0.40 | 0.40 | +1.000 (1) |" in printed


def test_the_report_refuses_runs_it_cannot_compare_in_one_line(tmp_path: Path):
    short = write_run(tmp_path / "a" / "results.json", [(1000, 50.0, 22.0)], [(1000, 20.0, 22.0)])
    long = write_run(tmp_path / "b" / "results.json", [(2000, 50.0, 22.0)], [(2000, 20.0, 22.0)])
    with pytest.raises(SystemExit, match="^error: the runs trained to different numbers of views"):
        TimeToQualityReportCommand(results=(short, long), out=tmp_path / "out").main()
    no_stock = tmp_path / "c" / "results.json"
    no_stock.parent.mkdir()
    no_stock.write_text(json.dumps({"odin-b1": {"curve": curve([(1000, 20.0, 22.0)]), "done": True}}))
    with pytest.raises(SystemExit, match="^error: .*c/results.json: no finished stock run in it$"):
        TimeToQualityReportCommand(results=(no_stock,), out=tmp_path / "out").main()
    with pytest.raises(SystemExit, match="^error: --last must be at least 1"):
        TimeToQualityReportCommand(results=(short,), last=0, out=tmp_path / "out").main()


def test_a_stock_checkpoint_resumes_under_weights_only_loading(tmp_path: Path):
    """Stock splatfacto's checkpoint holds its schedulers' numpy learning rates, which torch's weights_only loading
    refuses; a stock run this tool checkpointed must load when the next invocation resumes it."""
    from nerfstudio.engine.schedulers import ExponentialDecaySchedulerConfig

    parameter = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.Adam([parameter], lr=1.6e-4)
    schedule = ExponentialDecaySchedulerConfig(lr_final=1.6e-6, max_steps=30_000).setup()
    scheduler = schedule.get_scheduler(optimizer, 1.6e-4)
    for _ in range(3):
        parameter.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()
    path = tmp_path / "step-000000002.ckpt"
    torch.save({"optimizers": {"means": optimizer.state_dict()}, "schedulers": {"means": scheduler.state_dict()}}, path)
    with pytest.raises(Exception, match="numpy"):
        torch.load(path)
    with torch.serialization.safe_globals(STOCK_CHECKPOINT_GLOBALS):
        loaded = torch.load(path)
    assert loaded["schedulers"]["means"]["_last_lr"] == scheduler.state_dict()["_last_lr"]


def test_a_resumed_stock_run_trains_the_gaussians_it_loaded(tiny_scene: Path, tmp_path: Path, monkeypatch):
    """Resuming, nerfstudio leaves stock splatfacto's optimizers on the initial Gaussians while the model loads the
    checkpoint's; gsplat's opacity reset takes its tensor from the optimizer, so it put the initial opacities back
    and the first render after it failed. Stock's trainer needs CUDA at construction: here its ``.cuda()`` calls stay on
    the CPU, and gsplat's own operations stand in for its training."""
    from gsplat.strategy.ops import duplicate, reset_opa

    from odin_bench import time_to_quality

    cli = time_to_quality.tyro.cli

    def on_the_cpu(*args, **kwargs):
        config = cli(*args, **kwargs)
        config.machine.device_type = "cpu"
        return config

    monkeypatch.setattr(time_to_quality.tyro, "cli", on_the_cpu)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda tensor, *args, **kwargs: tensor)
    command = TimeToQualityCommand(data=tiny_scene, views=24, views_per_step=(), out=tmp_path)
    trainer = command._trainer(STOCK, 1, 24, {})
    model = trainer.pipeline.model
    initial = model.num_points
    duplicate(model.gauss_params, trainer.optimizers.optimizers, {}, torch.ones(initial, dtype=torch.bool))
    trainer.save_checkpoint(5)
    saved = {name: param.detach().clone() for name, param in model.gauss_params.items()}

    resumed = command._trainer(STOCK, 1, 24, {"load_dir": str(trainer.checkpoint_dir)})
    model = resumed.pipeline.model
    for name, param in model.gauss_params.items():
        assert torch.equal(param, saved[name])
        assert resumed.optimizers.optimizers[name].param_groups[0]["params"][0] is param
    reset_opa(model.gauss_params, resumed.optimizers.optimizers, {}, 0.01)
    assert model.opacities.shape == (2 * initial, 1) and model.means.shape == (2 * initial, 3)


def test_scoring_the_held_out_views_leaves_training_as_it_was(tiny_scene: Path, tmp_path: Path):
    """The curves score the held-out views between training steps, each view's PSNR and their average as nerfstudio's
    evaluation gives it; that must not change what training does next (odin drains its units first, the evaluation
    renders in eval mode), through refines and opacity resets."""
    from odin_ns.gaussians import GAUSSIAN_GROUPS
    from odin_ns.in_process import in_process_trainer, run_step
    from odin_bench.time_to_quality import held_out_metrics

    def train(evaluate_before: set, out: Path):
        torch.manual_seed(0)
        trainer = in_process_trainer(tiny_scene, out, "cpu", warmup_length=20, refine_every=10, reset_alpha_every=3)
        for step in range(70):
            if step in evaluate_before:
                metrics = held_out_metrics(trainer)
                assert metrics["psnr"] > 0
                assert len(metrics["psnr_per_view"]) == len(trainer.pipeline.datamanager.eval_dataset)
                nerfstudios = trainer.pipeline.get_average_eval_image_metrics(step)  # averaged as nerfstudio does
                assert (metrics["psnr"], metrics["ssim"]) == (nerfstudios["psnr"], nerfstudios["ssim"])
            run_step(trainer, step)
        trainer.pipeline.drain()
        model = trainer.pipeline.model
        state = {name: model.gauss_params[name].detach().clone() for name in GAUSSIAN_GROUPS}
        return state, {key: model.strategy_state[key] for key in ("grad2d", "count")}

    plain, plain_statistics = train(set(), tmp_path / "plain")
    scored, scored_statistics = train({25, 45}, tmp_path / "scored")
    for name in GAUSSIAN_GROUPS:
        assert torch.equal(plain[name], scored[name]), name
    for key, value in plain_statistics.items():
        assert torch.equal(value, scored_statistics[key]), key


def test_a_run_split_over_invocations_by_its_budget_gives_the_uninterrupted_curves(tiny_scene: Path, tmp_path: Path):
    """``--budget-s`` stops a configuration at an evaluation and checkpoints it; the next invocation resumes it. Each
    invocation seeds as ns-train does, so the curves of a run spread over invocations are those of one invocation."""
    def invoke(out: Path, budget_s):
        TimeToQualityCommand(data=tiny_scene, views=24, views_per_step=(1, 2), stock=False, eval_every_views=8,
                             budget_s=budget_s, clock_shared=budget_s is not None, out=out).main()
        return json.loads((out / "results.json").read_text())

    whole = invoke(tmp_path / "whole", None)
    invocations, split = 0, {}
    while not all(split.get(name, {}).get("done") for name in whole):
        split = invoke(tmp_path / "split", 0.01)  # past after the first stretch between evaluations
        invocations += 1
        assert invocations <= 6, split
    assert invocations >= 2
    for name, run in whole.items():
        assert not run["clock_shared"] and split[name]["clock_shared"]  # the split runs said their GPU was shared
        assert [point["views"] for point in run["curve"]] == [8, 16, 24]
        for key in ("psnr", "ssim", "gaussians"):
            assert [point[key] for point in split[name]["curve"]] == [point[key] for point in run["curve"]], (name, key)


def test_a_run_whose_checkpoint_is_gone_is_refused_in_one_line(tiny_scene: Path, tmp_path: Path):
    """A results.json carried to a machine without the checkpoints of the configuration in progress."""
    out = tmp_path / "out"
    out.mkdir()
    stopped = {"curve": [], "train_s": 1.0, "step": 8, "views_per_step": 1, "load_dir": str(tmp_path / "gone")}
    (out / "results.json").write_text(json.dumps({"odin-b1": stopped}))
    command = TimeToQualityCommand(data=tiny_scene, views=24, views_per_step=(1,), stock=False, out=out)
    with pytest.raises(SystemExit, match=r"^error: .*results.json: odin-b1 stopped at 8 steps, and its checkpoint in "
                                         r".*gone is gone \(remove the odin-b1 entry to train it from the start\)$"):
        command.main()


def test_named_held_out_views_are_written_as_truth_render_and_depth(tiny_scene: Path, tmp_path: Path):
    """--render-views writes the named held-out views, at every evaluation, three images wide (ground truth, render,
    depth) at the view's size; a name that is not held out stops in one line naming the held-out images."""
    from PIL import Image

    from odin_ns.in_process import in_process_trainer, run_step
    from odin_bench.time_to_quality import held_out_metrics, held_out_renders, renders_due

    trainer = in_process_trainer(tiny_scene, tmp_path / "run", "cpu")
    dataset = trainer.pipeline.datamanager.eval_dataset
    held_out = [Path(name).name for name in dataset.image_filenames]
    with pytest.raises(SystemExit, match=r"^error: --render-views nope\.png: not a held-out image .*" + held_out[0]):
        held_out_renders(trainer, ("nope.png",), tmp_path / "renders")
    renders = held_out_renders(trainer, (held_out[-1],), tmp_path / "renders")
    for step in range(3):
        run_step(trainer, step)
        held_out_metrics(trainer, renders_due(renders, {}, [], None), f"{step:06d}_")
    stem = Path(held_out[-1]).stem
    written = sorted(path.name for path in (tmp_path / "renders").iterdir())
    assert written == [f"{step:06d}_{stem}.jpg" for step in range(3)]
    height, width = dataset[len(held_out) - 1]["image"].shape[:2]
    assert Image.open(tmp_path / "renders" / written[0]).size == (3 * width, height)


def test_a_view_fallen_below_its_best_is_written_and_the_others_are_not(tiny_scene: Path, tmp_path: Path):
    """--render-fallen-db: at each evaluation, every held-out view more than that many dB below its best so far in
    the run is written beside the named ones; nothing before the run's first evaluation; a bound of 0 dB or less is
    refused in one line."""
    from odin_ns.in_process import in_process_trainer
    from odin_bench.time_to_quality import held_out_metrics, held_out_stems, renders_due

    trainer = in_process_trainer(tiny_scene, tmp_path / "run", "cpu")
    every_view = held_out_stems(trainer, tmp_path / "renders")
    assert renders_due({}, every_view, [], 1.0) == {}
    scored = held_out_metrics(trainer)["psnr_per_view"]
    best = [psnr - 5.0 for psnr in scored]
    best[1] = scored[1] + 1.5  # view 1 was 1.5 dB better earlier in the run, the others 5 dB worse
    curve = [{"psnr_per_view": best}, {"psnr_per_view": scored}]
    due = renders_due({}, every_view, curve, 1.0)
    assert due[1][0] == pytest.approx(scored[1] + 0.5) and due[0][0] == pytest.approx(scored[0] - 1.0)
    assert held_out_metrics(trainer, due, "000008_")["psnr_per_view"] == scored
    assert sorted(path.name for path in (tmp_path / "renders").iterdir()) == [f"000008_{every_view[1].name}.jpg"]
    assert renders_due({}, every_view, curve, 2.0)[1][0] < scored[1]  # a fall of 1.5 dB is not one of 2
    with pytest.raises(SystemExit, match=r"^error: --render-fallen-db must be above 0 dB, got 0.0$"):
        TimeToQualityCommand(data=tiny_scene, render_fallen_db=0.0, out=tmp_path / "out").main()


def test_odin_arguments_reach_every_odin_configuration_and_a_resume_keeps_them(tiny_scene: Path, tmp_path: Path,
                                                                               monkeypatch):
    """--odin-args adds ns-train arguments to each odin-splatfacto configuration (an ablation) and is recorded with
    its entry; an entry started with other arguments is refused in one line instead of resumed under new ones."""
    orders = []
    trainer_of = TimeToQualityCommand._trainer

    def recording(self, name, views_per_step, steps, progress):
        trainer = trainer_of(self, name, views_per_step, steps, progress)
        orders.append(trainer.pipeline.datamanager.config.order)
        return trainer

    monkeypatch.setattr(TimeToQualityCommand, "_trainer", recording)
    out = tmp_path / "out"
    ablation = "--pipeline.datamanager.order random"
    TimeToQualityCommand(data=tiny_scene, views=4, views_per_step=(1, 2), stock=False, eval_every_views=4,
                         odin_args=ablation, out=out).main()
    assert orders == ["random", "random"]
    results = json.loads((out / "results.json").read_text())
    assert results["odin-b2"]["arguments"] == ["--pipeline.datamanager.order", "random"]
    del results["odin-b2"]["done"]
    (out / "results.json").write_text(json.dumps(results))
    with pytest.raises(SystemExit, match=r"^error: .*results.json: odin-b2 was started with arguments "
                                         r"\['--pipeline.datamanager.order', 'random'\], not \[\] "):
        TimeToQualityCommand(data=tiny_scene, views=4, views_per_step=(1, 2), stock=False, eval_every_views=4,
                             out=out).main()


def test_seeds_train_at_once_each_in_its_process_and_join_per_seed(tiny_scene: Path, tmp_path: Path):
    """--seeds runs every configuration of every seed in its own process, each as ``--seed N`` with its GPU shared
    would, logs each, and joins each seed's configurations into one results.json, with each seed's own earlier stock
    run where --stock-from names it by ``{seed}`` (invoked again on finished runs, it only joins); a --stock-from
    without ``{seed}`` is refused in one line."""
    out = tmp_path / "seeds"
    common = dict(data=tiny_scene, views=4, views_per_step=(2,), stock=False, eval_every_views=4)
    TimeToQualityCommand(**common, seeds=(0, 1), out=out).main()
    alone = tmp_path / "alone"
    TimeToQualityCommand(**common, seed=1, clock_shared=True, out=alone).main()
    for seed in (0, 1):
        joined = json.loads((out / f"seed_{seed}" / "results.json").read_text())
        assert list(joined) == ["odin-b2"] and joined["odin-b2"]["done"] and joined["odin-b2"]["clock_shared"]
        assert "odin-b2" in (out / f"seed_{seed}" / "odin-b2" / "log.txt").read_text()
    by_itself = json.loads((alone / "results.json").read_text())["odin-b2"]["curve"]
    in_its_process = json.loads((out / "seed_1" / "results.json").read_text())["odin-b2"]["curve"]
    assert [point["psnr"] for point in in_its_process] == [point["psnr"] for point in by_itself]
    seed_0 = json.loads((out / "seed_0" / "results.json").read_text())["odin-b2"]["curve"]
    assert [point["psnr"] for point in seed_0] != [point["psnr"] for point in by_itself]  # each process took its seed
    stocks = {}
    for seed in (0, 1):
        stocks[seed] = {"curve": [{"views": 4, "train_s": 1.0, "psnr": 10.0 + seed}], "done": True}
        (tmp_path / f"stock_{seed}.json").write_text(json.dumps({STOCK: stocks[seed]}))
    logged = {log: log.read_text() for log in out.glob("seed_*/odin-b2/log.txt")}
    TimeToQualityCommand(**common, seeds=(0, 1), stock_from=tmp_path / "stock_{seed}.json", out=out).main()
    for seed in (0, 1):
        joined = json.loads((out / f"seed_{seed}" / "results.json").read_text())
        assert joined[STOCK] == {**stocks[seed], "from": str(tmp_path / f"stock_{seed}.json")}
        assert joined["odin-b2"]["curve"] == (seed_0 if seed == 0 else in_its_process)  # finished: not trained again
    assert logged and all(log.read_text() == text for log, text in logged.items()), "a finished run started a process"
    with pytest.raises(SystemExit, match=r"^error: --stock-from with --seeds names each seed's stock run: write "
                                         r"\{seed\} in its path .*x.json$"):
        TimeToQualityCommand(**common, seeds=(0, 1), stock_from=tmp_path / "x.json", out=out).main()
