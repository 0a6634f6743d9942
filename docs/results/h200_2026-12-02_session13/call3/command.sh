#!/usr/bin/env bash
# session 13 call 3 (one H200): host waits with presized intersections after a warm-up that renders every counted view
# first; the host-read GPU tests; cup77 full resolution 1,000 steps: odin rlg order vs a plain shuffle vs stock
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
S=docs/results/h200_2026-12-02_session13/stock_vs_odin.py
echo "=== host-waits presized at $(el) s"
timeout 90 python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 1 4 --presized-intersections > $OUT/r/hwp.log 2>&1; echo rc=$?
grep -A4 "host syncs per step" $OUT/r/hwp.log | grep -v Warning
echo "=== gpu tests at $(el) s"
timeout 150 python3 -m pytest -q -m gpu tests/test_host_reads.py > $OUT/r/tests.log 2>&1; echo rc=$?; tail -3 $OUT/r/tests.log
for s in 0 1 2; do
if [ $(el) -lt 330 ]; then echo "=== order s$s at $(el) s"
ODIN_DOWNSCALES=0 timeout 120 python3 $S order data/cup77 1000 $s > $OUT/r/order_s$s.log 2>&1; rc=$?; echo rc=$rc
grep "^{" $OUT/r/order_s$s.log; grep -i "error" $OUT/r/order_s$s.log | head -3; [ $rc -ne 0 ] && break; fi
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
echo "=== end at $(el) s"
