#!/usr/bin/env bash
# 2026-12-04, from stored results (no training): cup77's time-to-quality runs with the defaults, seed 0 (2026-12-03,
# its stock run the seed's only one), seeds 1 and 2 (2026-12-04), each odin configuration against its own run's stock.
# From the repository root; files land in this folder.
D=docs/results/cpu_2026-12-04/time_to_quality_cup77_report
odin-bench time-to-quality-report --out $D --results \
  docs/results/h200_2026-12-03/published_in_graph_quality/ttq_results.json \
  docs/results/h200_2026-12-04/time_to_quality_cup77_seed1/results.json \
  docs/results/h200_2026-12-04/time_to_quality_cup77_seed2/results.json
