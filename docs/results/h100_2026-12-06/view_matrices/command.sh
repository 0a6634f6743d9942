#!/usr/bin/env bash
# Why odin's loss at step 5999 was not stock's bit for bit on the torch path (../view_inverse_probe): cup77's view
# matrices from nerfstudio's compiled get_viewmat against the same operations eagerly, and the view of each probed
# step; then the torch-path probe (TF32 off) with odin rendering from splatfacto's compiled matrices, beside the GPU
# tests of the captured step, the host reads and the view matrices. From the repository root with .whl, .gpu and
# data/cup77 carried; the logs come back in logs.tgz (here in logs/). Ran on an H100 (the H200 was not lent).
# gpu_tests.txt holds the steady-step host-read test as it was before it read the runtime after the first step (its
# one failure, an AttributeError); host_reads_gpu.txt is tests/test_host_reads.py after that, on the same machine:
#   source .gpu/device_env.sh; python3 -m pytest -q tests/test_host_reads.py
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
HERE=docs/results/h100_2026-12-06/view_matrices
P=docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py
STEPS="1099 5999"
R=/tmp/logs; mkdir -p $R
save() { nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt; tar czf $OUT/logs.tgz -C $R .; }
trap save EXIT
python3 $HERE/compiled_against_eager.py data/cup77 $STEPS > $R/compiled_against_eager.log 2>&1
echo "check after $((SECONDS - start)) s"; grep '^{' $R/compiled_against_eager.log
ODIN_TF32=0 ODIN_DOWNSCALES=0 ODIN_KERNELS=torch ODIN_RUNTIME="captured_units=False" \
  timeout 250 python3 $P probe data/cup77 $STEPS > $R/torch_path_splatfacto_matrices.log 2>&1 &
timeout 200 python3 -m pytest -q tests/test_host_reads.py tests/test_read_prediction.py tests/test_captured_steps.py \
  tests/test_capture.py tests/test_strategy.py --tb=short 2>&1 | grep -E "passed|failed|^E |^FAILED" > $R/gpu_tests.txt
echo "tests after $((SECONDS - start)) s: $(tail -1 $R/gpu_tests.txt)"
wait
echo "probe after $((SECONDS - start)) s"
grep '^{' $R/torch_path_splatfacto_matrices.log | cut -c1-330
