#!/usr/bin/env bash
# One H200, 2026-12-04: the one-step probe of stock splatfacto against odin-splatfacto (defaults) from one state on
# castle-P30 at full resolution (odin is 0.8-1.7 dB above stock there at 1,000-30,000 steps), and what the two
# pipelines' evaluations make of the same Gaussians.
# From the repository root with .whl, .gpu and data/castle_p30 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp probe_castle.log $OUT/ 2>/dev/null; }
trap save EXIT
ODIN_DOWNSCALES=0 timeout 300 python3 docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py probe data/castle_p30 \
  0 699 > probe_castle.log 2>&1
grep -E '^\{' probe_castle.log | cut -c1-300
