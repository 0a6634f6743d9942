#!/usr/bin/env bash
# odin-splatfacto at one view per step on seed 9 to 30,000 views, alone on the GPU (timed), after stock.sh.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
root=outputs/four_view_rates
timeout 215 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --no-stock --views-per-step 1 \
  --eval-every-views 3000 --seed 9 --budget-s 170 --render-views 61.jpg --out $root/b1_seed_9 > $root/b1_seed_9.log 2>&1
tail -5 $root/b1_seed_9.log
tar czf $OUT/b1_seed_9.tgz --exclude=runs --exclude="*.ckpt" --exclude="00[6-9]000_*.jpg" --exclude="0[12][0-9]000_*.jpg" -C $root b1_seed_9 b1_seed_9.log
