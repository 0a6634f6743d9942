#!/usr/bin/env bash
# The third call (h200, 2026-12-05), on the machine that kept command.sh's runs: stock splatfacto for seeds 5 and 6
# trained again from the start, both at once, without stopping (their runs in command.sh had stopped at 6,000 views
# and failed to resume: docs/results.md, "seeds 5 and 6"). Then command.sh's last lines join each seed's results.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
root=outputs/ttq_shared
for s in 5 6; do
  rm -rf $root/seed${s}_stock; mkdir -p $root/seed${s}_stock
  timeout 470 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step \
    --eval-every-views 3000 --seed $s --clock-shared --out $root/seed${s}_stock > $root/seed${s}_stock/call_2.log 2>&1 &
done
wait
for s in 5 6; do grep -v "it/s\]" $root/seed${s}_stock/call_2.log | tail -3; done
tar czf $OUT/ttq_shared.tgz --exclude=runs -C outputs ttq_shared
