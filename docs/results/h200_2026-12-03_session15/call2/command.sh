#!/usr/bin/env bash
# session 15 call 2 (one H200): the captured publication's GPU tests; its host time launched against replayed
# (kernels_bench, the large scene's N); then cup77 on one GPU, 300 steps, 3 seeds, interleaved per seed: the code
# before this session's changes (.base = git archive ca4451a odin_ns, sync), sync now, and sync now launching every
# publication (--pipeline.odin.captured-publication False)
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
summary() { python3 -c "
import json,sys
for p in sys.argv[1:]:
    for r in json.load(open(p))['runs']:
        print(p.split('/')[-1], r['name'], 'seed', r['seed'], 'views/s %.1f' % r['views_per_s'], 'wall %.0f' % r['wall_s'])
" "$@"; }
echo "=== gpu tests at $(el) s"
timeout 150 python3 -m pytest -q -m gpu tests/test_kernels.py -k "replayed or packed_adam or adam" tests/test_host_reads.py \
    > $OUT/r/gpu_tests.txt 2>&1; echo rc=$?; tail -3 $OUT/r/gpu_tests.txt
echo "=== kernels_bench at $(el) s"
timeout 120 python3 -m odin_ns.benchmarks.kernels_bench --sizes 1290820 --fractions 0.3 1.0 --repeats 50 \
    > $OUT/r/kernels_bench.txt 2>&1; echo rc=$?; grep -A5 "## Publication" $OUT/r/kernels_bench.txt
for s in 0 1 2; do echo "=== cup77 seed $s at $(el) s"
(cd .base && PYTHONPATH=$PWD:$PYTHONPATH timeout 100 python3 -m odin_ns.cli bench --data ../data/cup77 --steps 300 --seeds 1 \
    --first-seed $s --gpus 1 --no-stock --no-quality --modes sync --out /tmp/b_s$s > /tmp/b_s$s.txt 2>&1); echo rc=$?
cp /tmp/b_s$s/results.json $OUT/r/base_s$s.json; summary $OUT/r/base_s$s.json
timeout 170 python3 -m odin_ns.cli bench --data data/cup77 --steps 300 --seeds 1 --first-seed $s --gpus 1 --no-stock \
    --no-quality --modes sync,sync-launched-publication --out /tmp/n_s$s > /tmp/n_s$s.txt 2>&1; echo rc=$?
cp /tmp/n_s$s/results.json $OUT/r/new_s$s.json; summary $OUT/r/new_s$s.json
done
tail -5 /tmp/b_s0.txt /tmp/n_s0.txt > $OUT/r/tails.txt 2>&1
echo "=== end at $(el) s"
