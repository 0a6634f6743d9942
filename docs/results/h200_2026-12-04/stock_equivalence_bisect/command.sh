#!/usr/bin/env bash
# One H200, 2026-12-04: which part of odin's default step moves one step's gradients from stock's. The probe of
# stock_vs_odin.py (one step of each from one state at steps 0, 300, 699; cup77 at full resolution) with eager units
# and gsplat's intersections, with eager units and the presized intersections (spherical harmonics in torch
# operations), and with the defaults (units replayed from their graphs, presized intersections).
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp probe_*.log $OUT/ 2>/dev/null; }
trap save EXIT
PROBE="docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py probe data/cup77 0 300 699"
ODIN_DOWNSCALES=0 ODIN_RUNTIME="captured_units=False" timeout 200 python3 $PROBE > probe_eager.log 2>&1
ODIN_DOWNSCALES=0 ODIN_RUNTIME="captured_units=False" ODIN_MODEL="presized_intersections=True" timeout 200 \
  python3 $PROBE > probe_eager_presized.log 2>&1
ODIN_DOWNSCALES=0 timeout 200 python3 $PROBE > probe_defaults.log 2>&1
for f in probe_eager probe_eager_presized probe_defaults; do echo "== $f"; grep -E '^\{' $f.log | cut -c1-900; done
