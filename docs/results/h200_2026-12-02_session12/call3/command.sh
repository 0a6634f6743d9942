#!/usr/bin/env bash
# session 12 call 3 (one H200): where odin's cup77 PSNR at 1,000 steps loses 0.5-0.9 dB to stock splatfacto.
# Odin sync on one GPU, seeds 0-1, one change at a time against call 2's default runs of the same seeds:
# torch kernels (no Triton SSIM/Adam), dense Adam, random view order; and stock against odin without densification
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
one() { # name, seed, bench args...
  local name=$1 s=$2; shift 2; echo "=== $name s$s at $(el) s"
  timeout 110 python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
      --out /tmp/$name-s$s "$@" > /tmp/$name-s$s.txt 2>&1; echo rc=$?
  cp /tmp/$name-s$s/results.json $OUT/r/$name-s$s.json; grep "^| s" /tmp/$name-s$s.txt | cut -c1-200
}
for s in 0 1; do
  ODIN_KERNELS=torch one torchkernels $s --no-stock
  one adamdense $s --no-stock "--extra=--pipeline.odin.adam dense"
  one nodensify $s "--extra=--pipeline.model.stop-split-at 0"
  [ $(el) -lt 430 ] && one randomorder $s --no-stock "--extra=--pipeline.datamanager.order random"
  [ $(el) -gt 480 ] && break
done
echo "=== end at $(el) s"
