#!/usr/bin/env bash
# Four views per step on cup77 at each learning-rate exponent, seeds 3, 5 and 7, each run against its seed's stock
# run: the square-root rule's runs (the defaults) and the exponent runs of
# docs/results/h100_2026-12-07/lr_exponent_four_views, whose per-seed results.json join that stock run
# (time-to-quality --seeds 3 5 7 --stock-from '.../held_out_61_four_views/seed{seed}/against_stock.json', invoked on
# the finished runs). From the repository root.
here=docs/results/h100_2026-12-07
python3 -m odin_bench.cli time-to-quality-report --out docs/results/cpu_2026-12-07/lr_exponent_report --results \
    $here/held_out_61_four_views/seed{3,5,7}/against_stock.json \
    $here/lr_exponent_four_views/exponent_{0,0.25,0.75,1}/seed_{3,5,7}/results.json
