"""Session probe (not in git): how much of a training step would a CUDA-graph-captured compute remove?

Times, on one GPU, after warm-up, with presized intersections and the structure frozen (no densification):
  A. the full eager step (run_step: callbacks, the runtime's unit, the optimizer, the schedulers), ms/step;
  B. the model's forward, loss and backward alone, eager, on one fixed batch: wall ms/step and host ms/step
     (time until Python returns, before the sync);
  C. the same compute captured in one CUDA graph and replayed.
Usage: python3 .gpu/graph_probe.py DATA VIEWS_PER_RANK [VIEWS_PER_RANK...]
"""

import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

from odin_ns.benchmarks.host_waits import in_process_trainer, run_step


def timed(fn, n):
    torch.cuda.synchronize()
    start = time.perf_counter()
    host = 0.0
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        host += time.perf_counter() - t0
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e3, host / n * 1e3


def probe(data, views_per_rank):
    out = Path(tempfile.mkdtemp())
    trainer = in_process_trainer(data, out, "cuda", views_per_rank=views_per_rank, presized_intersections=True,
                                 stop_split_at=0, background_color="white")
    model = trainer.pipeline.model
    step = 0
    for step in range(1, 121):
        run_step(trainer, step)
    n = 60
    counter = iter(range(step + 1, step + 10_000))
    full, full_host = timed(lambda: run_step(trainer, next(counter)), n)
    print(f"B={views_per_rank} N={model.num_points}: A full eager step {full:.2f} ms (host {full_host:.2f})", flush=True)

    camera, batch = trainer.pipeline.datamanager.next_train(step + 1)
    params = list(model.gauss_params.values())

    def compute():
        outputs = model(camera)
        losses = model.get_loss_dict(outputs, batch)
        loss = torch.stack(list(losses.values())).sum()
        loss.backward()
        return loss

    for _ in range(5):
        compute()
    eager, eager_host = timed(compute, n)
    print(f"  B eager compute {eager:.2f} ms (host {eager_host:.2f})", flush=True)
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                compute()
            torch.cuda.set_sync_debug_mode("error")  # a host sync in the compute raises here, with its call site
            try:
                compute()
            finally:
                torch.cuda.set_sync_debug_mode(0)
        torch.cuda.current_stream().wait_stream(side)
        model._presized.budget.observe = lambda keys, capacity, counts: None  # frozen: no event in the capture
        for p in params:
            p.grad = None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = compute()
        graph.replay()
        torch.cuda.synchronize()
        captured_loss = static_loss.item()
        for p in params:
            p.grad = None
        eager_loss = compute().item()
        print(f"  loss captured {captured_loss:.6f} eager {eager_loss:.6f}", flush=True)
        with torch.no_grad():
            forward = torch.cuda.CUDAGraph()
            with torch.cuda.graph(forward):
                static_rgb = model(camera)["rgb"]
            forward.replay()
            eager_rgb = model(camera)["rgb"]
            torch.cuda.synchronize()
            print(f"  forward captured vs eager: max |diff| {(static_rgb - eager_rgb).abs().max().item():.3g}, "
                  f"mean captured {static_rgb.mean().item():.4f} eager {eager_rgb.mean().item():.4f}", flush=True)
        replay, replay_host = timed(graph.replay, n)
        print(f"  C captured compute {replay:.2f} ms (host {replay_host:.2f}); "
              f"A-B+C = {full - eager + replay:.2f} ms", flush=True)
    except Exception:
        print("  C capture failed:", flush=True)
        traceback.print_exc()


if __name__ == "__main__":
    data = sys.argv[1]
    for b in sys.argv[2:]:
        try:
            probe(data, int(b))
        except Exception:
            traceback.print_exc()
        torch.cuda.empty_cache()
