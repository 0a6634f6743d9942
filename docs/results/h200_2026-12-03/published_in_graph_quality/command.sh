#!/usr/bin/env bash
# One H200, 2026-12-03: with one rank's units published inside their graphs, the captured-step and Adam-from-device
# GPU tests; time to quality on cup77 (1 and 4 views per step to 30,000 views, full resolution, seed 0, held-out PSNR
# every 3,000 views outside the training clock) against stock splatfacto's curve of the same seed from
# ../time_to_quality_cup77 (--stock-from); then odin-splatfacto against stock on castle-P30, 1,000 steps, 3 seeds
# interleaved. From the repository root with .whl, .gpu, data/cup77 and data/castle_p30 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
save() { cp /tmp/ttq/results.json $OUT/ttq_results.json 2>/dev/null; cp /tmp/ttq/time_to_quality.png $OUT/ 2>/dev/null
         [ -f /tmp/castle_p30/results.json ] && cp /tmp/castle_p30/results.json $OUT/bench_castle_p30.json
         grep -rh "eagerly\|dropped" /tmp/ttq /tmp/castle_p30/runs 2>/dev/null | sort | uniq -c | head -20 > $OUT/capture_messages.txt; }
trap save EXIT
timeout 100 python3 -m pytest -q tests/test_captured_steps.py \
  "tests/test_kernels.py::test_packed_adam_step_from_device_values_is_bitwise_the_scalar_step" --tb=short 2>&1 | grep -E "passed|failed|^E " | tee $OUT/gpu_tests.txt
timeout 240 python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 1 4 --eval-every-views 3000 \
  --stock-from docs/results/h200_2026-12-03/time_to_quality_cup77/results.json --out /tmp/ttq 2>&1 | tee $OUT/ttq.log | grep -E "^\||eagerly|dropped|Error"
echo "castle bench after $((SECONDS - start)) s"
timeout $((560 - (SECONDS - start))) python3 -m odin_bench.cli bench --data data/castle_p30 --steps 1000 --seeds 3 --gpus 1 --modes sync --out /tmp/castle_p30 > $OUT/bench_castle_p30.log 2>&1
grep -E "^\| (config|splatfacto|sync)" $OUT/bench_castle_p30.log | tee $OUT/bench_castle_p30.txt
