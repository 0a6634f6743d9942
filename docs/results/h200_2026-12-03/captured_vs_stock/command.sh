#!/usr/bin/env bash
# One H200, 2026-12-03: the captured-step GPU tests (every replayed step against the eager step on the same state,
# through densification), then odin-splatfacto (one rank, sync, captured units: the defaults) against stock
# splatfacto, 1,000 steps, 3 seeds interleaved, on cup77 and castle-P30. From the repository root with .whl, .gpu,
# data/cup77 and data/castle_p30 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { for d in cup77 castle_p30; do [ -f /tmp/$d/results.json ] && cp /tmp/$d/results.json $OUT/bench_$d.json; done
         grep -rh "eagerly\|dropped\|capture" /tmp/cup77/runs /tmp/castle_p30/runs 2>/dev/null | sort | uniq -c | head -20 > $OUT/capture_messages.txt; }
trap save EXIT
timeout 110 python3 -m pytest -q tests/test_captured_steps.py --tb=short 2>&1 | grep -E "passed|failed|^E " | tee $OUT/gpu_tests.txt
for d in cup77 castle_p30; do
  timeout 225 python3 -m odin_bench.cli bench --data data/$d --steps 1000 --seeds 3 --gpus 1 --modes sync --out /tmp/$d > $OUT/bench_$d.log 2>&1
  grep -E "^\| (config|splatfacto|sync)" $OUT/bench_$d.log | tee $OUT/bench_$d.txt
done
