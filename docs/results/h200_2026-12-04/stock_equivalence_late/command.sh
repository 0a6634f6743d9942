#!/usr/bin/env bash
# One H200, 2026-12-04: stock splatfacto and odin-splatfacto (defaults) from one state, one step each, at steps
# across the 30,000 (SH degree raises at 1,000 and 2,000; opacity resets at 3,000 and 6,000; refines after them;
# the last refine at 14,900; after densification ends). cup77 at full resolution, as time-to-quality trains it.
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp probe.log $OUT/ 2>/dev/null; }
trap save EXIT
ODIN_DOWNSCALES=0 timeout 580 python3 docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py probe data/cup77 \
  0 699 999 1000 2999 3199 4099 5999 9999 14899 15000 20000 29000 > probe.log 2>&1
grep -E '^\{' probe.log | cut -c1-600
