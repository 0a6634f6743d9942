#!/usr/bin/env bash
# unit logs of sync on cup77 (1 and 2 GPUs, seeds 0-2, 300 steps) and the large scene (1 GPU, 200 steps) with the
# benches' step times: the inputs of docs/scaling.md's bound on the paper's claims
# two NVIDIA H200 (NVLink), 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli bench --data data/cup77 --steps 300 --seeds 3 --gpus 2 --modes sync --no-quality
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
python3 -m odin_ns.cli bench --data /tmp/large --steps 200 --seeds 1 --gpus 2 --modes sync --no-quality \
    "--extra=--pipeline.model.stop-split-at 0"
# kept: results.json as bench_cup77.json and bench_large.json, each run's config.yml and odin_units*.jsonl
