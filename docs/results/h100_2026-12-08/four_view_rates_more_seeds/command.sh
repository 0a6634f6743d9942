#!/usr/bin/env bash
# Unscaled learning rates against the square-root rule at four views per step on cup77, on seeds that have not run
# before: odin-splatfacto at four views per step to 30,000 views with --pipeline.lr-batch-exponent 0 and with the
# default (0.5), held-out PSNR every 3,000 views, 61.jpg rendered. Each seed's two runs start from the same initial
# Gaussians and view sequence. Every run of an invocation trains at once on the one GPU (--seeds): PSNR only.
# A run not done in BUDGET_S seconds checkpoints and resumes on the next call to the same machine.
# From the repository root with .whl, .gpu and data/cup77 carried:
#   SEEDS="9 10 11" bash command.sh;   SEEDS="9 10 11 12 13 14" bash command.sh   (finished runs start no process)
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
root=outputs/four_view_rates
mkdir -p $root; call=$(ls $root/gpu_use_*.csv 2>/dev/null | wc -l)
save() { nvidia-smi --query-gpu=name --format=csv,noheader > $root/gpu.txt
         tar czf $OUT/four_view_rates.tgz --exclude=runs --exclude="*.ckpt" --exclude="00[6-9]000_*.jpg" \
             --exclude="0[12][0-9]000_*.jpg" -C outputs four_view_rates; }
trap save EXIT
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader -l 15 > $root/gpu_use_$call.csv &
sampler=$!; pids=()
for exponent in 0 0.5; do
  rates=""; [ $exponent = 0 ] && rates="--pipeline.lr-batch-exponent 0"   # 0.5 is the default
  timeout 570 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --no-stock --views-per-step 4 \
    --eval-every-views 3000 --seeds $SEEDS --budget-s ${BUDGET_S:-450} --render-views 61.jpg \
    --odin-args="$rates" --out $root/exponent_$exponent \
    > $root/exponent_${exponent}_$call.log 2>&1 &
  pids+=($!)
done
wait ${pids[@]}; kill $sampler
for log in $root/exponent_*_$call.log; do echo "$log"; tail -12 $log; done
