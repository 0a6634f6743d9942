"""How a unit's gradients get into its packed [N, 59] gradient table, GPU time per step at the large scene's N:
(a) a zeroed table whose strided column views receive each gradient by an in-place addition (what autograd did while
the views were the shadow views' .grad), (b) torch.cat, (c) odin_ns.kernels.pack_columns (Triton, whole rows per
program). The gradients have splatfacto's shapes; features come as contiguous tensors (autograd clones the slices of
the colour concatenation's backward before handing them out)."""
import statistics, sys
import torch
import odin_ns.kernels as K

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1290820
widths = (3, 3, 4, 3, 45, 1)
grads = [torch.randn(n, w, device="cuda") for w in widths]
spans = [sum(widths[:i]) for i in range(len(widths) + 1)]

def accumulated():
    table = torch.zeros(n, 59, device="cuda")
    for g, lo, hi in zip(grads, spans, spans[1:]):
        table[:, lo:hi].add_(g)
    return table

ways = {"zeroed table + strided additions": accumulated, "torch.cat": lambda: torch.cat(grads, dim=1),
        "pack_columns (Triton)": lambda: K.pack_columns(grads)}
reference = torch.cat(grads, dim=1)
for name, way in ways.items():
    assert torch.equal(way(), reference), name
    samples = []
    for _ in range(30):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); way(); end.record(); end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    print(f"{name}: median {statistics.median(samples):.0f} us (min {min(samples):.0f}, max {max(samples):.0f}), N={n:,}")
