#!/usr/bin/env bash
# cup77 on two GPUs, 400 steps, speed only: sync, quality-first, throughput-first, 2 seeds; selective Adam
# two NVIDIA H200 (NVLink), 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli bench --data data/cup77 --gpus 2 --steps 400 --seeds 2 \
    --modes sync,quality-first,throughput-first --no-stock --no-quality --out /tmp/bench; cp /tmp/bench/results.json .
