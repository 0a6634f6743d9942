#!/usr/bin/env bash
# One H200, 2026-12-04: time to quality on cup77, seed 1: stock splatfacto and odin-splatfacto with one and four views
# per step (the defaults), 30,000 views, held-out PSNR every 3,000 views. The run spans device calls: each call
# trains until --budget-s and checkpoints; the next resumes (run this again until results.json has every entry done).
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp outputs/ttq_cup77_s1/results.json $OUT/ 2>/dev/null; cp outputs/ttq_cup77_s1/time_to_quality.png $OUT/ 2>/dev/null; }
trap save EXIT
timeout 590 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 1 4 \
  --eval-every-views 3000 --seed 1 --budget-s 530 --out outputs/ttq_cup77_s1 2>&1 | grep -v "it/s\]" | tail -15
