"""Benchmark of odin_ns.kernels against their torch equivalents (prints markdown tables).

    python -m odin_bench.kernels_bench                       # GPU: N = 1M, 3M, 10M
    python -m odin_bench.kernels_bench --device cpu --sizes 10000   # smoke test

Scopes are uniformly random subsets of the Gaussians (the worst case for locality). Three tables:

* scope checks: each bitmap kernel vs the torch way of doing the same thing (bool masks, or the torch fallback):
  single-call latency, host time per call and GPU time (CUDA-graph replay);
* publication: the fused selective Adam step over a splatfacto parameter set (59 floats per Gaussian in 6 tensors)
  vs the runtime's packed publication (one launch over a [N, 59] table) launched and replayed from a CUDA graph,
  and dense Adam's publication whole against its two parts (the drift of the rows outside the scope, no gradient
  read, and the scope's rows),
  torch's fused dense Adam and the torch (index-based) fallback, with the bandwidth it achieves on the bytes it
  must move (param, grad and both moments of the scoped rows read, param and moments written, plus the bitmap),
  against the measured copy bandwidth and the H200's ~4.3 TB/s; also on the 32-byte sectors those rows occupy,
  which is what DRAM actually moves for scattered rows;
* compaction crossover: gather + exchange of the scoped rows + scatter, vs exchanging the dense gradients, for an
  exchange link of ``link_gbps`` (modelled: the buffer bytes over the link bandwidth).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch
import tyro
from tqdm import tqdm

import odin_ns.kernels as K
from odin_ns.gaussians import GAUSSIAN_COLUMNS

H200_COPY_GBPS = 4300.0
PUBLICATION_PASSES = 7  # Adam reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq


@dataclass
class KernelsBenchCommand:
    """Time the Odin kernels (Triton) against torch at several model sizes and scope fractions."""

    device: str = "cuda"
    """Device to run on ("cpu" only as a smoke test: Triton needs CUDA, so there both columns are torch)."""
    sizes: tuple[int, ...] = (1_000_000, 3_000_000, 10_000_000)
    """Numbers of Gaussians N."""
    fractions: tuple[float, ...] = (0.01, 0.1, 0.5, 1.0)
    """Scope sizes as fractions of N."""
    cameras: int = 4
    """Cameras per unit: pack_bitmap ORs a [cameras, N] visibility mask."""
    repeats: int = 30
    """Timed repetitions per measurement (the median is reported)."""
    link_gbps: float = 400.0
    """Exchange bandwidth (GB/s) assumed for the compaction crossover."""
    seed: int = 0

    def main(self) -> None:
        device = torch.device(self.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda requested but CUDA is not available; use --device cpu for a smoke test")
        torch.manual_seed(self.seed)
        kernel_backend = "triton" if device.type == "cuda" else "torch"
        copy_gbps = measure_copy_gbps(device, self.repeats)
        print(f"# odin_ns.kernels benchmark on {describe(device)}; kernels backend: {kernel_backend}")
        print(f"measured copy bandwidth: {copy_gbps:.0f} GB/s (H200 reference {H200_COPY_GBPS:.0f} GB/s)\n")
        checks, publication, compaction = [], [], []
        compaction_ratios: dict[int, list[tuple[float, float]]] = {n: [] for n in self.sizes}
        timer = Timer(device, self.repeats)
        cases = [(n, f) for n in self.sizes for f in sorted(self.fractions)]
        for n, fraction in tqdm(cases, desc="benchmark", unit="case"):
            checks += bench_scope_checks(timer, n, fraction, self.cameras, kernel_backend)
            publication.append(bench_publication(timer, n, fraction, kernel_backend, copy_gbps))
            row, ratio = bench_compaction(timer, n, fraction, kernel_backend, self.link_gbps)
            compaction.append(row)
            compaction_ratios[n].append((fraction, ratio))
            if device.type == "cuda":
                torch.cuda.empty_cache()
        print_table(
            "Scope checks (us, median): latency of one call (launch to result), host time per call (what the "
            "issuing thread spends), GPU time (CUDA-graph replay, no launch overhead)",
            checks,
        )
        print_table("Publication: selective Adam over splatfacto parameters (6 tensors, 59 floats/row)", publication)
        print_table(f"Compaction crossover (exchange modelled at {self.link_gbps:.0f} GB/s)", compaction)
        print(crossover_summary(compaction_ratios))


class Timer:
    """Median time of a callable in microseconds; a warm-up call first (it compiles the Triton kernels)."""

    GRAPH_CALLS = 20  # calls captured per CUDA graph

    def __init__(self, device: torch.device, repeats: int):
        self.device, self.repeats = device, repeats

    def __call__(self, fn: Callable[[], object]) -> float:
        """Latency of one call as the caller sees it: CUDA events on GPU (launch overhead included), else wall time."""
        fn()
        samples = []
        for _ in range(self.repeats):
            if self.device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e3)
            else:
                begin = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - begin) * 1e6)
        return statistics.median(samples)

    def host_time(self, fn: Callable[[], object]) -> float:
        """Time one call keeps the calling thread busy (launch overhead), from back-to-back calls."""
        fn()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        begin = time.perf_counter()
        for _ in range(self.repeats):
            fn()
        micros = (time.perf_counter() - begin) * 1e6 / self.repeats
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return micros

    def device_time(self, fn: Callable[[], object]) -> float | None:
        """GPU time of one call without Python launch overhead (CUDA-graph replay); None on CPU.

        ``fn`` must not synchronise with the host (a failed capture leaves CUDA state unusable).
        """
        if self.device.type != "cuda":
            return None
        fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(self.GRAPH_CALLS):
                fn()
        return self(graph.replay) / self.GRAPH_CALLS


def _format_us(micros: float | None) -> str:
    return "n/a" if micros is None else f"{micros:.1f}"


def describe(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


def measure_copy_gbps(device: torch.device, repeats: int) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second) on a 1 GiB buffer (16 MiB on CPU)."""
    num_bytes = 2**30 if device.type == "cuda" else 2**24
    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    micros = Timer(device, repeats)(lambda: dst.copy_(src))
    return 2 * num_bytes / micros / 1e3


