#!/usr/bin/env bash
# One H200, 2026-12-04: time to quality on castle-P30 (docs/data/castle_p30.py), seed 0: stock splatfacto and
# odin-splatfacto with one and four views per step (the defaults), 30,000 views, held-out PSNR every 3,000 views.
# The run spans device calls: each call trains until --budget-s and checkpoints; the next resumes (run this again
# until results.json has every entry done; outputs/ must survive between calls, or carry it).
# From the repository root with .whl, .gpu and data/castle_p30 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp outputs/ttq_castle/results.json $OUT/ 2>/dev/null; cp outputs/ttq_castle/time_to_quality.png $OUT/ 2>/dev/null; }
trap save EXIT
timeout 585 python3 -m odin_bench.cli time-to-quality --data data/castle_p30 --views 30000 --views-per-step 1 4 \
  --eval-every-views 3000 --seed 0 --budget-s 520 --out outputs/ttq_castle 2>&1 | grep -v "it/s\]" | tail -15
