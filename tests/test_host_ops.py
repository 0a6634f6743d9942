"""Host work of the runtime per unit (operations it dispatches itself), the cost that dominates a step on the GPU host."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_publication_host_work_does_not_grow_per_bucket():
    """Sync with a dense exchange stays a handful of operations per bucket (a collective on a slice of one packed
    buffer), not an unpack and an Adam launch per tensor per bucket as before (492 operations at 9 buckets)."""
    done = subprocess.run(
        [sys.executable, "-m", "odin_bench.host_ops", "--rows", "20000", "--units", "8"],
        capture_output=True, text=True, timeout=300, check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    rows = {row["configuration"]: row for row in result["configurations"]}
    assert rows.keys() == {"sync", "quality-first", "quality-first-predicted", "sync-scoped",
                           "quality-first-scoped", "throughput-first-scoped"}
    sync_dense = rows["sync"]
    assert sync_dense["collectives_per_unit"] == 9 + 1  # 8 + 1 buckets of 20,000 rows, and the scope all-gather
    assert sync_dense["ops_per_unit"] < 72  # 66 with the gradient views built once per unit and the one-launch finite watch
    assert rows["quality-first"]["ops_per_unit"] > sync_dense["ops_per_unit"]  # read scope, admission
    # decided ahead: no read-scope pass, no admission read; still more than sync (runs, guard)
    assert sync_dense["ops_per_unit"] < rows["quality-first-predicted"]["ops_per_unit"] < rows["quality-first"]["ops_per_unit"]


def test_step_ops_counts_a_training_step_by_call_site(tiny_scene, capsys):
    """``odin-bench step-ops``: the operations of steady training steps, the rasterizer's forward apart, the rest by the
    odin_ns or nerfstudio function (or the autograd node) dispatching them."""
    from odin_bench.step_ops import StepOpsCommand

    StepOpsCommand(data=tiny_scene, warmup_steps=3, steps=2, top=200).main()
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(result["per_step"]) == 2 and all(total > raster > 0 for total, raster in
                                               zip(result["per_step"], result["rasterizer_per_step"]))
    sites = result["sites"]
    assert "odin_ns/model.py:get_loss_dict" in sites and any(site.startswith("backward: ") for site in sites)
    assert result["kernel_calls_per_step"] >= 1  # the packed Adam step of the publication, at least
    assert sum(sites.values()) + result["kernel_calls_per_step"] == pytest.approx(
        (sum(result["per_step"]) - sum(result["rasterizer_per_step"])) / 2)
