#!/usr/bin/env bash
# the large scene, stock splatfacto against odin-splatfacto with selective Adam, one GPU, 300 steps, seed 2
# (seeds 0-1: h200_2026-12-01/large_selective_vs_stock)
# one NVIDIA H200, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 2 --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0 --pipeline.odin.adam selective" --out /tmp/ls_s2 > ls_s2.txt 2>&1
cp /tmp/ls_s2/results.json ls_s2.json
# as recorded, without the --pipeline.odin.adam flag: selective Adam was then the one-rank default
