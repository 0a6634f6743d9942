"""Cost-balanced units against cost-blind ones: sync training time per step, side by side in one invocation.

Why: a synchronous step lasts as long as its slowest rank. In a scene whose views differ a lot in cost (the demo
scene's wide views see every Gaussian, its ring views one region), a cost-blind schedule often pairs a wide view
with a ring view and the ring rank waits at every exchange (the H200 profile in docs/results.md: 45.5 vs 29.1 ms of
compute kernels on the two ranks over the same six steps). The plan's ``balance_ranks`` builds units from views of
similar estimated cost; this script measures what that buys, alternating the two configurations over seeds so
machine drift hits both alike.

Usage: ``python -m odin_bench.rank_balance --data SCENE [--ranks 2] [--steps 120] [--seeds 2]``; prints the mean
step time over the second half of each run (the mean, not the median: the cost of imbalance sits in the minority of
steps that pair unlike views, and throughput is total time), the median, rank 0's exposed wait per unit and the
ratio of the means (``--quality``: also held-out PSNR/SSIM, balanced minus cost-blind per seed); each run's log
(``OUT/<label>.log``) has the plan's predicted rank imbalance.
"""

from __future__ import annotations

import json
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path

import tyro
from tqdm import tqdm

from odin_bench.bench import (
    evaluate,
    iteration_times,
    paired_quality_deltas,
    run_training,
    steady_state,
    training_command,
)
from odin_ns.runtime.records import read_unit_log, summarize, unit_log


@dataclass
class RankBalanceCommand:
    """Train sync on ``ranks`` ranks with and without cost-balanced units; compare step times."""

    data: Path
    """Scene (COLMAP layout): most informative where view costs vary, e.g. ``odin-ns demo-scene``'s output."""
    ranks: int = 2
    steps: int = 120
    seeds: int = 2
    out: Path = Path("outputs/rank_balance")
    extra: str = ""
    """Extra ns-train arguments for both configurations, one string (e.g. "--pipeline.model.stop-split-at 0")."""
    quality: bool = False
    """Also evaluate held-out PSNR/SSIM (after each run's last step) and report balanced minus cost-blind, paired by seed (mean, worst,
    in dB/units and %)."""

    def main(self) -> None:
        runs = []
        plan = [(seed, balance) for seed in range(self.seeds) for balance in (False, True)]
        for seed, balance in tqdm(plan, desc="rank-balance runs", unit="run"):
            label = f"{'balanced' if balance else 'cost-blind'}-s{seed}"
            extra = (*shlex.split(self.extra), "--pipeline.model.num-downscales", "0",
                     "--pipeline.datamanager.balance-ranks", str(balance))
            run_dir = run_training(
                training_command("sync", self.ranks, self.data, self.out / label, self.steps, seed, extra,
                                 evaluate=self.quality),
                self.out / label, label,
            )
            steady_times = steady_state(iteration_times(run_dir))
            steady_records = steady_state(read_unit_log(unit_log(run_dir, 0)))
            runs.append({"balanced": balance, "seed": seed, "step_s_mean": statistics.mean(steady_times),
                         "step_s_median": statistics.median(steady_times),
                         "exposed_wait_s": summarize(steady_records).exposed_wait_s, "run_dir": str(run_dir)})
            if self.quality:
                runs[-1]["quality"] = evaluate(run_dir)
        summary = {}
        for balance in (False, True):
            group = [run for run in runs if run["balanced"] == balance]
            summary["balanced" if balance else "cost_blind"] = {
                "step_ms_mean": 1e3 * statistics.mean(run["step_s_mean"] for run in group),
                "step_ms_median": 1e3 * statistics.median(run["step_s_median"] for run in group),
                "exposed_wait_ms_mean": 1e3 * statistics.mean(run["exposed_wait_s"] for run in group),
            }
        summary["step_time_ratio_cost_blind_over_balanced"] = (
            summary["cost_blind"]["step_ms_mean"] / summary["balanced"]["step_ms_mean"]
        )
        if self.quality:
            summary["balanced_minus_cost_blind"] = paired_quality_deltas(
                [run for run in runs if run["balanced"]], [run for run in runs if not run["balanced"]]
            )
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "results.json").write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    tyro.cli(RankBalanceCommand).main()
