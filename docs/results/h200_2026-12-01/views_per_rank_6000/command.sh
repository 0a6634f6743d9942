#!/usr/bin/env bash
# cup77 on one GPU, 6,000 views seen: one view per step (6,000 steps) against four (1,500 steps), seeds 0-2
# one NVIDIA H200, 2026-12-01. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
for s in 0 1 2; do
  python3 -m odin_ns.cli bench --data data/cup77 --steps 6000 --seeds 1 --first-seed $s --gpus 1 --no-stock \
      --modes sync --views-per-rank 1 4 --out /tmp/b6k_s$s > b6k_s$s.txt 2>&1; cp /tmp/b6k_s$s/results.json b6k_s$s.json
done
