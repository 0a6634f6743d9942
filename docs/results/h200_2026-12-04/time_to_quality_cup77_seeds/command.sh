#!/usr/bin/env bash
# One H200, 2026-12-04: time to quality on cup77, seeds 2-4, stock splatfacto and odin-splatfacto with one and four
# views per step (the defaults), 30,000 views, held-out PSNR every 3,000 views. The three seeds train at once, one
# process each, sharing the GPU: their PSNR curves are what they would be alone, their seconds are not (each run's
# time is stretched by whatever the other two ran meanwhile), so these runs count for quality only. The runs span
# device calls: each call trains until --budget-s and checkpoints; the next resumes (run this again until every
# results.json has each entry done).
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
SEEDS="2 3 4"
save() {
  for s in $SEEDS; do
    mkdir -p $OUT/seed$s
    cp outputs/ttq_cup77_s$s/results.json outputs/ttq_cup77_s$s/time_to_quality.png outputs/ttq_cup77_s$s.log \
      $OUT/seed$s/ 2>/dev/null
  done
}
trap save EXIT
for s in $SEEDS; do
  timeout 570 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 1 4 \
    --eval-every-views 3000 --seed $s --budget-s 470 --out outputs/ttq_cup77_s$s 2>&1 | grep -v "it/s\]" \
    >> outputs/ttq_cup77_s$s.log &
done
wait
for s in $SEEDS; do echo "seed $s"; tail -4 outputs/ttq_cup77_s$s.log; done
