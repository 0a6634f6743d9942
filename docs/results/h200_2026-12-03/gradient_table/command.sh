#!/usr/bin/env bash
# three ways into a unit's packed gradient table, GPU time (CUDA events, median of 30)
# one NVIDIA H200, 2026-12-03. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 docs/results/h200_2026-12-03/gradient_table/gradient_table.py > gradient_table.txt 2>&1        # 1,290,820 rows
python3 docs/results/h200_2026-12-03/gradient_table/gradient_table.py 9262 >> gradient_table.txt 2>&1  # cup77's rows
