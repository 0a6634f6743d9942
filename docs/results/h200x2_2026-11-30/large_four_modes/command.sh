#!/usr/bin/env bash
# the large scene on two GPUs, 200 steps, no densification: sync, quality-first, throughput-first, no-exchange;
# selective Adam, exchange auto (scoped on this scene)
# two NVIDIA H200 (NVLink), 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
python3 -m odin_ns.cli bench --data /tmp/large --gpus 2 --steps 200 --no-stock --no-quality \
    --modes sync,quality-first,throughput-first,no-exchange "--extra=--pipeline.model.stop-split-at 0 --pipeline.odin.exchange auto" \
    --out /tmp/bench_large; cp /tmp/bench_large/results.json .
# as recorded, without --pipeline.odin.exchange auto: auto was then the default exchange
