#!/usr/bin/env bash
# 2-core CPU, no GPU, 2026-12-03, from the repository root. Seeds 0-2 ran in one invocation; the run of seed 2's
# third configuration was stopped unfinished to free the CPU. Each finished run's PSNR is in results.json.
python docs/results/cpu_2026-12-03/dense_across_ranks/dense_across_ranks.py 300 0 1 2 3
