#!/usr/bin/env bash
# cup77 on two GPUs, 300 steps, speed only: sync against quality-first with predicted read scopes, seeds 0-3
# (seeds 0-1 also with presized intersections); selective Adam
# two NVIDIA H200 (NVLink), 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
B="python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1 --steps 300 --data data/cup77"
for s in 0 1; do
  $B --first-seed $s --modes sync,sync-presized,quality-first-predicted,quality-first-predicted-presized --out /tmp/a$s
  cp /tmp/a$s/results.json cup_s$s.json
done
for s in 2 3; do $B --first-seed $s --modes sync,quality-first-predicted --out /tmp/a$s; cp /tmp/a$s/results.json cup_s$s.json; done
