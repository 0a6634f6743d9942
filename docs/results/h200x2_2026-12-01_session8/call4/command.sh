#!/usr/bin/env bash
# session 8 call 4 (one H200): the steady CUDA step's host reads after the one-pass finite watch; one 1-GPU run
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
t0=$(date +%s)
timeout 150 python3 -m pytest -q -m gpu tests/test_host_reads.py > $OUT/gpu_tests.log 2>&1
tail -4 $OUT/gpu_tests.log; echo "tests wall $(( $(date +%s)-t0 )) s"
t0=$(date +%s)
timeout 90 python3 -m odin_ns.cli bench --data data/cup77 --steps 300 --seeds 1 --gpus 1 --no-stock --no-quality --modes sync --out /tmp/o1 > /tmp/o1.txt 2>&1
cp /tmp/o1/results.json $OUT/one_gpu_sync.json; grep "^| sync" /tmp/o1.txt | cut -c1-120; echo "bench wall $(( $(date +%s)-t0 )) s"
