#!/usr/bin/env bash
# session 14 call 2 (one H200): the large scene against stock on one GPU with this session's default (adam auto = stock's
# dense Adam on one rank, which steps all 1.29M rows where Selective Adam stepped the visible ones): does the 1.5x hold?
# 300 steps, no densification, seeds 0-2 one at a time as in the twelfth session. Then the 0.3 host synchronisations
# per step left at four views with presized intersections, counted over 12 steps
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
summary() { python3 -c "
import json,sys
for p in sys.argv[1:]:
    for r in json.load(open(p))['runs']:
        print(r['name'], 'seed', r['seed'], 'views/s %.1f' % r['views_per_s'], 'psnr %.3f' % r['quality']['psnr'], 'wall %.0f' % r['wall_s'])
" "$@"; }
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1 || { tail -5 /tmp/large.txt; exit 1; }
echo "=== scene at $(el) s"
for s in 0 1 2; do if [ $(el) -lt 400 ]; then echo "=== large s$s at $(el) s"
timeout 180 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed $s --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/ls_s$s > /tmp/ls_s$s.txt 2>&1; rc=$?; echo rc=$rc
cp /tmp/ls_s$s/results.json $OUT/r/ls_s$s.json; cp /tmp/ls_s$s.txt $OUT/r/; summary $OUT/r/ls_s$s.json
[ $rc -ne 0 ] && { tail -20 /tmp/ls_s$s.txt; break; }; fi
done
if [ $(el) -lt 520 ]; then echo "=== host-waits 4 views presized at $(el) s"
timeout 70 python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 4 --presized-intersections --steps 12 \
    > $OUT/r/host_waits_b4_presized.txt 2>&1; echo rc=$?; tail -40 $OUT/r/host_waits_b4_presized.txt | cut -c1-300; fi
echo "=== end at $(el) s"
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
