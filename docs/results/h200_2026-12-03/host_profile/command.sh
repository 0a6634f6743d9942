#!/usr/bin/env bash
# where a steady step's time goes on one GPU: cup77 at one and four views per step, the large scene at one
# one NVIDIA H200, 2026-12-03. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.benchmarks.host_profile --data data/cup77 --views-per-rank 1 4 --out /tmp/hp_cup > host_profile_cup77.txt 2>&1
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
python3 -m odin_ns.benchmarks.host_profile --data /tmp/large --views-per-rank 1 --out /tmp/hp_large > host_profile_large.txt 2>&1
