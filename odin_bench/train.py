"""``ns-train`` with the lab's training variants, which odin-splatfacto's own options do not offer.

Usage: ``python -m odin_bench.train [--alternating-cost] [--kernel-only-profile] [--no-exchange] [--fewest-buckets]
odin-splatfacto ARGS``; on several ranks, one process per rank under torchrun (``torchrun --nproc-per-node 2 -m
odin_bench.train ...``): nerfstudio's own launcher (``--machine.num-devices``) starts its ranks in fresh processes,
which would train without the variants.

* ``--alternating-cost``: the datamanager deals the alternating-cost workload (:mod:`odin_bench.workloads`).
* ``--no-exchange``: every rank trains alone (the pipeline's replica context is the rank itself), so nothing crosses
  ranks and the replicas diverge: the compute floor the exchanging runs are compared against. Run it with
  ``--pipeline.odin.mode sync`` (one rank has no window to overlap). Each rank still starts from rank 0's Gaussians
  and a checkpoint holds rank 0's model.
* ``--fewest-buckets``: the exchange is cut into as few buckets as ``--pipeline.odin.bucket-mb`` allows, with no
  minimum count (``odin_ns.runtime.config.MIN_BUCKETS``): the fewest collectives per unit.
* ``--kernel-only-profile``: the ``--profile-steps`` window records the GPU's kernels only. Recording host operations
  costs the host a few microseconds per torch operation, which slows a host-bound step and so lowers the GPU-busy
  fraction the trace shows; without them the host runs at its training pace, and the window's GPU-busy fraction
  (``odin-bench timeline``) is the one training has. Such a trace has no step marks and no host table.
"""

from __future__ import annotations

import argparse
import sys
from typing import List

import torch

from odin_ns import pipeline, profiling
from odin_ns.comm.context import DistContext
from odin_ns.data import datamanager
from odin_ns.runtime import config as runtime_config


class KernelOnlyProfileWindow(profiling.ProfileWindow):
    """A profile window that records the GPU's kernels and nothing of the host."""

    def __init__(self, *args, **kwargs) -> None:
        if not torch.cuda.is_available():
            raise ValueError("a kernel-only profile records GPU kernels, and there is no GPU")
        super().__init__(*args, **kwargs)

    def activities(self) -> List[torch.profiler.ProfilerActivity]:
        return [torch.profiler.ProfilerActivity.CUDA]


def alone(self: pipeline.OdinPipeline) -> DistContext:
    """``OdinPipeline._replica_context`` of a rank that trains alone."""
    return self.context.solo()


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # --help is ns-train's
    parser.add_argument("--alternating-cost", action="store_true")
    parser.add_argument("--kernel-only-profile", action="store_true")
    parser.add_argument("--no-exchange", action="store_true")
    parser.add_argument("--fewest-buckets", action="store_true")
    variants, ns_train_args = parser.parse_known_args()
    if variants.alternating_cost and any(arg.startswith("--pipeline.datamanager.plan-path") for arg in ns_train_args):
        raise SystemExit("error: --alternating-cost deals the plan the datamanager builds, not one from a plan file")
    if variants.kernel_only_profile:
        if not torch.cuda.is_available():
            raise SystemExit("error: --kernel-only-profile records GPU kernels only, and this machine has no GPU")
        profiling.ProfileWindow = KernelOnlyProfileWindow  # the trainer looks it up when it builds its window
    if variants.alternating_cost:
        from odin_bench.workloads import alternating_cost_training_views

        datamanager.plan_training_views = alternating_cost_training_views  # looked up when the plan is built
    if variants.no_exchange:
        pipeline.OdinPipeline._replica_context = alone
    if variants.fewest_buckets:
        runtime_config.MIN_BUCKETS = 1  # looked up whenever the exchange is planned
    from nerfstudio.scripts.train import entrypoint

    sys.argv = ["ns-train", *ns_train_args]
    entrypoint()


if __name__ == "__main__":
    main()
