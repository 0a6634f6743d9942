#!/usr/bin/env bash
# Four views per step with learning rates x 4 (the linear rule, --pipeline.lr-batch-exponent 1) instead of x 2 (the
# square root), seeds 3, 5 and 7: cup77 to 30,000 views, held-out PSNR every 3,000 views and 61.jpg rendered, against
# the square-root runs of held_out_61_four_views and stock's runs of the same seeds. The runs share the GPU
# (--clock-shared): only PSNR, renders and the densification log count. BUDGET_S stops them (checkpointed) after that
# many seconds; run again on the same machine to go on.
# From the repository root with .whl, .gpu and data/cup77 carried.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
root=outputs/lr_batch_exponent
mkdir -p $root; pids=()
trap 'nvidia-smi --query-gpu=name --format=csv,noheader > $root/gpu.txt; tar czf $OUT/lr.tgz --exclude=runs -C outputs lr_batch_exponent' EXIT
run() {  # name seed exponent
  python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --no-stock --views-per-step 4 \
    --eval-every-views 3000 --seed $2 --clock-shared --render-views 61.jpg --out $root/$1 \
    ${BUDGET_S:+--budget-s $BUDGET_S} --odin-args="--pipeline.lr-batch-exponent $3" > $root/$1.log 2>&1 &
  pids+=($!)
}
run seed3_linear 3 1; run seed5_linear 5 1; run seed7_linear 7 1
wait ${pids[@]}
for log in $root/*.log; do echo "$log"; tail -3 $log; done
