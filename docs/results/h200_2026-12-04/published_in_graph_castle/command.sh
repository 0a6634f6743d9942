#!/usr/bin/env bash
# One H200, 2026-12-04: odin-splatfacto (one rank, the defaults) against stock splatfacto on castle-P30, 1,000 steps,
# seeds 3-5 interleaved in one invocation, as far as the device time left allowed. From the repository root with .whl,
# .gpu and data/castle_p30 carried (python docs/data/castle_p30.py builds it).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { [ -f /tmp/castle/results.json ] && cp /tmp/castle/results.json $OUT/bench_castle_p30.json; }
trap save EXIT
timeout 255 python3 -m odin_bench.cli bench --data data/castle_p30 --steps 1000 --seeds 3 --first-seed 3 --gpus 1 --modes sync --out /tmp/castle > $OUT/bench_castle_p30.log 2>&1
grep -E "^\| (config|splatfacto|sync)" $OUT/bench_castle_p30.log | tee $OUT/bench_castle_p30.txt
