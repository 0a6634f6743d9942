#!/usr/bin/env bash
# cup77's time-to-quality runs over seeds 0-7, with the four-view runs of seeds 3, 5 and 7 run again on 2026-12-07
# (each against its seed's earlier stock run: against_stock.json joins them as --stock-from does). From the
# repository root.
python3 -m odin_bench.cli time-to-quality-report --out docs/results/cpu_2026-12-07/time_to_quality_cup77_report --results \
    docs/results/h200_2026-12-03/published_in_graph_quality/ttq_results.json \
    docs/results/h200_2026-12-04/time_to_quality_cup77_seed1/results.json \
    docs/results/h200_2026-12-04/time_to_quality_cup77_seed2/results.json \
    docs/results/h100_2026-12-05/time_to_quality_cup77_seed3/results.json \
    docs/results/h100_2026-12-05/time_to_quality_cup77_seed4/results.json \
    docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed_5/results.json \
    docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed_6/results.json \
    docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed_7/results.json \
    docs/results/h100_2026-12-07/held_out_61_four_views/seed3/against_stock.json docs/results/h100_2026-12-07/held_out_61_four_views/seed5/against_stock.json docs/results/h100_2026-12-07/held_out_61_four_views/seed7/against_stock.json
