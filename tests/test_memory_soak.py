"""The memory soak's GPU sampling: per-process memory from nvidia-smi, nothing where it cannot run."""

from __future__ import annotations

import subprocess

from odin_bench import memory_soak


def test_gpu_memory_is_summed_per_process_and_empty_without_nvidia_smi(monkeypatch):
    listing = "4021, 1532\n4022, 1490\n4021, 12\n[N/A], [N/A]\n"
    monkeypatch.setattr(memory_soak.subprocess, "run",
                        lambda *args, **kwargs: subprocess.CompletedProcess(args, 0, stdout=listing))
    assert memory_soak.gpu_memory_by_pid() == {4021: 1544.0, 4022: 1490.0}

    def missing(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(memory_soak.subprocess, "run", missing)
    assert memory_soak.gpu_memory_by_pid() == {}


def test_a_soak_past_its_time_limit_stops_the_run_and_reports_what_it_sampled(tmp_path, monkeypatch, capsys):
    """A stand-in launcher that would train for a minute (a child named like a rank, RANK=0): the soak samples it
    until --max-seconds, stops the launcher's whole process group, and still writes its samples and plot."""
    import json
    import sys

    import psutil

    rank = f"import time; time.sleep(60)  # ns-train {tmp_path}"  # the path marks this test's process
    launcher = (f"import os, subprocess, sys; subprocess.run([sys.executable, '-c', {rank!r}], "
                "env={**os.environ, 'RANK': '0'})")
    steps = iter(range(10, 10_000, 10))
    monkeypatch.setattr(memory_soak.MemorySoakCommand, "training_command",
                        lambda self, scene, runs: [sys.executable, "-c", launcher])
    monkeypatch.setattr(memory_soak.MemorySoakCommand, "_steps_logged", staticmethod(lambda runs: next(steps)))
    memory_soak.MemorySoakCommand(data=tmp_path, ranks=1, out=tmp_path / "soak", sample_every_s=0.2,
                                  max_seconds=1.5).main()
    marked = [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    _, alive = psutil.wait_procs(marked, timeout=10)  # signalled: gone as soon as it is scheduled
    assert not alive, "the stand-in's rank must have been stopped with its launcher"
    results = json.loads((tmp_path / "soak" / "results.json").read_text())
    assert results["stopped_after_s"] >= 1.5 and results["samples"]
    assert all(sample["rss_mb"][0] > 0 for sample in results["samples"])
    assert [s["step"] for s in results["samples"]] == sorted(s["step"] for s in results["samples"])
    assert "stopped after" in capsys.readouterr().out and (tmp_path / "soak" / "memory_soak.png").exists()
