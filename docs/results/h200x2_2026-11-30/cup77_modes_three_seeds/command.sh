#!/usr/bin/env bash
# cup77 on two GPUs, 600 steps: sync, quality-first and throughput-first (tau 0.2), seeds 42-44, held-out quality;
# selective Adam on two ranks
# two NVIDIA H200 (NVLink), 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli bench --data data/cup77 --gpus 2 --steps 600 --modes sync,quality-first,throughput-first --seeds 2 \
    --no-stock --out /tmp/bench_cup_seeds
python3 -m odin_ns.cli bench --data data/cup77 --gpus 2 --steps 600 --modes sync,quality-first,throughput-first --seeds 1 \
    --first-seed 2 --no-stock --out /tmp/bench_cup_seed3
python3 -m odin_ns.cli bench-report --results /tmp/bench_cup_seeds/results.json /tmp/bench_cup_seed3/results.json --out merged
cp merged/results.json results.json
