#!/usr/bin/env bash
# session 13 call 2 (one H200): cup77 at full resolution (the bench's setting), 1,000 steps: odin (Selective, dense)
# and three stock arms from the same Gaussians (odin's views + odin's draws; odin's views + own draws; all its own)
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
S=docs/results/h200_2026-12-02_session13/stock_vs_odin.py
for s in 0 1 2; do
if [ $(el) -lt 330 ]; then echo "=== ab s$s at $(el) s"
ODIN_DOWNSCALES=0 timeout 170 python3 $S ab data/cup77 1000 $s > $OUT/r/ab_full_s$s.log 2>&1; rc=$?; echo rc=$rc
grep "^{" $OUT/r/ab_full_s$s.log; grep -i "error" $OUT/r/ab_full_s$s.log | head -3; [ $rc -ne 0 ] && break; fi
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
echo "=== end at $(el) s"
