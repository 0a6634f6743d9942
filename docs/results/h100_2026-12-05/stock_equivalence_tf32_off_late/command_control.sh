#!/usr/bin/env bash
# One H100, 2026-12-05: the control for probe_tf32_off_late.log, stock's step run twice from odin's state at the
# late probed steps, cuDNN's TF32 off. From the repository root with .whl, .gpu and data/cup77 carried.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu_control.txt
ODIN_TF32=0 ODIN_DOWNSCALES=0 timeout 200 python3 docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py \
  probe-stock-twice data/cup77 699 2999 3199 5999 14899 15000 20000 > $OUT/probe_stock_twice_tf32_off_late.log 2>&1
echo "exit $?"