def random_scope(n: int, fraction: float, device: torch.device) -> torch.Tensor:
    return torch.rand(n, device=device) < fraction


def bench_scope_checks(timer: Timer, n: int, fraction: float, cameras: int, backend: str) -> list[dict]:
    """Each bitmap kernel vs its torch equivalent on bool masks (or the torch fallback where masks have none)."""
    device = timer.device
    visibility = torch.rand(cameras, n, device=device) < fraction / cameras
    read_mask, update_mask = random_scope(n, fraction, device), random_scope(n, fraction, device)
    read, update = K.pack_bitmap(read_mask), K.pack_bitmap(update_mask)
    ops = {
        "pack_bitmap [C,N]": (lambda: K.pack_bitmap(visibility, backend=backend), lambda: visibility.any(dim=0)),
        "bitmap_or": (lambda: K.bitmap_or(read, update, backend=backend), lambda: read_mask | update_mask),
        "bitmap_andnot": (lambda: K.bitmap_andnot(read, update, backend=backend), lambda: read_mask & ~update_mask),
        "bitmap_count": (lambda: K.bitmap_count(read, backend=backend), lambda: read_mask.sum()),
        "bitmap_and_count": (
            lambda: K.bitmap_and_count(read, update, backend=backend),
            lambda: (read_mask & update_mask).sum(),
        ),
        "overlap_ratio": (
            lambda: K.overlap_ratio(read, update, backend=backend),
            lambda: (read_mask & update_mask).sum() / read_mask.sum().clamp_min(1),
        ),
        "bitmap_to_mask": (
            lambda: K.bitmap_to_mask(read, n, backend=backend),
            lambda: K.bitmap_to_mask(read, n, backend="torch"),
        ),
        "bitmap_indices": (
            lambda: K.bitmap_indices(read, n, backend=backend),
            lambda: torch.nonzero(read_mask).squeeze(1),
        ),
    }
    host_synchronising = {"bitmap_indices"}  # data-dependent output size: no CUDA-graph timing
    rows = []
    for name, (kernel, torch_equivalent) in ops.items():
        graph_timed = name not in host_synchronising
        kernel_gpu = timer.device_time(kernel) if graph_timed else None
        torch_gpu = timer.device_time(torch_equivalent) if graph_timed else None
        rows.append(
            {"kernel": name, "N": n, "scope": f"{fraction:.0%}",
             "kernel latency": _format_us(timer(kernel)), "kernel host": _format_us(timer.host_time(kernel)),
             "kernel GPU": _format_us(kernel_gpu), "torch latency": _format_us(timer(torch_equivalent)),
             "torch GPU": _format_us(torch_gpu),
             "GPU speedup": "n/a" if kernel_gpu is None else f"{torch_gpu / kernel_gpu:.1f}x"}
        )
    return rows


