#!/usr/bin/env bash
# session 13 call 1 (one H200): stock splatfacto and odin trained in one process from the same Gaussians, views,
# backgrounds and split seeds on cup77 (one-step probes, then 1,000 steps x 3 seeds); then host waits with C++ counting
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
S=docs/results/h200_2026-12-02_session13/stock_vs_odin.py
echo "=== probe at $(el) s"
timeout 150 python3 $S probe data/cup77 > $OUT/r/probe.log 2>&1; echo rc=$?; grep "^{" $OUT/r/probe.log | cut -c1-600
for s in 0 1 2; do echo "=== ab s$s at $(el) s"
timeout 140 python3 $S ab data/cup77 1000 $s > $OUT/r/ab_s$s.log 2>&1; echo rc=$?; grep "^{" $OUT/r/ab_s$s.log
grep -i "error" $OUT/r/ab_s$s.log | head -3
done
if [ $(el) -lt 470 ]; then echo "=== host-waits at $(el) s"
timeout 60 python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 1 4 > $OUT/r/hw.log 2>&1; echo rc=$?; tail -8 $OUT/r/hw.log; fi
if [ $(el) -lt 530 ]; then echo "=== host-waits presized at $(el) s"
timeout 60 python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 1 4 --presized-intersections > $OUT/r/hwp.log 2>&1; echo rc=$?; tail -8 $OUT/r/hwp.log; fi
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
echo "=== end at $(el) s"
