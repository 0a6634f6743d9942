#!/usr/bin/env bash
# session 12 call 1 (one H200): the never-compiled Triton kernels' CUDA tests, host waits per step, presized CUDA tests,
# the presized 4-views crash localised, the large scene's kernel-only profile (GPU-busy fraction)
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
nvidia-smi -L; T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
stage() { echo "=== $1 at $(el) s"; }
stage kernels
timeout 200 python3 -m pytest -q -m gpu tests/test_kernels.py -k "nonfinite or outside or tile" > $OUT/kernels.log 2>&1
echo "kernels rc=$?"; tail -25 $OUT/kernels.log
if ! grep -q " passed" $OUT/kernels.log || grep -q "failed\|error" $OUT/kernels.log; then export ODIN_KERNELS=torch; echo "FALLBACK ODIN_KERNELS=torch"; fi
stage host-waits
timeout 120 python3 -m odin_ns.cli host-waits --data data/cup77 --out /tmp/hw > $OUT/host_waits.log 2>&1; echo "rc=$?"
grep -v Warning $OUT/host_waits.log | tail -30
stage presized-tests
timeout 150 python3 -m pytest -q -m gpu tests/test_presized.py tests/test_host_reads.py > $OUT/presized_tests.log 2>&1; echo "rc=$?"
tail -15 $OUT/presized_tests.log
stage large-scene
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1; tail -2 /tmp/large.txt
if [ $(el) -lt 380 ]; then stage probe-blocking
CUDA_LAUNCH_BLOCKING=1 timeout 130 python3 docs/results/h200_2026-12-01_session10/graph_probe.py /tmp/large 4 > $OUT/probe_blocking.txt 2>&1
echo "rc=$?"; grep -v Warning $OUT/probe_blocking.txt | tail -40; fi
if [ $(el) -lt 470 ]; then stage profile-large
timeout 110 python3 $(which ns-train) odin-splatfacto --data /tmp/large --output-dir /tmp/prof --max-num-iterations 240 \
  --pipeline.model.num-downscales 0 --pipeline.model.stop-split-at 0 --profile-start 221 --profile-steps 6 \
  --profile-host-ops False --vis tensorboard --viewer.quit-on-train-completion True > $OUT/profile_large.log 2>&1; echo "rc=$?"
tail -5 $OUT/profile_large.log
python3 -m odin_ns.cli timeline /tmp/prof/*/odin-splatfacto/*/profile_rank0.json.gz --out $OUT/timeline_large.png > $OUT/timeline_large.json 2>$OUT/timeline_err.txt
head -c 3000 $OUT/timeline_large.json; tail -3 $OUT/timeline_err.txt; fi
stage end
