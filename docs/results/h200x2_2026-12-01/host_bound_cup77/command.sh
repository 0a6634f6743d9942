#!/usr/bin/env bash
# cup77, 300 steps, speed only, one seed per round: one GPU sync, then two GPUs sync (9 buckets), sync with one
# bucket and no-exchange; selective Adam on two ranks. results.tgz: the benches' results.json; unit_logs.tgz: every run's
# odin_units*.jsonl
# two NVIDIA H200 (NVLink), 2026-12-01. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
B="python3 -m odin_ns.cli bench --no-quality --no-stock --seeds 1 --steps 300 --data data/cup77"
for s in 0 1 2; do
  $B --gpus 1 --first-seed $s --modes sync --out /tmp/w1_s$s
  $B --gpus 2 --first-seed $s --modes sync,sync-one-bucket,no-exchange --out /tmp/w2_s$s
done
# sync cut cup77's 2.2 MB exchange into 9 buckets; sync-one-bucket into one, the plan the runtime uses for it now
