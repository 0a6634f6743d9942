#!/usr/bin/env bash
# Does four views per step's gap to stock on cup77 follow the learning-rate rule? odin-splatfacto at four views per
# step to 30,000 views, seeds 3, 5 and 7, with the learning rates scaled by 4 ** EXPONENT, against the square-root
# rule's runs (0.5, the default) of the same seeds in ../held_out_61_four_views and stock's (against_stock.json there).
# Every run writes held-out view 61.jpg's ground truth | render | depth at each evaluation. The runs of one
# invocation share the GPU (--seeds trains every seed at once, each in its own process): only their PSNR and renders
# count. A run not done in BUDGET_S seconds would keep its curve so far (--budget-s); every run here finished.
# Three invocations, from the repository root with .whl, .gpu and data/cup77 carried:
#   bash command.sh                                  # exponents 1 and 0.75: six runs at once
#   EXPONENTS=0.25 BUDGET_S=370 bash command.sh      # three runs at once
#   EXPONENTS=0 BUDGET_S=225 bash command.sh
# Stored here as the tool wrote them (exponent_E/seed_N/odin-b4/: results.json, log.txt, 61.jpg's renders at 3,000
# and 30,000 views) with exponent_E/summary.log; exponent_E/seed_N/results.json then joined each seed's stock run by
# invoking the same command on the finished runs with
# --stock-from 'docs/results/h100_2026-12-07/held_out_61_four_views/seed{seed}/against_stock.json' (on the CPU).
# Then, from the repository root: python docs/results/h100_2026-12-07/lr_exponent_four_views/exponents.py
# docs/img/lr_exponent_four_views.png, and densification.sh here.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
root=outputs/lr_exponent
mkdir -p $root; pids=()
trap 'nvidia-smi --query-gpu=name --format=csv,noheader > $root/gpu.txt; tar czf $OUT/lr_exponent.tgz --exclude=runs --exclude="*.ckpt" -C outputs lr_exponent' EXIT
for exponent in ${EXPONENTS:-1 0.75}; do
  timeout 575 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --no-stock --views-per-step 4 \
    --eval-every-views 3000 --seeds 3 5 7 --budget-s ${BUDGET_S:-480} --render-views 61.jpg --odin-args="--pipeline.lr-batch-exponent $exponent" \
    --out $root/exponent_$exponent > $root/exponent_$exponent.log 2>&1 &
  pids+=($!)
done
wait ${pids[@]}
for log in $root/*.log; do echo "$log"; tail -8 $log; done
