#!/usr/bin/env bash
# One H200, 2026-12-04: the view-order comparison of command.sh on castle-P30 (views that see different parts of the
# scene), 1,000 steps; seeds run until the time limit.
# From the repository root with .whl, .gpu and data/castle_p30 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { grep -E '^\{' orders_castle_full.log > $OUT/orders_castle.log 2>/dev/null; }
trap save EXIT
ODIN_DOWNSCALES=0 timeout 190 python3 docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py orders \
  data/castle_p30 1000 0 1 2 3 4 5 6 7 > orders_castle_full.log 2>&1
grep -E '^\{' orders_castle_full.log | cut -c1-200
