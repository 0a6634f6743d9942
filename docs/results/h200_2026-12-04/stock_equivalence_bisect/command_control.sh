#!/usr/bin/env bash
# One H200, 2026-12-04: the floor under the probe's stock-odin differences: stock's step run twice from one state
# (stock_vs_odin.py probe-stock-twice) at steps 0, 300, 699, cup77 at full resolution and at splatfacto's 1/4
# resolution warm-up (ODIN_DOWNSCALES=2, how the 2026-12-02 probe ran), and the probe of the defaults at 1/4.
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp control_*.log $OUT/ 2>/dev/null; }
trap save EXIT
SCRIPT=docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py
ODIN_DOWNSCALES=0 timeout 150 python3 $SCRIPT probe-stock-twice data/cup77 0 300 699 > control_stock_twice.log 2>&1
ODIN_DOWNSCALES=2 timeout 120 python3 $SCRIPT probe-stock-twice data/cup77 0 300 699 > control_stock_twice_quarter.log 2>&1
ODIN_DOWNSCALES=2 timeout 120 python3 $SCRIPT probe data/cup77 0 300 699 > control_probe_quarter.log 2>&1
for f in control_stock_twice control_stock_twice_quarter control_probe_quarter; do
  echo "== $f"; grep -E '^\{' $f.log | cut -c1-1200; done
