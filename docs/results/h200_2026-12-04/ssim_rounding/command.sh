#!/usr/bin/env bash
# One H200, 2026-12-04. (1) Gaussian counts and held-out PSNR every 1,500 steps to 9,000 on cup77 at full
# resolution: odin's defaults, stock splatfacto, and stock with cuDNN's TF32 off (its SSIM then rounds as float32), from
# the same Gaussians, seeds 0-2 as three processes on the one GPU (counts and PSNR, not seconds, are what is read).
# (2) The probe with cuDNN's TF32 off, odin on its Triton kernels and on its torch path.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
mkdir -p outputs
S=docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py
save() { cp counts_*.log probe_*.log $OUT/ 2>/dev/null; }
trap save EXIT
for seed in 0 1 2; do
  ODIN_DOWNSCALES=0 timeout 560 python3 $S counts data/cup77 9000 1500 $seed > counts_$seed.log 2>&1 &
done
( ODIN_TF32=0 ODIN_DOWNSCALES=0 timeout 280 python3 $S probe data/cup77 300 699 > probe_tf32_off_triton.log 2>&1
  ODIN_TF32=0 ODIN_KERNELS=torch ODIN_DOWNSCALES=0 ODIN_RUNTIME="captured_units=False" timeout 270 python3 $S probe \
    data/cup77 300 699 > probe_tf32_off_torch.log 2>&1 ) &
wait
grep -h '^{' counts_*.log | cut -c1-200
grep -h '^{"probe' probe_*.log | cut -c1-400
