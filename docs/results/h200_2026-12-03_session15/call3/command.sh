#!/usr/bin/env bash
# session 15 call 3 (one H200): the large scene (no densification) on one GPU, 200 steps, seeds 0-1, interleaved per
# seed: the code before this session's changes (.base = git archive ca4451a odin_ns, sync), sync now, and sync now
# launching every publication; then host_profile of the large scene now (did the gradient table's additions go?)
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
summary() { python3 -c "
import json,sys
for p in sys.argv[1:]:
    for r in json.load(open(p))['runs']:
        print(p.split('/')[-1], r['name'], 'seed', r['seed'], 'views/s %.1f' % r['views_per_s'], 'wall %.0f' % r['wall_s'])
" "$@"; }
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1 || { tail -5 /tmp/large.txt; exit 1; }
X="--extra=--pipeline.model.stop-split-at 0"
for s in 0 1; do echo "=== large seed $s at $(el) s"
(cd .base && PYTHONPATH=$PWD:$PYTHONPATH timeout 100 python3 -m odin_ns.cli bench --data /tmp/large --steps 200 --seeds 1 \
    --first-seed $s --gpus 1 --no-stock --no-quality --modes sync "$X" --out /tmp/b_s$s > /tmp/b_s$s.txt 2>&1); echo rc=$?
cp /tmp/b_s$s/results.json $OUT/r/base_s$s.json; summary $OUT/r/base_s$s.json
timeout 170 python3 -m odin_ns.cli bench --data /tmp/large --steps 200 --seeds 1 --first-seed $s --gpus 1 --no-stock \
    --no-quality --modes sync,sync-launched-publication "$X" --out /tmp/n_s$s > /tmp/n_s$s.txt 2>&1; echo rc=$?
cp /tmp/n_s$s/results.json $OUT/r/new_s$s.json; summary $OUT/r/new_s$s.json
done
echo "=== host profile large at $(el) s"
timeout 120 python3 -m odin_ns.benchmarks.host_profile --data /tmp/large --views-per-rank 1 --out /tmp/hp_large \
    > $OUT/r/host_profile_large.txt 2>&1; echo rc=$?; grep "===" $OUT/r/host_profile_large.txt
echo "=== end at $(el) s"
