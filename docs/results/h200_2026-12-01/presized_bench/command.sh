#!/usr/bin/env bash
# presized tile intersections (Triton fill + torch.sort) against gsplat's isect_tiles, one camera at 1280x720
# one NVIDIA H200, 2026-12-01. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli bench-presized > bench_presized.txt 2>&1
