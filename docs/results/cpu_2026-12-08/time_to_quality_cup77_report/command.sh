#!/usr/bin/env bash
# cup77's time-to-quality runs over seeds 0-7 and 9, with the four-view runs of seeds 3, 5 and 7 run again on 2026-12-07
# (each against its seed's earlier stock run: against_stock.json joins them as --stock-from does), and seed 9's
# one-view and four-view runs of 2026-12-08, each against that seed's stock run (one run, joined into both). From the
# repository root.
python3 -m odin_bench.cli time-to-quality-report --out docs/results/cpu_2026-12-08/time_to_quality_cup77_report --results \
    docs/results/h200_2026-12-03/published_in_graph_quality/ttq_results.json \
    docs/results/h200_2026-12-04/time_to_quality_cup77_seed1/results.json \
    docs/results/h200_2026-12-04/time_to_quality_cup77_seed2/results.json \
    docs/results/h100_2026-12-05/time_to_quality_cup77_seed3/results.json \
    docs/results/h100_2026-12-05/time_to_quality_cup77_seed4/results.json \
    docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed_5/results.json \
    docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed_6/results.json \
    docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed_7/results.json \
    docs/results/h100_2026-12-07/held_out_61_four_views/seed3/against_stock.json docs/results/h100_2026-12-07/held_out_61_four_views/seed5/against_stock.json docs/results/h100_2026-12-07/held_out_61_four_views/seed7/against_stock.json \
    docs/results/h100_2026-12-08/four_view_rates_more_seeds/b1_seed_9/results.json \
    docs/results/h100_2026-12-08/four_view_rates_more_seeds/exponent_0.5/seed_9/results.json
