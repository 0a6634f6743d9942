#!/usr/bin/env bash
# the large generated scene, stock splatfacto against odin-splatfacto on one GPU, 300 steps, no densification, seed 2
# one NVIDIA H200, 2026-12-03. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 2 --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/ls_s2 > ls_s2.txt 2>&1; cp /tmp/ls_s2/results.json ls_s2.json