def splatfacto_tensors(n: int, device: torch.device) -> list[torch.Tensor]:
    return [torch.randn(n, *shape, device=device) for shape in GAUSSIAN_COLUMNS.values()]


def bench_publication(timer: Timer, n: int, fraction: float, backend: str, copy_gbps: float) -> dict:
    """Fused selective Adam vs torch's fused dense Adam and the torch fallback, with bandwidth vs the floor."""
    device = timer.device
    params = [torch.nn.Parameter(t) for t in splatfacto_tensors(n, device)]
    for param in params:
        param.grad = torch.randn_like(param)
    moments = [(torch.zeros_like(p), torch.rand_like(p)) for p in params]
    visible = random_scope(n, fraction, device)
    rows = K.pack_bitmap(visible)

    def publish(publish_backend: str) -> Callable[[], None]:
        def step() -> None:
            for param, (exp_avg, exp_avg_sq) in zip(params, moments):
                K.selective_adam_step(
                    param, param.grad, exp_avg, exp_avg_sq, rows, 1e-4, 0.9, 0.999, 1e-15, 10, backend=publish_backend
                )

        return step

    kernel_us = timer(publish(backend))
    fallback_us = timer(publish("torch"))
    packed = packed_publication_us(timer, n, rows)
    dense_adam = torch.optim.Adam(params, lr=1e-4, eps=1e-15, fused=device.type == "cuda")
    dense_us = timer(dense_adam.step)

    bitmap_bytes = len(params) * rows.numel() * 4
    floor_bytes = PUBLICATION_PASSES * 4 * sum(p[0].numel() for p in params) * int(visible.sum()) + bitmap_bytes
    sector_bytes = PUBLICATION_PASSES * touched_sector_bytes(visible, [p[0].numel() for p in params]) + bitmap_bytes
    floor_gbps, sector_gbps = floor_bytes / kernel_us / 1e3, sector_bytes / kernel_us / 1e3
    return {
        "N": n, "scope": f"{fraction:.0%}", "fused kernel us": f"{kernel_us:.0f}",
        "torch fused dense Adam us": f"{dense_us:.0f}", "torch fallback us": f"{fallback_us:.0f}",
        **packed, "floor MB": f"{floor_bytes / 1e6:.1f}", "floor GB/s": f"{floor_gbps:.0f}",
        "floor % of copy BW": f"{floor_gbps / copy_gbps:.0%}",
        "floor % of 4.3 TB/s": f"{floor_gbps / H200_COPY_GBPS:.0%}",
        "32B-sector floor MB": f"{sector_bytes / 1e6:.1f}",
        "sector floor % of copy BW": f"{sector_gbps / copy_gbps:.0%}",
    }


