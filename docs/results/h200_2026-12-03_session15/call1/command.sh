#!/usr/bin/env bash
# session 15 call 1 (one H200): the large scene's third seed against stock with the defaults (dense Adam on one rank),
# then where a steady step's host time goes now (host_profile: cProfile + kernel table; cup77 at 1 and 4 views, the
# large scene at 1 view)
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
summary() { python3 -c "
import json,sys
for p in sys.argv[1:]:
    for r in json.load(open(p))['runs']:
        q = r.get('quality') or {}
        print(r['name'], 'seed', r['seed'], 'views/s %.1f' % r['views_per_s'], 'psnr', q.get('psnr'), 'wall %.0f' % r['wall_s'])
" "$@"; }
echo "=== large scene at $(el) s"
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1 || { tail -5 /tmp/large.txt; exit 1; }
echo "=== large s2 at $(el) s"
timeout 240 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 2 --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/ls_s2 > /tmp/ls_s2.txt 2>&1; echo rc=$?
cp /tmp/ls_s2/results.json $OUT/r/ls_s2.json; cp /tmp/ls_s2.txt $OUT/r/; summary $OUT/r/ls_s2.json
echo "=== host profile cup77 at $(el) s"
timeout 150 python3 -m odin_ns.benchmarks.host_profile --data data/cup77 --views-per-rank 1 4 --out /tmp/hp_cup \
    > $OUT/r/host_profile_cup77.txt 2>&1; echo rc=$?; grep "===" $OUT/r/host_profile_cup77.txt
echo "=== host profile large at $(el) s"
timeout 150 python3 -m odin_ns.benchmarks.host_profile --data /tmp/large --views-per-rank 1 --out /tmp/hp_large \
    > $OUT/r/host_profile_large.txt 2>&1; echo rc=$?; grep "===" $OUT/r/host_profile_large.txt
echo "=== end at $(el) s"
