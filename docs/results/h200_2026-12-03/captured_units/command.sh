#!/usr/bin/env bash
# One H200, 2026-12-03: the captured-step GPU tests (a replayed step against eager steps, through densification), then
# odin-splatfacto (one rank, sync, captured units: the default) against stock splatfacto on cup77, 1,000 steps,
# 3 seeds interleaved. From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
timeout 150 python3 -m pytest -q tests/test_captured_steps.py --tb=short 2>&1 | grep -E "passed|failed|^E " | tee $OUT/gpu_tests.txt
timeout 320 python3 -m odin_bench.cli bench --data data/cup77 --steps 1000 --seeds 3 --gpus 1 --modes sync --out /tmp/cup77 > $OUT/bench_cup77.log 2>&1
grep -E "^\| (config|splatfacto|sync)" $OUT/bench_cup77.log | tee $OUT/bench_cup77.txt
cp /tmp/cup77/results.json $OUT/bench_cup77.json
grep -rh "eagerly\|above the" /tmp/cup77/runs 2>/dev/null | sort | uniq -c | head -5