def packed_publication_us(timer: Timer, n: int, rows: torch.Tensor) -> dict[str, str]:
    """The runtime's publication, one fused launch over a packed [N, 59] table with splatfacto's per-group learning
    rates: host time per call and latency, launched every time against replayed from a CUDA graph (``PackedAdam``)."""
    device = timer.device
    spans = [0, *itertools.accumulate(math.prod(shape) for shape in GAUSSIAN_COLUMNS.values())]
    columns = [K.ColumnGroup(lo, hi, 1e-3, 1e-15) for lo, hi in zip(spans, spans[1:])]
    tables = [torch.randn(n, spans[-1], device=device) for _ in range(3)] + [torch.rand(n, spans[-1], device=device)]
    row = {}
    for name, capture in (("launched", False), ("replayed", True)):
        adam, step = K.PackedAdam(capture=capture), itertools.count(1)

        def publish() -> None:
            adam.step(*tables, rows, columns, 0.9, 0.999, next(step), (0, n))

        publish()  # the replayed one captures at its second call, before the timing
        row[f"packed {name} host us"] = f"{timer.host_time(publish):.1f}"
        row[f"packed {name} latency us"] = f"{timer(publish):.1f}"
    dense_adam_parts = {
        "dense": (tables[1], None, False),  # every row with its gradient: sync's publication under dense Adam
        "drift": (None, rows, True),  # the rows outside the scope, no gradient read: launched before the exchange lands
        "scope": (tables[1], rows, False),  # the scope's rows, when the exchange lands
    }
    for name, (grad, selection, complement) in dense_adam_parts.items():
        adam, step = K.PackedAdam(capture=True), itertools.count(1)

        def publish() -> None:
            adam.step(tables[0], grad, *tables[2:], selection, columns, 0.9, 0.999, next(step), (0, n),
                      complement=complement)

        publish()
        row[f"{name} latency us"] = f"{timer(publish):.1f}"
    return row


def touched_sector_bytes(visible: torch.Tensor, row_sizes: list[int]) -> int:
    """Bytes of the 32-byte DRAM sectors holding selected float32 rows, summed over tensors of the given row sizes.

    For scattered rows narrower than a sector this, not the row bytes, is what any kernel must move.
    """
    total = 0
    for row_size in row_sizes:
        selected = visible.repeat_interleave(row_size)
        selected = torch.nn.functional.pad(selected, (0, -selected.numel() % 8))
        total += int(selected.view(-1, 8).any(dim=1).sum()) * 32
    return total


def bench_compaction(timer: Timer, n: int, fraction: float, backend: str, link_gbps: float) -> tuple[dict, float]:
    """Scoped exchange (indices + gather + modelled transfer + scatter) vs dense transfer of all gradients.

    Returns the table row and the ratio compact time / dense time.
    """
    device = timer.device
    grads = splatfacto_tensors(n, device)
    rows = K.pack_bitmap(random_scope(n, fraction, device))
    indices = K.bitmap_indices(rows, n)
    buf = K.gather_rows_packed(grads, indices)
    indices_us = timer(lambda: K.bitmap_indices(rows, n, backend=backend))
    gather_us = timer(lambda: K.gather_rows_packed(grads, indices, backend=backend))
    scatter_us = timer(lambda: K.scatter_rows_packed(grads, indices, buf, backend=backend))
    torch_gather_us = timer(lambda: K.gather_rows_packed(grads, indices, backend="torch"))
    transfer_us = buf.numel() * 4 / link_gbps / 1e3
    dense_us = sum(g.numel() for g in grads) * 4 / link_gbps / 1e3
    compact_us = indices_us + gather_us + transfer_us + scatter_us
    row = {
        "N": n, "scope": f"{fraction:.0%}", "indices us": f"{indices_us:.0f}", "gather us": f"{gather_us:.0f}",
        "torch gather us": f"{torch_gather_us:.0f}", "scatter us": f"{scatter_us:.0f}",
        "compact total us": f"{compact_us:.0f}", "dense transfer us": f"{dense_us:.0f}",
        "compaction wins": "yes" if compact_us < dense_us else "no",
    }
    return row, compact_us / dense_us


def crossover_summary(ratios: dict[int, list[tuple[float, float]]]) -> str:
    """Per N, the scope fraction where compaction stops beating a dense exchange (linear interpolation)."""
    lines = ["Compaction crossover (scope fraction where compact == dense):"]
    for n, points in ratios.items():
        crossing = "compaction always wins" if all(r < 1 for _, r in points) else "compaction never wins"
        for (f0, r0), (f1, r1) in zip(points, points[1:]):
            if r0 < 1 <= r1:
                crossing = f"~{f0 + (1 - r0) * (f1 - f0) / (r1 - r0):.0%}"
        lines.append(f"- N={n:,}: {crossing}")
    return "\n".join(lines) + "\n"


def print_table(title: str, rows: list[dict]) -> None:
    columns = list(rows[0])
    print(f"## {title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{row[c]:,}" if isinstance(row[c], int) else str(row[c]) for c in columns) + " |")
    print()


if __name__ == "__main__":
    tyro.cli(KernelsBenchCommand).main()
