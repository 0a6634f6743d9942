#!/usr/bin/env bash
# session 15 call 4 (one H200): pack_columns on CUDA (test), the three ways into the gradient table timed
# (gradient_table.py), then host_profile of the large scene with pack_columns packing the gradients
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
timeout 60 python3 -m pytest -q -m gpu tests/test_kernels.py -k "pack_columns or replayed" 2>&1 | tail -1
python3 docs/results/h200_2026-12-03_session15/call4/gradient_table.py 2>&1 | tee $OUT/r/gradient_table.txt
python3 docs/results/h200_2026-12-03_session15/call4/gradient_table.py 9262 2>&1 | tee -a $OUT/r/gradient_table.txt
echo "=== large scene at $(el) s"
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1 || { tail -5 /tmp/large.txt; exit 1; }
timeout 120 python3 -m odin_ns.benchmarks.host_profile --data /tmp/large --views-per-rank 1 --out /tmp/hp_large \
    > $OUT/r/host_profile_large.txt 2>&1; echo rc=$?; grep "===\|Self CUDA time total\|CatArray\|rows_copy" $OUT/r/host_profile_large.txt | cut -c1-200
echo "=== end at $(el) s"
