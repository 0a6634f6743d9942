#!/usr/bin/env bash
# cup77 on one GPU, 1,200 views seen, seeds 0-2: sync and sync with presized intersections at one view per step
# (a_s*), sync at four views per step (b_s*)
# one NVIDIA H200, 2026-12-01. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
B="python3 -m odin_ns.cli bench --data data/cup77 --steps 1200 --seeds 1 --gpus 1 --no-stock"
for s in 0 1 2; do
  $B --first-seed $s --modes sync,sync-presized --out /tmp/a_s$s; cp /tmp/a_s$s/results.json a_s$s.json
  $B --first-seed $s --modes sync --views-per-rank 4 --out /tmp/b_s$s; cp /tmp/b_s$s/results.json b_s$s.json
done
