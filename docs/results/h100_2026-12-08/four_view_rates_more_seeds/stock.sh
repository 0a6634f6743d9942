#!/usr/bin/env bash
# Stock splatfacto on seed 9 to 30,000 views, alone on the GPU (timed), against the four-view runs of command.sh.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
root=outputs/four_view_rates
timeout 470 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step \
  --eval-every-views 3000 --seed 9 --budget-s 400 --render-views 61.jpg --out $root/stock_seed_9 > $root/stock_seed_9.log 2>&1
tail -5 $root/stock_seed_9.log
tar czf $OUT/stock_seed_9.tgz --exclude=runs --exclude="*.ckpt" --exclude="00[6-9]000_*.jpg" --exclude="0[12][0-9]000_*.jpg" -C $root stock_seed_9 stock_seed_9.log
