#!/usr/bin/env bash
# castle-P30 (built by docs/data/castle_p30.py into data/castle_p30), stock splatfacto against odin-splatfacto
# on one GPU, 1,000 steps, held-out quality, seeds 0-1
# one NVIDIA H200, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
for s in 0 1; do
  python3 -m odin_ns.cli bench --data data/castle_p30 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
      --out /tmp/k_s$s > k_s$s.txt 2>&1; cp /tmp/k_s$s/results.json k_s$s.json
done
