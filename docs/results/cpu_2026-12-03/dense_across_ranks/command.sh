#!/usr/bin/env bash
# 2-core CPU, no GPU, 2026-12-03, from the repository root. Two invocations: the first trained seeds 0-2 until a
# two-rank run of seed 1 stopped on the CPU rasterizer's NaN (a Gaussian on a camera's plane) and seed 2's selective
# run was stopped unfinished to free the CPU; the second, with the rasterizer projecting culled Gaussians from the
# camera's axis (bitwise the same images and gradients otherwise), trained those two runs. Each finished run's PSNR is
# kept in results.json (/tmp/dense_across_ranks/results.json while running); output.txt is the second invocation's.
python docs/results/cpu_2026-12-03/dense_across_ranks/dense_across_ranks.py 300 0 1 2
# Three more seeds (a third invocation, with the stored seeds 0-2 kept): output_seeds_0_to_5.txt holds its table over
# all six.
python docs/results/cpu_2026-12-03/dense_across_ranks/dense_across_ranks.py 300 3 4 5
# Three more seeds (a fourth invocation, with the stored seeds 0-5 kept): output_seeds_0_to_8.txt holds its table over
# all nine.
python docs/results/cpu_2026-12-03/dense_across_ranks/dense_across_ranks.py 300 6 7 8
