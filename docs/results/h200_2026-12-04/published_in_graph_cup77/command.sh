#!/usr/bin/env bash
# One H200, 2026-12-04: odin-splatfacto (one rank, the defaults) against stock splatfacto on cup77, 1,000 steps,
# seeds 3-5 interleaved in one invocation, then seeds 6-8 in a second (FIRST=6). From the repository root with .whl, .gpu and data/cup77 carried.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { [ -f /tmp/cup77/results.json ] && cp /tmp/cup77/results.json $OUT/bench_cup77_from${FIRST:-3}.json
         grep -rh "eagerly\|dropped\|capture" /tmp/cup77/runs 2>/dev/null | sort | uniq -c | head > $OUT/capture_messages.txt; }
trap save EXIT
timeout 560 python3 -m odin_bench.cli bench --data data/cup77 --steps 1000 --seeds 3 --first-seed ${FIRST:-3} --gpus 1 --modes sync --out /tmp/cup77 > $OUT/bench_cup77_from${FIRST:-3}.log 2>&1
grep -E "^\| (config|splatfacto|sync)" $OUT/bench_cup77_from${FIRST:-3}.log | tee $OUT/bench_cup77_from${FIRST:-3}.txt
