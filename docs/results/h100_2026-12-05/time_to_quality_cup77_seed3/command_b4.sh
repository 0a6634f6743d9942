#!/usr/bin/env bash
# One H100, 2026-12-05: four views per step on cup77, seed 3, against the stock run of stock_results.json (the second
# call of command.sh, which lost the first call's checkpoints on a fresh machine and finished stock alone). Before the
# call: mkdir -p outputs/ttq_cup77_s3 && cp stock_results.json outputs/ttq_cup77_s3/results.json, carried.
# From the repository root with .whl, .gpu, data/cup77 and outputs/ttq_cup77_s3 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp outputs/ttq_cup77_s3/results.json outputs/ttq_cup77_s3/time_to_quality.png $OUT/ 2>/dev/null; }
trap save EXIT
timeout 200 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 4 \
  --eval-every-views 3000 --seed 3 --out outputs/ttq_cup77_s3 2>&1 | grep -v "it/s\]" | tail -8
