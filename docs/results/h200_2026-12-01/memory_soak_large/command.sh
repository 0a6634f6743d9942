#!/usr/bin/env bash
# host and GPU memory over 30,000 steps of the large scene, densifying until step 15,000, one rank
# one NVIDIA H200, 2026-12-01. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
python3 -m odin_ns.benchmarks.memory_soak --data /tmp/large --steps 30000 --ranks 1 --stop-split-at 15000 \
    --sample-every-s 10 --max-seconds 500 --out /tmp/soak > soak.txt 2>&1
cp /tmp/soak/results.json .
