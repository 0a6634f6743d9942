#!/usr/bin/env bash
# selective against dense Adam through heavy densification on a generated scene (40 views of 128x96, refines every
# 30 steps from step 90), nerfstudio's plain loop as the reference; and Adam written out on the visible rows with frozen
# or decayed moments
# 2-core CPU, no GPU, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python docs/results/cpu_2026-12-02/selective_vs_dense/adam_through_densification.py 300 3 > adam_through_densification.txt
python docs/results/cpu_2026-12-02/selective_vs_dense/lazy_selective_adam.py 300 3 > lazy_selective_adam.txt
