#!/usr/bin/env bash
# The probe of "The step is stock's" with cuDNN's TF32 off at steps 1099, 3199, 5999 and 9999 (SH degrees 1 and 3),
# on odin's torch path (every kernel in torch, eager units, full resolution), with the view inverses odin hands
# gsplat taken as gsplat computes them (this tree) and assembled from the poses (build/before: odin_ns of the commit
# before, `git archive HEAD~1 odin_ns | tar -x -C build/before`); odin's defaults (Triton kernels, captured units)
# with this tree; and the floor, stock's step run twice from odin's torch-path states. Four processes at once on the
# one GPU (their numbers are read, not their times), then the GPU tests of captured steps. From the repository root
# with .whl, .gpu, data/cup77 and build/before carried; the logs come back in probe.tgz.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
P=docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py
STEPS="1099 3199 5999 9999"
R=/tmp/probe_logs; mkdir -p $R
save() { nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt; tar czf $OUT/probe.tgz -C $R .; }
trap save EXIT
run() {  # name, then environment assignments and the probe's arguments
  local name=$1; shift
  mkdir -p /tmp/scratch_$name
  env TMPDIR=/tmp/scratch_$name ODIN_TF32=0 ODIN_DOWNSCALES=0 "$@" > $R/$name.log 2>&1
  echo "$name exit $? after $((SECONDS - start)) s"
}
run torch_path_view_inverses ODIN_KERNELS=torch ODIN_RUNTIME="captured_units=False" python3 $P probe data/cup77 $STEPS &
run torch_path_assembled_inverses PYTHONPATH=$PWD/build/before:$PYTHONPATH ODIN_KERNELS=torch \
  ODIN_RUNTIME="captured_units=False" python3 $P probe data/cup77 $STEPS &
run defaults_view_inverses python3 $P probe data/cup77 $STEPS &
run torch_path_stock_twice ODIN_KERNELS=torch ODIN_RUNTIME="captured_units=False" \
  python3 $P probe-stock-twice data/cup77 $STEPS &
wait
timeout $((580 - (SECONDS - start))) python3 -m pytest -q tests/test_captured_steps.py tests/test_strategy.py \
  tests/test_capture.py tests/test_read_prediction.py tests/test_host_reads.py --tb=short 2>&1 \
  | grep -E "passed|failed|^E |^FAILED" > $R/gpu_tests.txt
echo "tests after $((SECONDS - start)) s: $(tail -1 $R/gpu_tests.txt)"
for f in $R/*.log; do echo "== $f"; grep -v "it/s" $f | grep '^{' | cut -c1-400; done
