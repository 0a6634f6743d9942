"""Host and device memory of every rank over a long multi-rank training run: a leak shows as a slope.

Trains odin-splatfacto under torchrun (gloo on the CPU, NCCL on GPUs) on a capture (by default a small generated demo
scene), densification stopped at ``--stop-split-at`` views so the Gaussian count settles, and samples each rank's
resident set size and, where ``nvidia-smi`` runs, the GPU memory its process holds (the caching allocator's reserve
included: what a leak would grow), against the step its unit log has reached. Prints the table, writes results.json
and a plot.

Usage: ``python -m odin_bench.memory_soak --steps 5000 --ranks 2 --out outputs/memory_soak``; on GPUs, e.g.
``--data /tmp/large --steps 30000 --stop-split-at 15000``, within a time limit ``--max-seconds 540`` (the samples so
far are reported), at half resolution ``--extra "odin-data --downscale-factor 2"``. results.json is rewritten after
every sample, so a soak cut short still leaves its samples.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import psutil
import tyro

from odin_bench.bench import installed_script
from odin_ns.runtime.records import unit_log


@dataclass
class MemorySoakCommand:
    """Sample each rank's resident memory over a long training run."""

    data: Optional[Path] = None
    """Capture to train on; None: a small generated demo scene (written under ``out``)."""
    steps: int = 5000
    ranks: int = 2
    out: Path = Path("outputs/memory_soak")
    stop_split_at: int = 1000
    """Views after which densification stops (the Gaussian count, and the memory it needs, settle)."""
    sample_every_s: float = 5.0
    max_seconds: Optional[float] = None
    """Stop training after this long (SIGTERM to the launcher's process group) and report the samples so far; None:
    train every step."""
    extra: str = ""
    """More ns-train arguments, appended (e.g. a dataparser subcommand: "odin-data --downscale-factor 2")."""

    def main(self) -> None:
        from odin_ns.data.demo_scene import generate_demo_scene

        self.out.mkdir(parents=True, exist_ok=True)
        if self.data is not None and not self.data.exists():
            raise SystemExit(f"error: data directory does not exist: {self.data}")
        scene = self.data or generate_demo_scene(
            self.out / "scene", num_views=24, width=64, height=48, gaussians_per_region=400, seed=3
        )
        runs = self.out / "runs"
        command = self.training_command(scene, runs)
        print(" ".join(command))
        launcher = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
        samples: list[dict] = []
        results = {"command": " ".join(command), "samples": samples, "stopped_after_s": None}
        start = time.monotonic()
        while launcher.poll() is None:
            time.sleep(self.sample_every_s)
            if self.max_seconds is not None and time.monotonic() - start > self.max_seconds:
                results["stopped_after_s"] = round(time.monotonic() - start, 1)
                stop_process_group(launcher)
                break
            step = self._steps_logged(runs)
            try:
                ranks = [p for p in psutil.Process(launcher.pid).children(recursive=True) if "ns-train" in " ".join(p.cmdline())]
                by_rank = sorted(ranks, key=lambda process: int(process.environ().get("RANK", -1)))
                rss = [round(process.memory_info().rss / 2**20, 1) for process in by_rank]
            except psutil.NoSuchProcess:
                continue
            if step is not None and len(rss) == self.ranks:
                sample = {"seconds": round(time.monotonic() - start, 1), "step": step, "rss_mb": rss}
                gpu_mb = gpu_memory_by_pid()
                if all(process.pid in gpu_mb for process in by_rank):
                    sample["gpu_mb"] = [gpu_mb[process.pid] for process in by_rank]
                samples.append(sample)
                (self.out / "results.json").write_text(json.dumps(results, indent=1))
        if results["stopped_after_s"] is None and launcher.returncode != 0:
            raise SystemExit(f"error: training exited {launcher.returncode}: {launcher.stderr.read()[-2000:]}")
        (self.out / "results.json").write_text(json.dumps(results, indent=1))
        if results["stopped_after_s"] is not None:
            print(f"stopped after {results['stopped_after_s']} s (--max-seconds), at step {samples[-1]['step'] if samples else 0}")
        self._report(samples)

    def training_command(self, scene: Path, runs: Path) -> list[str]:
        return [
            sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(self.ranks),
            installed_script("ns-train"), "odin-splatfacto", "--data", str(scene), "--output-dir", str(runs),
            "--max-num-iterations", str(self.steps), "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True",
            "--logging.local-writer.enable", "False", "--steps-per-eval-image", "1000000",
            "--steps-per-eval-all-images", "1000000", "--steps-per-eval-batch", "0", "--steps-per-save", "1000000",
            "--pipeline.model.num-downscales", "0", "--pipeline.model.stop-split-at", str(self.stop_split_at),
            *shlex.split(self.extra),
        ]

    @staticmethod
    def _steps_logged(runs: Path) -> int | None:
        logs = list(runs.glob("*/odin-splatfacto/*/"))
        if not logs or not unit_log(logs[0], 0).exists():
            return None
        with open(unit_log(logs[0], 0)) as log:
            return sum(1 for _ in log)

    def _report(self, samples: list[dict]) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        kinds = [("rss_mb", "RSS")] + ([("gpu_mb", "GPU")] if samples and all("gpu_mb" in s for s in samples) else [])
        print("| step | " + " | ".join(f"rank {r} {label} (MB)" for _, label in kinds for r in range(self.ranks)) + " |")
        print("|---|" + "---|" * (self.ranks * len(kinds)))
        stride = max(1, len(samples) // 12)
        for sample in samples[::stride] + samples[-1:]:
            print(f"| {sample['step']} | " + " | ".join(f"{mb:.0f}" for key, _ in kinds for mb in sample[key]) + " |")
        figure, all_axes = plt.subplots(1, len(kinds), figsize=(7 * len(kinds), 3.5), squeeze=False)
        for axes, (key, label) in zip(all_axes[0], kinds):
            for rank in range(self.ranks):
                axes.plot([s["step"] for s in samples], [s[key][rank] for s in samples], label=f"rank {rank}")
            axes.axvline(self.stop_split_at / self.ranks, color="gray", linestyle=":", label="densification stops")
            axes.set_xlabel("step")
            axes.set_ylabel("resident memory (MB)" if key == "rss_mb" else "GPU memory of the process (MB)")
            axes.set_ylim(bottom=0)
            axes.legend()
        figure.tight_layout()
        figure.savefig(self.out / "memory_soak.png", dpi=120)
        print(f"wrote {self.out / 'results.json'} and {self.out / 'memory_soak.png'}")


def stop_process_group(launcher: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM to the launcher and every process it started (the ranks stop as on any SIGTERM), SIGKILL after
    ``grace_s``."""
    for number, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(launcher.pid, number)
        except ProcessLookupError:
            return
        try:
            launcher.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def gpu_memory_by_pid() -> dict[int, float]:
    """GPU memory (MB) each process holds, from ``nvidia-smi``; empty where it is absent or fails."""
    try:
        listing = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    usage: dict[int, float] = {}
    for line in listing.splitlines():
        pid, _, megabytes = line.partition(",")
        if pid.strip().isdigit() and megabytes.strip().replace(".", "", 1).isdigit():
            usage[int(pid)] = usage.get(int(pid), 0.0) + float(megabytes)
    return usage


def entrypoint() -> None:
    tyro.cli(MemorySoakCommand).main()


if __name__ == "__main__":
    entrypoint()
