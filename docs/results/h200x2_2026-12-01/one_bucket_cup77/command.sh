#!/usr/bin/env bash
# cup77 on two GPUs, 300 steps, speed only: sync (9 buckets) against sync with one bucket, seeds 0-2; selective Adam
# two NVIDIA H200 (NVLink), 2026-12-01. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
for s in 0 1 2; do
  python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1 --steps 300 --data data/cup77 \
      --first-seed $s --modes sync,sync-one-bucket --out /tmp/k$s; cp /tmp/k$s/results.json buckets_s$s.json
done
