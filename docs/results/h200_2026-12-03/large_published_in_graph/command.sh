#!/usr/bin/env bash
# One H200, 2026-12-03: the Adam-from-device-values kernel test on CUDA, then odin-splatfacto (one rank, units
# published inside their graphs: the defaults) against stock splatfacto on the large generated scene
# (`odin-ns demo-scene --preset large`), 1,000 steps, seeds 0 and 1 interleaved (what the device time left allowed).
# From the repository root with .whl and .gpu carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
save() { [ -f /tmp/large_bench/results.json ] && cp /tmp/large_bench/results.json $OUT/bench_large.json
         grep -rh "eagerly\|dropped" /tmp/large_bench/runs 2>/dev/null | sort | uniq -c | head > $OUT/capture_messages.txt; }
trap save EXIT
timeout 40 python3 -m pytest -q "tests/test_kernels.py::test_packed_adam_step_from_device_values_is_bitwise_the_scalar_step" --tb=line 2>&1 | grep -E "passed|failed|^E " | tee $OUT/gpu_tests.txt
timeout 60 python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /dev/null 2>&1; echo "bench after $((SECONDS - start)) s"
timeout $((400 - (SECONDS - start))) python3 -m odin_bench.cli bench --data /tmp/large --steps 1000 --seeds 2 --gpus 1 --modes sync --out /tmp/large_bench > $OUT/bench_large.log 2>&1
grep -E "^\| (config|splatfacto|sync)" $OUT/bench_large.log | tee $OUT/bench_large.txt
