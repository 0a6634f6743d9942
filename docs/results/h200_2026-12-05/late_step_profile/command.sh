#!/usr/bin/env bash
# cup77 with the defaults, one view per step: a kernel-only profile of six steady steps at steps 20,001-20,006, where
# the step is GPU-bound (units replayed from their graphs). From the repository root with .whl, .gpu and data/cup77
# carried; `odin-bench timeline` gives the GPU-busy fraction, and the trace the time of each kernel.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
R=/tmp/late; mkdir -p $R
save() { nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt
         cp $R/prof/*/odin-splatfacto/*/profile_rank0.json.gz $R/profile_b1.json.gz 2>/dev/null
         tar czf $OUT/late.tgz -C $R --exclude=prof .; }
trap save EXIT
timeout 200 python3 -m odin_bench.train --kernel-only-profile odin-splatfacto --data data/cup77 --output-dir $R/prof \
  --max-num-iterations 20010 --profile-start 20001 --profile-steps 6 --vis tensorboard \
  --viewer.quit-on-train-completion True > $R/train_b1.log 2>&1
python3 -m odin_bench.cli timeline $R/prof/*/odin-splatfacto/*/profile_rank0.json.gz --out $R/timeline_b1.png \
  > $R/timeline_b1.json 2>&1
echo "profile after $((SECONDS - start)) s: $(grep -o '"gpu_busy_fraction": [0-9.]*' $R/timeline_b1.json | head -1)"
