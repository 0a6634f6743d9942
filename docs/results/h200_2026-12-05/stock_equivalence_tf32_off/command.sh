#!/usr/bin/env bash
# One H200, 2026-12-05: the probe across the 30,000 steps (as ../../h200_2026-12-04/stock_equivalence_late/command.sh) with cuDNN's TF32 off,
# so that stock's SSIM rounds as float32 does. cup77 at full resolution.
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp probe_late_tf32_off.log $OUT/ 2>/dev/null; }
trap save EXIT
ODIN_TF32=0 ODIN_DOWNSCALES=0 timeout 400 python3 docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py probe \
  data/cup77 0 699 999 1000 2999 3199 4099 5999 9999 14899 15000 20000 29000 > probe_late_tf32_off.log 2>&1
grep -E '^\{' probe_late_tf32_off.log | cut -c1-300
