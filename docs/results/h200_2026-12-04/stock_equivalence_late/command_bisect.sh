#!/usr/bin/env bash
# One H200: which part of odin's captured, presized step moves one step's gradients by about a percent from stock's
# (first moments 2.7e-3 to 5.7e-3 apart after one step from one state; 2e-6 with the eager step of 2026-12-02).
# The probe at steps 0 300 699 on cup77 at full resolution: eager units with gsplat's own intersections, eager units
# with presized intersections (spherical harmonics in torch operations), and the defaults.
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
S=docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py
save() { cp probe_*.log $OUT/ 2>/dev/null; }
trap save EXIT
export ODIN_DOWNSCALES=0
ODIN_RUNTIME="captured_units=False" python3 $S probe data/cup77 0 300 699 > probe_eager.log 2>&1
ODIN_RUNTIME="captured_units=False" ODIN_MODEL="presized_intersections=True" python3 $S probe data/cup77 0 300 699 > probe_eager_presized.log 2>&1
python3 $S probe data/cup77 0 300 699 > probe_defaults.log 2>&1
for f in probe_*.log; do echo "== $f"; grep -E '^\{"probe"' $f | cut -c1-400; done
