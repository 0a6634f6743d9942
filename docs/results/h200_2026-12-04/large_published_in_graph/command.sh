#!/usr/bin/env bash
# One H200, 2026-12-04: the GPU tests of captured steps (every replay's publication and statistics against the eager
# effect of its outputs), of the Adam step from device values and of the statistics accumulated once; four views per
# rank with presized intersections on the large generated scene (300 steps); then odin-splatfacto (one rank, the
# defaults) against stock splatfacto on the large scene, 1,000 steps, seeds 1 and 2 interleaved. From the repository
# root with .whl and .gpu carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
save() { [ -f /tmp/large_bench/results.json ] && cp /tmp/large_bench/results.json $OUT/bench_large.json
         grep -rh "eagerly\|dropped\|capture" /tmp/large_bench/runs /tmp/large_b4 2>/dev/null | sort | uniq -c | head > $OUT/capture_messages.txt; }
trap save EXIT
timeout 150 python3 -m pytest -q tests/test_captured_steps.py tests/test_strategy.py tests/test_capture.py \
  "tests/test_kernels.py::test_packed_adam_step_from_device_values_is_the_scalar_step" --tb=short 2>&1 | grep -E "passed|failed|^E |^FAILED" | tee $OUT/gpu_tests.txt
echo "tests done after $((SECONDS - start)) s"
timeout 60 python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /dev/null 2>&1; echo "large scene after $((SECONDS - start)) s"
timeout 75 python3 -m odin_bench.train odin-splatfacto --data /tmp/large --output-dir /tmp/large_b4 --max-num-iterations 300 \
  --pipeline.model.num-downscales 0 --pipeline.model.stop-split-at 0 --pipeline.datamanager.views-per-rank 4 \
  --pipeline.model.presized-intersections True --vis tensorboard --viewer.quit-on-train-completion True > $OUT/train_large_b4_presized.log 2>&1
echo "four views presized on large: exit $? after $((SECONDS - start)) s" | tee -a $OUT/gpu_tests.txt
grep -iE "error|illegal|Traceback" $OUT/train_large_b4_presized.log | head -5
timeout $((585 - (SECONDS - start))) python3 -m odin_bench.cli bench --data /tmp/large --steps 1000 --seeds 2 --first-seed 1 --gpus 1 --modes sync --out /tmp/large_bench > $OUT/bench_large.log 2>&1
grep -E "^\| (config|splatfacto|sync)" $OUT/bench_large.log | tee $OUT/bench_large.txt
echo "done after $((SECONDS - start)) s"
