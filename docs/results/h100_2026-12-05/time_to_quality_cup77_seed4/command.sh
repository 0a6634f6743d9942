#!/usr/bin/env bash
# One H100, 2026-12-05 (the H200 was not lent): the GPU tests of captured steps (once per machine), then time to quality on cup77, seed 4:
# stock splatfacto and odin-splatfacto with one and four views per step (the defaults), 30,000 views, held-out PSNR
# every 3,000 views. The run spans device calls on one machine: each call trains until --budget-s and checkpoints, the
# next resumes (run this again until results.json has every entry done). The full log of each call goes to $OUT, and
# every line the capture logic writes (a rejected capture, eager units) to capture_messages.txt.
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
mkdir -p outputs
out=outputs/ttq_cup77_s4
call=$(ls $out/call_*.log 2>/dev/null | wc -l)
save() { cp $out/results.json $out/time_to_quality.png $out/call_*.log $OUT/ 2>/dev/null
         grep -h "eager\|captur\|replay" $out/call_*.log 2>/dev/null | sort | uniq -c > $OUT/capture_messages.txt
         cp outputs/gpu_tests.txt $OUT/ 2>/dev/null; nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt; }
trap save EXIT
if [ ! -f outputs/gpu_tests.txt ]; then
  timeout 150 python3 -m pytest -q tests/test_captured_steps.py tests/test_strategy.py tests/test_capture.py \
    "tests/test_kernels.py::test_packed_adam_step_from_device_values_is_the_scalar_step" --tb=short 2>&1 \
    | grep -E "passed|failed|^E |^FAILED" > outputs/gpu_tests.txt
  echo "tests after $((SECONDS - start)) s: $(cat outputs/gpu_tests.txt)"
fi
mkdir -p $out
left=$((560 - (SECONDS - start)))
timeout $((left + 25)) python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 1 4 \
  --eval-every-views 3000 --seed 4 --budget-s $((left - 90)) --out $out > $out/call_$call.log 2>&1
echo "time-to-quality exit $? after $((SECONDS - start)) s"
grep -v "it/s\]" $out/call_$call.log | tail -12
