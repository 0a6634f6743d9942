#!/usr/bin/env bash
# session 9 call 1 (one H200): CUDA tests of the Triton fill and host reads; bench-presized; cup77 1 GPU with quality:
# sync B=1, sync-presized B=1, sync B=4 (1200 views each), seeds 0 and 1
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi -L
t0=$(date +%s)
timeout 200 python3 -m pytest -q -m gpu tests/test_host_reads.py tests/test_presized.py tests/test_kernels.py -k "not interpreter" > $OUT/gpu_tests.log 2>&1
tail -8 $OUT/gpu_tests.log; echo "tests wall $(( $(date +%s)-t0 )) s"
t0=$(date +%s)
timeout 100 python3 -m odin_ns.cli bench-presized > $OUT/bench_presized.txt 2>&1; tail -20 $OUT/bench_presized.txt; echo "presized wall $(( $(date +%s)-t0 )) s"
mkdir -p $OUT/r
B="python3 -m odin_ns.cli bench --data data/cup77 --steps 1200 --seeds 1 --gpus 1 --no-stock"
for s in 0 1; do
t0=$(date +%s)
timeout 150 $B --first-seed $s --modes sync,sync-presized --out /tmp/a_s$s > /tmp/a_s$s.txt 2>&1
cp /tmp/a_s$s/results.json $OUT/r/a_s$s.json; grep "^| s" /tmp/a_s$s.txt | cut -c1-250; echo "a s$s wall $(( $(date +%s)-t0 )) s"
t0=$(date +%s)
timeout 90 $B --first-seed $s --modes sync --views-per-rank 4 --out /tmp/b_s$s > /tmp/b_s$s.txt 2>&1
cp /tmp/b_s$s/results.json $OUT/r/b_s$s.json; grep "^| s" /tmp/b_s$s.txt | cut -c1-250; echo "b s$s wall $(( $(date +%s)-t0 )) s"
done
(cd /tmp && find a_s* b_s* -name "*.jsonl" | tar czf $OUT/logs1.tgz -T - 2>/dev/null)
(cd $OUT && tar czf r.tgz r && rm -rf r)
