#!/usr/bin/env bash
# One H100, 2026-12-05: the stock-against-odin probe across the whole 30,000 steps of cup77 at full resolution with
# cuDNN's TF32 off (stock's SSIM then rounds as float32 does), odin on its defaults (Triton kernels, units replayed
# from their graphs). From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
ODIN_TF32=0 ODIN_DOWNSCALES=0 python3 docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py probe data/cup77 \
  0 699 999 1000 2999 3199 4099 5999 9999 14899 15000 20000 29000 > $OUT/probe_tf32_off_late.log 2>&1
