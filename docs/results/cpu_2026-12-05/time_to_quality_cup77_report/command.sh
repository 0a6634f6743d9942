#!/usr/bin/env bash
# 2026-12-05, from stored results (no training): cup77's time-to-quality runs with the defaults, seed 0 (2026-12-03,
# h200), seeds 1 and 2 (2026-12-04, h200), seed 3 (2026-12-05, h100: stock and four views per step only), seed 4
# (2026-12-05, h100), seeds 5 and 6 (2026-12-05, h200, every run beside others on the GPU: PSNR only), each odin
# configuration against its own run's stock. From the repository root; files land in this folder.
D=docs/results/cpu_2026-12-05/time_to_quality_cup77_report
odin-bench time-to-quality-report --out $D --results \
  docs/results/h200_2026-12-03/published_in_graph_quality/ttq_results.json \
  docs/results/h200_2026-12-04/time_to_quality_cup77_seed1/results.json \
  docs/results/h200_2026-12-04/time_to_quality_cup77_seed2/results.json \
  docs/results/h100_2026-12-05/time_to_quality_cup77_seed3/results.json \
  docs/results/h100_2026-12-05/time_to_quality_cup77_seed4/results.json \
  docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed_5/results.json \
  docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed_6/results.json
