#!/usr/bin/env bash
# odin_ns.kernels on one GPU: scope checks, selective Adam publication, compaction crossover
# one NVIDIA H200 (torch 2.11.0+cu130, Triton 3.6), 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.benchmarks.kernels_bench > kernels_bench.md
