#!/usr/bin/env bash
# session 7 call 2: presized GPU tests after the fixes, host-waits, bench-presized, cup77 seed 1, large 600 steps seed 0
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
t0=$(date +%s)
timeout 120 python3 -m pytest -q -m gpu tests/test_presized.py tests/test_host_reads.py > $OUT/gpu_tests.log 2>&1
grep -E "passed|failed|^E " $OUT/gpu_tests.log | head -20; echo "tests wall $(( $(date +%s)-t0 )) s"
timeout 90 python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 1 4 --presized-intersections > $OUT/host_waits.log 2>&1
grep -v Warning $OUT/host_waits.log | tail -14
timeout 90 python3 -m odin_ns.cli bench-presized > $OUT/bench_presized.log 2>&1; tail -6 $OUT/bench_presized.log
B="python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1"
t0=$(date +%s)
timeout 170 $B --steps 300 --data data/cup77 --first-seed 1 --modes sync,sync-presized,quality-first-predicted,quality-first-predicted-presized --out /tmp/a1 > /tmp/a1.txt 2>&1
cp /tmp/a1/results.json $OUT/cup_s1.json; grep "^|" /tmp/a1.txt | head -6; tail -2 /tmp/a1.txt; echo "cup s1 wall $(( $(date +%s)-t0 )) s"
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
t0=$(date +%s)
timeout 330 $B --steps 600 --data /tmp/large --first-seed 0 --modes sync,sync-presized,quality-first-predicted-presized,no-exchange --out /tmp/b1 "--extra=--pipeline.model.stop-split-at 0" > /tmp/b1.txt 2>&1
cp /tmp/b1/results.json $OUT/large600_s0.json; grep "^|" /tmp/b1.txt | head -6; tail -2 /tmp/b1.txt; echo "large s0 wall $(( $(date +%s)-t0 )) s"
(cd /tmp && find a1 b1 -name "*.jsonl" | tar czf $OUT/logs2.tgz -T - 2>/dev/null)
