#!/usr/bin/env bash
# One H200, 2026-12-03: one rank's sync unit published inside its captured graph. The GPU tests of captured steps,
# the Adam step from device values, the statistics accumulated once and the presized renders; cup77's host profile
# and kernel-only profile (GPU busy at step 1,251) of the captured step; then odin-splatfacto against stock
# splatfacto on cup77, 1,000 steps, 3 seeds interleaved. From the repository root with .whl, .gpu and data/cup77
# carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
save() { [ -f /tmp/cup77/results.json ] && cp /tmp/cup77/results.json $OUT/bench_cup77.json
         grep -rh "eagerly\|dropped\|capture" /tmp/cup77/runs /tmp/prof_cup77 2>/dev/null | sort | uniq -c | head -20 > $OUT/capture_messages.txt; }
trap save EXIT
timeout 150 python3 -m pytest -q tests/test_captured_steps.py tests/test_strategy.py tests/test_presized.py tests/test_capture.py \
  "tests/test_kernels.py::test_packed_adam_step_from_device_values_is_bitwise_the_scalar_step" \
  "tests/test_kernels.py::test_nonfinite_columns_record_the_first_unit_of_nan_and_inf_only" --tb=short 2>&1 | grep -E "passed|failed|^E " | tee $OUT/gpu_tests.txt
timeout 100 python3 -m odin_bench.host_profile --data data/cup77 --views-per-rank 1 --rows 40 --out /tmp/hp_cup > $OUT/host_profile_cup77.txt 2>&1
grep "===" $OUT/host_profile_cup77.txt
timeout 120 python3 -m odin_bench.train --kernel-only-profile odin-splatfacto --data data/cup77 --output-dir /tmp/prof_cup77 \
  --max-num-iterations 1260 --pipeline.model.num-downscales 0 --profile-start 1251 --profile-steps 6 \
  --vis tensorboard --viewer.quit-on-train-completion True > $OUT/train_cup77.log 2>&1
python3 -m odin_bench.cli timeline /tmp/prof_cup77/*/odin-splatfacto/*/profile_rank0.json.gz --out $OUT/timeline_cup77.png > $OUT/timeline_cup77.json 2>&1
grep -o '"gpu_busy_fraction": [0-9.]*' $OUT/timeline_cup77.json | head -1
echo "bench after $((SECONDS - start)) s"
timeout $((575 - (SECONDS - start))) python3 -m odin_bench.cli bench --data data/cup77 --steps 1000 --seeds 3 --gpus 1 --modes sync --out /tmp/cup77 > $OUT/bench_cup77.log 2>&1
grep -E "^\| (config|splatfacto|sync)" $OUT/bench_cup77.log | tee $OUT/bench_cup77.txt
