#!/usr/bin/env bash
# session 14 call 3 (one H200): call 2 again with longer limits (its first large-scene bench ran past 180 s: stock took
# 108 s where it took 84 s in the twelfth session). The large scene against stock on one GPU with adam auto (stock's
# dense Adam on one rank), 300 steps, no densification; host-waits at four views with presized intersections after
# the corrected warm-up (from step 0); castle-P30 against stock where data/castle_p30 was carried
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
summary() { python3 -c "
import json,sys
for p in sys.argv[1:]:
    for r in json.load(open(p))['runs']:
        print(r['name'], 'seed', r['seed'], 'views/s %.1f' % r['views_per_s'], 'psnr %.3f' % r['quality']['psnr'],
              'wall %.0f' % r['wall_s'], 'publish_ms %.2f' % (1e3 * r.get('publish_s', 0) or 0))
" "$@"; }
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1 || { tail -5 /tmp/large.txt; exit 1; }
echo "=== scene at $(el) s"
for s in 0 1; do if [ $(el) -lt 260 ]; then echo "=== large s$s at $(el) s"
timeout 250 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed $s --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/ls_s$s > /tmp/ls_s$s.txt 2>&1; rc=$?; echo rc=$rc
cp /tmp/ls_s$s/results.json $OUT/r/ls_s$s.json; cp /tmp/ls_s$s.txt $OUT/r/; summary $OUT/r/ls_s$s.json
[ $rc -ne 0 ] && { grep -v Warning /tmp/ls_s$s.txt | tail -5; ls /tmp/ls_s$s/runs/*/*/*/* | head; break; }; fi
done
if [ $(el) -lt 480 ]; then echo "=== host-waits 4 views presized at $(el) s"
timeout 70 python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 4 --presized-intersections --steps 12 \
    > $OUT/r/host_waits_b4_presized.txt 2>&1; echo rc=$?; grep -A5 "host syncs per step" $OUT/r/host_waits_b4_presized.txt; fi
if [ -d data/castle_p30 ] && [ $(el) -lt 430 ]; then echo "=== castle s0 at $(el) s"
timeout 150 python3 -m odin_ns.cli bench --data data/castle_p30 --steps 1000 --seeds 1 --first-seed 0 --gpus 1 --modes sync \
    --out /tmp/k_s0 > /tmp/k_s0.txt 2>&1; echo rc=$?
cp /tmp/k_s0/results.json $OUT/r/k_s0.json; cp /tmp/k_s0.txt $OUT/r/; summary $OUT/r/k_s0.json; fi
echo "=== end at $(el) s"
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
