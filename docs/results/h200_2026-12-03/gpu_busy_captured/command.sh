#!/usr/bin/env bash
# One H200, 2026-12-03: the presized-intersection and captured-step GPU tests (pairs and renders bitwise gsplat's;
# every replayed step against the eager step), the presized intersections against gsplat's isect_tiles, kernel-only
# profiles of the captured one-view step (cup77 at step 1,251, after four refinements; the large generated scene at
# step 221), then, where the device time left allows it, odin against stock on the large scene, 300 steps, seed 0. From the repository root with .whl, .gpu
# and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
start=$SECONDS
save() { [ -f /tmp/large_bench/results.json ] && cp /tmp/large_bench/results.json $OUT/bench_large.json
         grep -rh "eagerly\|dropped" /tmp/prof_cup /tmp/prof_large /tmp/large_bench/runs 2>/dev/null | sort | uniq -c | head > $OUT/capture_messages.txt; }
trap save EXIT
timeout 120 python3 -m pytest -q tests/test_presized.py tests/test_captured_steps.py --tb=short 2>&1 | grep -E "passed|failed|^E " | tee $OUT/gpu_tests.txt
timeout 60 python3 -m odin_bench.cli bench-presized 2>&1 | grep "^|" | tee $OUT/bench_presized.txt
profile() {  # name data steps start extra...
  local name=$1 data=$2 steps=$3 first=$4; shift 4
  timeout 150 python3 -m odin_bench.train --kernel-only-profile odin-splatfacto --data $data --output-dir /tmp/prof_$name \
    --max-num-iterations $steps --pipeline.model.num-downscales 0 --profile-start $first --profile-steps 6 \
    --vis tensorboard --viewer.quit-on-train-completion True "$@" > $OUT/train_$name.log 2>&1
  python3 -m odin_bench.cli timeline /tmp/prof_$name/*/odin-splatfacto/*/profile_rank0.json.gz --out $OUT/timeline_$name.png > $OUT/timeline_$name.json 2>&1
  grep -o '"gpu_busy_fraction": [0-9.]*' $OUT/timeline_$name.json | head -1 | sed "s/^/$name /"
}
profile cup77 data/cup77 1260 1251
timeout 120 python3 -m odin_ns.cli demo-scene /tmp/large --preset large > $OUT/demo_scene.log 2>&1; echo "large scene after $((SECONDS - start)) s"
profile large /tmp/large 240 221 --pipeline.model.stop-split-at 0
left=$((340 - (SECONDS - start))); echo "bench with ${left} s left"
[ $left -gt 150 ] && timeout $left python3 -m odin_bench.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 0 --gpus 1 --modes sync \
  "--extra=--pipeline.model.stop-split-at 0" --out /tmp/large_bench > $OUT/bench_large.log 2>&1
grep -E "^\| (config|splatfacto|sync)" $OUT/bench_large.log
