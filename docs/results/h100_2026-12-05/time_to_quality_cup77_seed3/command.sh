#!/usr/bin/env bash
# One H100, 2026-12-05: time to quality on cup77, seed 3: stock splatfacto and odin-splatfacto with one and four views
# per step (the defaults), 30,000 views, held-out PSNR every 3,000 views. The run spans device calls: each call
# trains until --budget-s and checkpoints; the next resumes (run this again until results.json has every entry done).
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
mkdir -p outputs
save() { cp outputs/ttq_cup77_s3/results.json outputs/ttq_cup77_s3/time_to_quality.png $OUT/ 2>/dev/null; }
trap save EXIT
timeout 580 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 1 4 \
  --eval-every-views 3000 --seed 3 --budget-s 520 --out outputs/ttq_cup77_s3 2>&1 | grep -v "it/s\]" | tail -15
