#!/usr/bin/env bash
# One H200, 2026-12-03: stock splatfacto and odin-splatfacto at 1 and 4 views per step, each to 30,000 views on cup77
# (full resolution, seed 0), held-out PSNR every 3,000 views outside the training clock. It ran as two device calls
# on one machine: the first stopped after its 500 s budget and the second resumed from /tmp/ttq.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH
python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 1 4 --eval-every-views 3000 --budget-s 500 --out /tmp/ttq
python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 1 4 --eval-every-views 3000 --budget-s 200 --out /tmp/ttq
cp /tmp/ttq/results.json results.json; cp /tmp/ttq/time_to_quality.png ../../img/time_to_quality_cup77.png
