#!/usr/bin/env bash
# stock splatfacto and odin-splatfacto in one process from the same Gaussians on cup77 (stock_vs_odin.py):
# one step from one state (probe), 1,000-step A/B arms at 1/4 and full resolution, the view order
# one NVIDIA H200, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
S=docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py
python3 $S probe data/cup77 > probe.log 2>&1
for s in 0 1 2; do
  python3 $S ab data/cup77 1000 $s > ab_quarter_res_s$s.log 2>&1
  ODIN_DOWNSCALES=0 python3 $S ab data/cup77 1000 $s > ab_full_res_s$s.log 2>&1
  ODIN_DOWNSCALES=0 python3 $S order data/cup77 1000 $s > order_s$s.log 2>&1
done
