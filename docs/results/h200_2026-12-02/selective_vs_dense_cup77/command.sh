#!/usr/bin/env bash
# cup77 on one GPU, 1,000 steps, odin-splatfacto with selective and with dense Adam (seeds 0-1; stock beside the
# selective runs)
# one NVIDIA H200, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
for s in 0 1; do
  python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
      "--extra=--pipeline.odin.adam selective" --out /tmp/c_s$s; cp /tmp/c_s$s/results.json selective_s$s.json
  python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
      --no-stock "--extra=--pipeline.odin.adam dense" --out /tmp/d_s$s; cp /tmp/d_s$s/results.json dense_s$s.json
done
# as recorded, the selective runs had no --pipeline.odin.adam flag: selective Adam was then the one-rank default
