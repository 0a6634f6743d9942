#!/usr/bin/env bash
# the large generated scene, stock splatfacto against odin-splatfacto on one GPU, 300 steps, no densification, seeds 0-1
# (seed 2: h200_2026-12-03/large_vs_stock)
# one NVIDIA H200, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
for s in 0 1; do
  python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed $s --gpus 1 --modes sync \
      "--extra=--pipeline.model.stop-split-at 0" --out /tmp/ls_s$s > ls_s$s.txt 2>&1; cp /tmp/ls_s$s/results.json ls_s$s.json
done
