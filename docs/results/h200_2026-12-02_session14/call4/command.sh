#!/usr/bin/env bash
# session 14 call 4 (one H200): castle-P30 (public capture with partial per-view visibility, rebuilt by
# docs/data/castle_p30.py) against stock on one GPU, 1,000 steps with quality, seeds 0-1; then the large scene's
# third seed against stock (as call 3) while the session's device time lasts
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
summary() { python3 -c "
import json,sys
for p in sys.argv[1:]:
    for r in json.load(open(p))['runs']:
        print(r['name'], 'seed', r['seed'], 'views/s %.1f' % r['views_per_s'], 'psnr %.3f' % r['quality']['psnr'],
              'wall %.0f' % r['wall_s'])
" "$@"; }
for s in 0 1; do if [ $(el) -lt 150 ]; then echo "=== castle s$s at $(el) s"
timeout 140 python3 -m odin_ns.cli bench --data data/castle_p30 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
    --out /tmp/k_s$s > /tmp/k_s$s.txt 2>&1; rc=$?; echo rc=$rc
cp /tmp/k_s$s/results.json $OUT/r/k_s$s.json; cp /tmp/k_s$s.txt $OUT/r/; summary $OUT/r/k_s$s.json
[ $rc -ne 0 ] && { grep -v Warning /tmp/k_s$s.txt | tail -5; break; }; fi
done
if [ $(el) -lt 200 ]; then echo "=== large s2 at $(el) s"
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1 || { tail -5 /tmp/large.txt; exit 1; }
timeout 200 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 2 --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/ls_s2 > /tmp/ls_s2.txt 2>&1; echo rc=$?
cp /tmp/ls_s2/results.json $OUT/r/ls_s2.json; cp /tmp/ls_s2.txt $OUT/r/; summary $OUT/r/ls_s2.json; fi
echo "=== end at $(el) s"
