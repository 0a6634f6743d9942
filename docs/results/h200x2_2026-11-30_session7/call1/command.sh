#!/usr/bin/env bash
# session 7 call 1: presized GPU tests, host-waits with presized, cup77 seed 0 and large seed 0 (sync vs presized vs QFP)
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi -L
t0=$(date +%s)
timeout 150 python3 -m pytest -q -m gpu tests/test_presized.py \
  tests/test_host_reads.py::test_a_steady_cuda_step_with_presized_intersections_synchronises_nothing > $OUT/gpu_tests.log 2>&1
tail -15 $OUT/gpu_tests.log; echo "tests wall $(( $(date +%s)-t0 )) s"
t0=$(date +%s)
timeout 90 python3 -m odin_ns.cli host-waits --data data/cup77 --views-per-rank 1 4 --presized-intersections True > $OUT/host_waits.log 2>&1
tail -12 $OUT/host_waits.log; echo "host-waits wall $(( $(date +%s)-t0 )) s"
B="python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1"
t0=$(date +%s)
timeout 200 $B --steps 300 --data data/cup77 --first-seed 0 --modes sync,sync-presized,quality-first-predicted,quality-first-predicted-presized --out /tmp/a0 > /tmp/a0.txt 2>&1
cp /tmp/a0/results.json $OUT/cup_s0.json; grep "^|" /tmp/a0.txt; tail -3 /tmp/a0.txt; echo "cup s0 wall $(( $(date +%s)-t0 )) s"
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
t0=$(date +%s)
timeout 290 $B --steps 200 --data /tmp/large --first-seed 0 --modes sync,sync-presized,quality-first-predicted-presized,no-exchange --out /tmp/b0 "--extra=--pipeline.model.stop-split-at 0" > /tmp/b0.txt 2>&1
cp /tmp/b0/results.json $OUT/large_s0.json; grep "^|" /tmp/b0.txt; tail -3 /tmp/b0.txt; echo "large s0 wall $(( $(date +%s)-t0 )) s"
(cd /tmp && find a0 b0 -name "*.jsonl" | tar czf $OUT/logs1.tgz -T - 2>/dev/null)
