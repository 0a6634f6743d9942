"""Profiler window and ``odin-bench timeline``: exact overlap figures on a synthetic trace, and a real CPU profile
through ns-train (which has no GPU kernels: the command must say so in one line)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from odin_bench.timeline import TimelineCommand, host_summary, host_table, read_rank_trace, overlap_summary
from training import BIN, train

BASE_NS = 1_000_000_000
"""baseTimeNanoseconds of the synthetic traces: the figures must not depend on it."""


def kernel(name: str, stream: int, start: float, end: float, via_tid: bool = False) -> dict:
    event = {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "ts": start, "dur": end - start, "args": {}}
    if via_tid:
        event["tid"] = f"stream {stream}"  # kineto's thread name for a stream, when args lack it
    else:
        event.update(tid=stream, args={"stream": stream, "device": 0})
    return event


def annotation(step: int, start: float, end: float, category: str) -> dict:
    return {"ph": "X", "cat": category, "name": f"odin_unit_{step}", "pid": 0, "tid": 1, "ts": start,
            "dur": end - start}


def write_trace(path: Path, events: list, rank: int | None = None) -> Path:
    trace = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "traceEvents": events}
    if rank is not None:
        trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    with gzip.open(path, "wt") as handle:
        json.dump(trace, handle)
    return path


def runtime_call(name: str, start: float) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": start, "dur": 1}


@pytest.fixture
def synthetic_traces(tmp_path: Path) -> list:
    """Rank 0 (microseconds): compute on stream 7 at [0,100] and [150,300], NCCL on stream 20 at [50,200] and
    [400,500]: 250 us of communication, 100 of it overlapped; steps 10 = [0,350) and 11 = [350,520] (GPU ranges;
    the CPU ranges differ and must be ignored); host waits at 10, 30 (step 10) and 360 (step 11). Rank 1: NCCL
    [0,100] fully under compute [0,200]."""
    rank0 = write_trace(tmp_path / "a.json.gz", [
        kernel("void splat_fwd<float>(...)", 7, 0, 100),
        kernel("rasterize_bwd", 7, 150, 300, via_tid=True),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 20, 50, 200),
        kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t", 20, 400, 500),
        annotation(10, 0, 320, "gpu_user_annotation"),
        annotation(11, 350, 520, "gpu_user_annotation"),
        annotation(10, -90, 5, "user_annotation"),
        annotation(11, 5, 90, "user_annotation"),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
        *(runtime_call(name, ts) for name, ts in (("cudaStreamSynchronize", 10), ("cudaMemcpyAsync", 20),
                                                  ("cudaMemcpy", 30), ("cudaLaunchKernel", 40),
                                                  ("cudaStreamSynchronize", 360))),
    ], rank=0)
    rank1 = write_trace(tmp_path / "b.json.gz", [
        kernel("gaussian_kernel", 7, 0, 200),
        kernel("ncclDevKernel_AllReduce", 13, 0, 100),
        annotation(10, 0, 100, "user_annotation"),
    ], rank=1)
    return [rank1, rank0]


def test_synthetic_trace_exact_overlap(synthetic_traces: list):
    summary = overlap_summary([read_rank_trace(path, index) for index, path in enumerate(synthetic_traces)])
    rank0, rank1 = summary["ranks"]["0"], summary["ranks"]["1"]
    assert rank0["comm_kernels"] == 2 and rank0["compute_kernels"] == 2
    assert rank0["comm_streams"] == [20] and rank0["compute_streams"] == [7]
    assert rank0["comm_ms"] == pytest.approx(0.25)
    assert rank0["overlapped_comm_ms"] == pytest.approx(0.1)
    assert rank0["exposed_comm_ms"] == pytest.approx(0.15)
    assert rank0["overlapped_fraction"] == pytest.approx(0.4)
    assert rank0["compute_ms"] == pytest.approx(0.25) and rank0["window_ms"] == pytest.approx(0.5)
    assert rank0["gpu_busy_fraction"] == pytest.approx(0.5)  # compute kernels cover 250 of the 500 us window
    assert rank0["steps"] == [
        {"step": 10, "duration_ms": pytest.approx(0.35), "gpu_busy_fraction": pytest.approx(250 / 350),
         "host_waits": 2, "comm_ms": pytest.approx(0.15), "overlapped_comm_ms": pytest.approx(0.1),
         "overlapped_fraction": pytest.approx(2 / 3)},
        {"step": 11, "duration_ms": pytest.approx(0.17), "gpu_busy_fraction": 0.0, "host_waits": 1,
         "comm_ms": pytest.approx(0.1), "overlapped_comm_ms": 0.0, "overlapped_fraction": 0.0},
    ]
    assert rank1["overlapped_fraction"] == pytest.approx(1.0) and [s["step"] for s in rank1["steps"]] == [10]
    assert summary["total"] == {"comm_ms": pytest.approx(0.35), "overlapped_comm_ms": pytest.approx(0.2),
                                "exposed_comm_ms": pytest.approx(0.15), "overlapped_fraction": pytest.approx(4 / 7)}


def test_timeline_command_prints_json_and_plots(synthetic_traces: list, tmp_path: Path, capsys):
    out = tmp_path / "plot" / "timeline.png"
    TimelineCommand(traces=tuple(synthetic_traces), out=out, steps=1).main()
    printed = capsys.readouterr().out
    figures, _ = json.JSONDecoder().raw_decode(printed)
    assert figures["total"]["overlapped_fraction"] == pytest.approx(4 / 7)
    assert out.stat().st_size > 1000


def test_a_kernel_only_trace_gives_the_windows_gpu_busy_fraction(tmp_path: Path, capsys):
    """A trace recorded without host operations: no step marks, no host table; compute kernels at [100,300] and
    [250,400] on two streams and an NCCL kernel at [450,500] make 300 us of compute in a 400 us window."""
    path = write_trace(tmp_path / "profile_rank0.json.gz", [
        kernel("rasterize_fwd", 7, 100, 300), kernel("adam", 9, 250, 400),
        kernel("ncclDevKernel_AllReduce", 20, 450, 500),
    ])
    summary = overlap_summary([read_rank_trace(path)])["ranks"]["0"]
    assert summary["steps"] == [] and summary["window_ms"] == pytest.approx(0.4)
    assert summary["gpu_busy_fraction"] == pytest.approx(0.75)
    TimelineCommand(traces=(path,), out=tmp_path / "t.png").main()
    figures, _ = json.JSONDecoder().raw_decode(capsys.readouterr().out)
    assert figures["ranks"]["0"]["gpu_busy_fraction"] == pytest.approx(0.75) and (tmp_path / "t.png").exists()


def test_training_profiles_the_host_and_a_kernel_only_profile_needs_a_gpu(tmp_path: Path, monkeypatch):
    """ns-train's window records the host's operations (and the GPU's kernels where there is one); the lab's
    kernel-only window (``python -m odin_bench.train --kernel-only-profile``) refuses a machine without a GPU."""
    from odin_bench import train
    from odin_ns.profiling import ProfileWindow

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert ProfileWindow(1, 2, tmp_path, 0).activities() == [torch.profiler.ProfilerActivity.CPU]
    with pytest.raises(ValueError, match="records GPU kernels, and there is no GPU"):
        train.KernelOnlyProfileWindow(1, 2, tmp_path, 0)
    monkeypatch.setattr(sys, "argv", ["train", "--kernel-only-profile", "odin-splatfacto", "--profile-steps", "2"])
    with pytest.raises(SystemExit, match="--kernel-only-profile records GPU kernels only"):
        train.main()
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert train.KernelOnlyProfileWindow(1, 2, tmp_path, 0).activities() == [torch.profiler.ProfilerActivity.CUDA]


def cpu_op(name: str, start: float, end: float, tid: int = 1) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": start, "dur": end - start}


def test_host_time_per_step_is_split_into_outermost_torch_operations_and_the_rest(tmp_path: Path):
    """Steps at [0,100), [100,250) and [250,300] on the training thread (tid 1): A [10,30] encloses B, so B is not
    counted again; C [40,60]; D [120,200] and D [210,240]; the autograd engine's thread (tid 3) runs a backward at
    [50,90], overlapping C; an operation of another thread (tid 2) is not the step's. The last step has no next start
    and is left out."""
    trace = read_rank_trace(write_trace(tmp_path / "h.json.gz", [
        annotation(1, 0, 95, "user_annotation"), annotation(2, 100, 245, "user_annotation"),
        annotation(3, 250, 300, "user_annotation"),
        cpu_op("A", 10, 30), cpu_op("B", 12, 20), cpu_op("C", 40, 60), cpu_op("D", 120, 200), cpu_op("D", 210, 240),
        cpu_op("other thread", 0, 300, tid=2), cpu_op("autograd::engine::evaluate_function: MulBackward0", 50, 90, tid=3),
        runtime_call("cudaStreamSynchronize", 15), runtime_call("cudaStreamSynchronize", 70),
        runtime_call("cudaLaunchKernel", 130), runtime_call("cudaStreamSynchronize", 150),
        runtime_call("cudaStreamSynchronize", 95),  # in no operation: counted, attributed to none
    ]))
    rows = host_summary(trace)
    assert [row["step"] for row in rows] == [1, 2]
    assert rows[0]["host_ms"] == pytest.approx(0.1) and rows[0]["in_torch_ops_ms"] == pytest.approx(0.07)
    assert rows[0]["outside_torch_ops_ms"] == pytest.approx(0.03) and rows[0]["torch_ops"] == 3
    assert rows[0]["top_ops_ms"] == pytest.approx(
        {"A": 0.02, "C": 0.02, "autograd::engine::evaluate_function: MulBackward0": 0.04})
    assert rows[1]["host_ms"] == pytest.approx(0.15) and rows[1]["in_torch_ops_ms"] == pytest.approx(0.11)
    assert rows[1]["top_ops_ms"] == pytest.approx({"D": 0.11})
    backward = "autograd::engine::evaluate_function: MulBackward0"
    assert rows[0]["host_waits_in"] == {"A": 1, backward: 1, "(no torch operation)": 1}
    assert rows[1]["host_waits_in"] == {"D": 1}
    table = host_table({trace.rank: rows})
    assert "2 steps; median host step 0.12 ms = 0.09 in torch operations" in table
    assert "| D | 0.055 |" in table  # median over the two steps of D's time per step (0 and 0.11)
    assert f"by the operation they happened in: A 0.5, {backward} 0.5, (no torch operation) 0.5, D 0.5" in table


@pytest.mark.slow
def test_profile_window_through_ns_train_on_cpu(tiny_scene: Path, tmp_path: Path):
    """Steps 1 and 2 of a 4-step CPU run are profiled into the run directory; timeline finds no GPU kernels."""
    run_dir = train(tiny_scene, tmp_path, 4, "--profile-start", "1", "--profile-steps", "2")
    (trace_file,) = run_dir.glob("profile_rank*.json.gz")
    assert trace_file.name == "profile_rank0.json.gz"
    rank_trace = read_rank_trace(trace_file)
    assert [span.step for span in rank_trace.steps] == [1, 2] and rank_trace.kernels == []
    result = subprocess.run([str(BIN / "odin-bench"), "timeline", str(trace_file), "--out", str(tmp_path / "t.png")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    message = [line for line in result.stderr.splitlines() if "no GPU kernels" in line]
    assert len(message) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "t.png").exists()
    assert "rank 0: 1 steps; median host step" in result.stdout  # the host split needs no GPU
