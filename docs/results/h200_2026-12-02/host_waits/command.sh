#!/usr/bin/env bash
# host synchronisations per steady training step on cup77, one GPU (Python and C++ call sites)
# one NVIDIA H200, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 1 4 > host_waits.log 2>&1
python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 1 4 --presized-intersections > host_waits_presized.log 2>&1
python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 4 --presized-intersections --steps 12 \
    > host_waits_presized_4_views.txt 2>&1
