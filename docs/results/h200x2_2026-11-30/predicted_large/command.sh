#!/usr/bin/env bash
# the large scene on two GPUs, 200 steps, no densification, speed only: sync against quality-first with predicted
# read scopes, seeds 0-2 (seed 0 also no-exchange); selective Adam
# two NVIDIA H200 (NVLink), 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
B="python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1 --steps 200 --data /tmp/large"
$B --first-seed 0 --modes sync,quality-first-predicted,no-exchange "--extra=--pipeline.model.stop-split-at 0" --out /tmp/L0
for s in 1 2; do $B --first-seed $s --modes sync,quality-first-predicted "--extra=--pipeline.model.stop-split-at 0" --out /tmp/L$s; done
for s in 0 1 2; do cp /tmp/L$s/results.json large_s$s.json; done
# large_s0.json also holds a run of a sharded-optimizer configuration that odin-ns no longer has
