"""The memory soak's GPU sampling: per-process memory from nvidia-smi, nothing where it cannot run."""

from __future__ import annotations

import subprocess

from odin_ns.benchmarks import memory_soak


def test_gpu_memory_is_summed_per_process_and_empty_without_nvidia_smi(monkeypatch):
    listing = "4021, 1532\n4022, 1490\n4021, 12\n[N/A], [N/A]\n"
    monkeypatch.setattr(memory_soak.subprocess, "run",
                        lambda *args, **kwargs: subprocess.CompletedProcess(args, 0, stdout=listing))
    assert memory_soak.gpu_memory_by_pid() == {4021: 1544.0, 4022: 1490.0}

    def missing(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(memory_soak.subprocess, "run", missing)
    assert memory_soak.gpu_memory_by_pid() == {}
