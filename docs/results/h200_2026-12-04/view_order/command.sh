#!/usr/bin/env bash
# One H200, 2026-12-04: does odin's view order cost quality on one rank? cup77 at full resolution, 1,000 steps:
# odin-splatfacto (defaults: dense Adam) with its rlg order and with a plain shuffle per epoch, and stock splatfacto on
# its own shuffles, from the same Gaussians; each seed seeds the view sequences (42 + seed). Seeds run until the time
# limit; every finished seed's three lines are in orders.log.
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { grep -E '^\{' orders_full.log > $OUT/orders.log 2>/dev/null; }
trap save EXIT
ODIN_DOWNSCALES=0 timeout 560 python3 docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py orders data/cup77 \
  1000 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 > orders_full.log 2>&1
grep -E '^\{' orders_full.log | cut -c1-200
