#!/usr/bin/env bash
# The densification table of docs/results.md ("Four views per step densify less"), from the stored logs; run from the repository root.
python docs/results/h100_2026-12-07/held_out_61_four_views/densification.py \
    "seed 5, stock=1:docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed5_stock/call_2.log" \
    "seed 5, b1=1:docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed5_b1/call_0.log,docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed5_b1/call_1.log" \
    "seed 5, b4=4:docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed5_b4/call_0.log,docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed5_b4/call_1.log" \
    "seed 5, b4 again=4:docs/results/h100_2026-12-07/held_out_61_four_views/seed5/log.txt" \
    "seed 6, stock=1:docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed6_stock/call_2.log" \
    "seed 6, b1=1:docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed6_b1/call_0.log,docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed6_b1/call_1.log" \
    "seed 6, b4=4:docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed6_b4/call_0.log,docs/results/h200_2026-12-05/time_to_quality_cup77_shared/seed6_b4/call_1.log" \
    "seed 7, stock=1:docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed7_stock/call_0.log,docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed7_stock/call_1.log" \
    "seed 7, b1=1:docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed7_b1/call_0.log" \
    "seed 7, b4=4:docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed7_b4/call_0.log" \
    "seed 7, b4 again=4:docs/results/h100_2026-12-07/held_out_61_four_views/seed7/log.txt" \
    "seed 7, b4 again, views shuffled=4:docs/results/h100_2026-12-07/held_out_61_four_views/seed7_random_order/log.txt" \
    "seed 8, stock=1:docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed8_stock/call_1.log" \
    "seed 8, b1=1:docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed8_b1/call_1.log" \
    "seed 8, b4=4:docs/results/h100_2026-12-06/time_to_quality_cup77_shared/seed8_b4/call_1.log" \
    "seed 3, b4 again=4:docs/results/h100_2026-12-07/held_out_61_four_views/seed3/log.txt"
