"""Where a steady step's host time goes, on one GPU: cProfile of steady steps, then torch.profiler's kernel table.

The companion of ``host_waits`` (which counts the host's waits for the GPU): this one attributes the host's own time
per function and counts kernel launches, for 1 and 4 views per step.

Usage: ``python -m odin_bench.host_profile --data data/cup77``.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

import torch
import tyro
from torch.profiler import ProfilerActivity, profile

from odin_ns.in_process import in_process_trainer, run_step


@dataclass
class HostProfileCommand:
    """Profile the host time of steady training steps on one GPU."""

    data: Path
    views_per_rank: Tuple[int, ...] = (1, 4)
    warmup_steps: int = 80
    steps: int = 100
    """Steps timed wall-clock, then as many under cProfile."""
    kernel_steps: int = 20
    """Steps under torch.profiler for the kernel tables."""
    rows: int = 45
    out: Path = Path("outputs/host_profile")

    def main(self) -> None:
        if not torch.cuda.is_available():
            raise SystemExit("error: host profiles are a GPU matter: this needs CUDA")
        for views in self.views_per_rank:
            trainer = in_process_trainer(self.data, self.out / f"views{views}", "cuda", views)
            step = self._run(trainer, 1, self.warmup_steps)
            started = time.perf_counter()
            step = self._run(trainer, step, self.steps)
            wall_ms = (time.perf_counter() - started) / self.steps * 1e3
            profiler = cProfile.Profile()
            profiler.enable()
            step = self._run(trainer, step, self.steps)
            profiler.disable()
            print(f"=== views per rank {views}: {wall_ms:.2f} ms/step wall, {trainer.pipeline.model.num_points} Gaussians")
            for key in ("tottime", "cumulative"):
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats(key).print_stats(self.rows)
                print(text.getvalue())
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as kernels:
                self._run(trainer, step, self.kernel_steps)
            for key in ("self_cuda_time_total", "self_cpu_time_total"):
                print(kernels.key_averages().table(sort_by=key, row_limit=25, max_name_column_width=60))

    @staticmethod
    def _run(trainer, first: int, count: int) -> int:
        for step in range(first, first + count):
            run_step(trainer, step)
        torch.cuda.synchronize()
        return first + count


def entrypoint() -> None:
    tyro.cli(HostProfileCommand).main()


if __name__ == "__main__":
    entrypoint()
