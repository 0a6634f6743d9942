#!/usr/bin/env bash
# session 13 call 4 (one H200): cup77 full resolution 1,000 steps, odin and stock with the seed also seeding the view
# sequence (both datamanagers otherwise keep train_cameras_sampling_seed 42, one sequence for every machine seed)
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
S=docs/results/h200_2026-12-02_session13/stock_vs_odin.py
for s in 0 1 2; do
if [ $(el) -lt 150 ]; then echo "=== sequences s$s at $(el) s"
ODIN_DOWNSCALES=0 timeout 90 python3 $S sequences data/cup77 1000 $s > $OUT/r/seq_s$s.log 2>&1; rc=$?; echo rc=$rc
grep "^{" $OUT/r/seq_s$s.log; grep -i "error" $OUT/r/seq_s$s.log | head -3; [ $rc -ne 0 ] && break; fi
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
echo "=== end at $(el) s"
