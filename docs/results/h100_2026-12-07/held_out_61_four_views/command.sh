#!/usr/bin/env bash
# What four views per step put in front of held-out view 61.jpg (the camera farthest from the training cameras) on
# cup77: odin-splatfacto at four views per step to 30,000 views, seeds 3, 5 and 7 with the defaults and seed 7 with
# a plain shuffle of the views (--pipeline.datamanager.order random: each step's four views drawn from anywhere,
# where the RLG order draws them from one region), each writing 61.jpg's ground truth | render | depth at every
# evaluation. The four runs share the GPU (--clock-shared): only their PSNR and renders count.
# From the repository root with .whl, .gpu and data/cup77 carried.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
root=outputs/held_out_61
mkdir -p $root; pids=()
trap 'nvidia-smi --query-gpu=name --format=csv,noheader > $root/gpu.txt; tar czf $OUT/held_out_61.tgz --exclude=runs -C outputs held_out_61' EXIT
run() {  # name seed [odin arguments]
  python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --no-stock --views-per-step 4 \
    --eval-every-views 3000 --seed $2 --clock-shared --render-views 61.jpg --out $root/$1 --odin-args="$3" \
    > $root/$1.log 2>&1 &
  pids+=($!)
}
run seed3 3; run seed5 5; run seed7 7
run seed7_random_order 7 "--pipeline.datamanager.order random"
wait ${pids[@]}
for log in $root/*.log; do echo "$log"; tail -4 $log; done
