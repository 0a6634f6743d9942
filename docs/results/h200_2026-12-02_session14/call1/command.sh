#!/usr/bin/env bash
# session 14 call 1 (one H200): issue 14's cup77 quality target with this session's defaults (adam auto: stock's dense
# Adam on one rank; each seed seeds both view sequences). Seeds 0-2 one run at a time (views/s and PSNR); then seeds
# 3-6 as four benches at once on the same GPU, PSNR only (their views/s share the GPU and are not throughput figures)
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
summary() { python3 -c "
import json,sys
for p in sys.argv[1:]:
    for r in json.load(open(p))['runs']:
        print(r['name'], 'seed', r['seed'], 'views/s %.1f' % r['views_per_s'], 'psnr %.3f' % r['quality']['psnr'], 'wall %.0f' % r['wall_s'])
" "$@"; }
for s in 0 1 2; do echo "=== cup77 s$s at $(el) s"
timeout 150 python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
    --out /tmp/c_s$s > /tmp/c_s$s.txt 2>&1; rc=$?; echo rc=$rc
cp /tmp/c_s$s/results.json $OUT/r/c_s$s.json; cp /tmp/c_s$s.txt $OUT/r/; summary $OUT/r/c_s$s.json
[ $rc -ne 0 ] && { tail -20 /tmp/c_s$s.txt; break; }
done
if [ $(el) -lt 300 ]; then echo "=== concurrent seeds 3-6 at $(el) s"
for s in 3 4 5 6; do
timeout 270 python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
    --out /tmp/q_s$s > /tmp/q_s$s.txt 2>&1 &
done; wait
for s in 3 4 5 6; do cp /tmp/q_s$s/results.json $OUT/r/q_s$s.json 2>/dev/null && summary $OUT/r/q_s$s.json \
    || { echo "s$s failed"; tail -5 /tmp/q_s$s.txt; }; cp /tmp/q_s$s.txt $OUT/r/; done; fi
echo "=== end at $(el) s"
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
