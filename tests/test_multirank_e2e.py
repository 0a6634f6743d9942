"""ns-train odin-splatfacto under torchrun on CPU ranks (gloo): quality-first equals sync, bit for bit, on every rank.

Each run writes, per rank, the SHA-256 of every tensor of its model and optimizer state (``state_digest_rank{r}``),
so "equal" here means: every tensor of model and optimizer state, step counts included, bitwise equal on every rank
and between the modes; and the quality-first run overlapped some windows (otherwise it would be sync by another
name). Evaluation during training sees the same parameters in both modes (it drains first).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict

import pytest
import torch

from odin_ns.trainer import state_digest_path
from training import (
    DENSIFY_EARLY,
    DENSIFY_STEPS,
    STRUCTURE_CHANGES,
    TRAINING_OUTPUT,
    TWO_NODE_STEPS,
    final_checkpoint,
    scalar_series,
    structure_changes,
    torchrun,
    train,
    unit_records,
)

FINAL_PSNR = "Eval Images Metrics Dict (all images)/psnr"
"""Mean PSNR over the held-out images, logged when training evaluates all of them (at a run's last step here)."""


def checkpoint_tensors(run_dir: Path) -> Dict[str, torch.Tensor]:
    """Every tensor of the final checkpoint: the pipeline's, every optimizer's state (step counts included) and every
    rank's densification statistics."""
    state = torch.load(final_checkpoint(run_dir), map_location="cpu")
    tensors = {f"pipeline.{key}": value for key, value in state["pipeline"].items() if isinstance(value, torch.Tensor)}
    for group, optimizer in state["optimizers"].items():
        for index, moments in optimizer["state"].items():
            tensors.update({f"{group}.{index}.{key}": value for key, value in moments.items()})
    tensors.update({f"densification.{key}": value for key, value in state["densification_statistics"].items()})
    return tensors


def rank_digests(run_dir: Path, ranks: int) -> list[dict]:
    return [json.loads(state_digest_path(run_dir, rank).read_text()) for rank in range(ranks)]


def assert_bitwise_equal_runs(expected: Path, actual: Path, ranks: int) -> None:
    """Rank 0's checkpoints equal with ``torch.equal`` on every tensor; every rank's digests equal across ranks and
    runs."""
    reference, candidate = checkpoint_tensors(expected), checkpoint_tensors(actual)
    assert reference.keys() == candidate.keys()
    assert any(key.endswith(".step") for key in reference), "optimizer step counts must be compared"
    for key, value in reference.items():
        assert value.dtype == candidate[key].dtype and torch.equal(value, candidate[key]), key
    digests = rank_digests(expected, ranks) + rank_digests(actual, ranks)
    assert all(digest == digests[0] for digest in digests), "ranks or modes hold different state"
    assert any(".exp_avg_sq" in name for name in digests[0]) and any(name.endswith(".step") for name in digests[0])


def overlapped_windows(run_dir: Path) -> int:
    """Windows in which part of the previous unit's exchange stayed in flight while the next unit computed."""
    return sum(1 for unit in unit_records(run_dir) if unit.window is not None and unit.window.overlapped)


@pytest.mark.slow
def test_quality_first_equals_sync_across_densification_and_reset(densifying_runs):
    """With evaluation during training and the camera optimizer. The runs (``DENSIFYING_RUN_OPTIONS``) also
    checkpoint mid-run, which drains like any checkpoint; test_faults.py resumes quality-first's run from one of
    those."""
    runs = {mode: densifying_runs[mode] for mode in ("sync", "quality-first")}
    assert checkpoint_tensors(runs["sync"])["pipeline._model.gauss_params.means"].shape[0] > 1856, "must densify"
    assert all(structure_changes(run) == STRUCTURE_CHANGES for run in runs.values()), "reset, densify, reset"
    assert_bitwise_equal_runs(runs["sync"], runs["quality-first"], ranks=2)
    assert overlapped_windows(runs["quality-first"]) > 0
    eval_psnr = {mode: scalar_series(run, "Eval Images Metrics/psnr") for mode, run in runs.items()}
    assert len(eval_psnr["sync"]) >= 3 and eval_psnr["quality-first"] == eval_psnr["sync"]
    final_psnr = {mode: scalar_series(run, FINAL_PSNR) for mode, run in runs.items()}
    assert len(final_psnr["sync"]) == 1
    assert final_psnr["quality-first"] == final_psnr["sync"]
    assert final_psnr["quality-first"][0] > 15.0  # the final model, every held-out image (ns-eval: test_bench_smoke.py)


@pytest.mark.slow
def test_each_refine_is_logged_once_per_job_as_splatfacto_logs_it(densifying_runs):
    """splatfacto's lines per refine (grown, then pruned, each with the count after it) come from rank 0 alone, since
    every rank makes the same change; the count after the run's one refine (step 20) is what its checkpoint holds."""
    run = densifying_runs["sync"]
    output = (run / TRAINING_OUTPUT).read_text()
    grown = re.findall(r"Step (\d+): \d+ GSs duplicated, \d+ GSs split\. Now having (\d+) GSs\.", output)
    pruned = re.findall(r"Step (\d+): \d+ GSs pruned\. Now having (\d+) GSs\.", output)
    assert [step for step, _ in grown] == [step for step, _ in pruned] == ["20"], (grown, pruned)
    assert int(pruned[0][1]) == checkpoint_tensors(run)["pipeline._model.gauss_params.means"].shape[0]


@pytest.mark.slow
def test_four_ranks_quality_first_equals_sync(tiny_scene: Path, tmp_path: Path, two_node_run):
    """Code paths for W > 2: four gloo ranks, 20 steps. Sync runs as four ranks of one torchrun; quality-first is the
    run test_multinode.py checks, four ranks of two torchrun "nodes" (Odin sees the same four-rank gloo group)."""
    quality_first, _ = two_node_run
    sync = train(tiny_scene, tmp_path / "sync", TWO_NODE_STEPS, "--pipeline.odin.mode", "sync", launcher=torchrun(4))
    assert_bitwise_equal_runs(sync, quality_first, ranks=4)
    assert overlapped_windows(quality_first) > 0


@pytest.mark.slow
def test_rank_0_alone_prints_the_config_and_the_folders_it_makes(two_node_run):
    """Every rank parses the command line (under torchrun ns-train runs once per rank): rank 0 alone prints the config,
    the capture found and the run's folders, and makes them; no rank prints or makes another run directory. Checked
    on the output of both torchrun nodes of two ranks each."""
    run_dir, outputs = two_node_run
    output = "\n".join(outputs)
    for printed_once in ("OdinTrainerConfig(", "COLMAP capture:", "Saving config to:", "Saving checkpoints to:",
                         "Training Finished"):
        assert output.count(printed_once) == 1, f"{printed_once!r} printed {output.count(printed_once)} times"
    assert "Saving" not in outputs[1], "node 1 holds ranks 2 and 3"
    assert [path.name for path in run_dir.parent.iterdir()] == [run_dir.name]
    assert (run_dir / "config.yml").is_file() and (run_dir / "nerfstudio_models").is_dir()


@pytest.mark.slow
def test_several_views_per_rank_quality_first_equals_sync(tiny_scene: Path, tmp_path: Path):
    """Two ranks rendering two views each per step (one rasterizer call each): the unit's scopes are its views'
    union, and the overlap stays exact."""
    options = ("--pipeline.datamanager.views-per-rank", "2")
    runs = {
        mode: train(tiny_scene, tmp_path / mode, 30, *options, "--pipeline.odin.mode", mode, launcher=torchrun(2))
        for mode in ("sync", "quality-first")
    }
    assert_bitwise_equal_runs(runs["sync"], runs["quality-first"], ranks=2)
    assert overlapped_windows(runs["quality-first"]) > 0
    assert len(unit_records(runs["sync"])) >= 29


@pytest.mark.slow
def test_predicted_read_scopes_equal_sync_across_densification_and_reset(tiny_scene: Path, tmp_path: Path):
    """quality-first decided ahead from the plan and per-bucket bounds (no scope gather, no host read, no re-run):
    bitwise sync's state on both ranks across a refine and an opacity reset, its guard silent (a misprediction
    would stop training with ScopeMispredictionError), and some windows decided without waiting for every bucket.
    Without the camera optimizer (predicted scopes refuse it), so not against ``densifying_runs``' sync."""
    runs = {
        name: train(tiny_scene, tmp_path / name, DENSIFY_STEPS, *DENSIFY_EARLY, *options, launcher=torchrun(2))
        for name, options in (
            ("sync", ("--pipeline.odin.mode", "sync")),
            ("predicted", ("--pipeline.odin.mode", "quality-first", "--pipeline.odin.read-scopes", "predicted")),
        )
    }
    assert checkpoint_tensors(runs["sync"])["pipeline._model.gauss_params.means"].shape[0] > 1856, "must densify"
    assert all(structure_changes(run) == STRUCTURE_CHANGES for run in runs.values()), "reset, densify, reset"
    assert_bitwise_equal_runs(runs["sync"], runs["predicted"], ranks=2)
    windows = [unit.window for unit in unit_records(runs["predicted"]) if unit.window is not None]
    assert windows and all(window.predicted for window in windows)
    assert all(unit.reruns == 0 for unit in unit_records(runs["predicted"]))
    assert overlapped_windows(runs["predicted"]) > 0
