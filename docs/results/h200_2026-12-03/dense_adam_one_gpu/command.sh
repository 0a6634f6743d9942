#!/usr/bin/env bash
# One H200, 2026-12-03: the drift kernel's GPU tests, the publication kernels at 1.29M rows (dense Adam whole against
# its drift and scope parts), and odin-splatfacto (one rank, dense Adam) against stock splatfacto on cup77, 1,000
# steps, 3 seeds interleaved. From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH
python3 -m pytest -q -m gpu tests/test_kernels.py -k "drift or packed_adam" 2>&1 | tail -2 | tee $OUT/gpu_tests.txt
python3 -m odin_bench.kernels_bench --sizes 1290820 --fractions 0.05 0.25 1.0 --repeats 20 > $OUT/kernels_bench.txt 2>&1
python3 -m odin_bench.cli bench --data data/cup77 --steps 1000 --seeds 3 --gpus 1 --modes sync --out /tmp/cup77 2>&1 | tail -25 | tee $OUT/bench_cup77.txt
cp /tmp/cup77/results.json $OUT/bench_cup77.json
# The same on castle-P30 (docs/data/castle_p30.py builds it into data/castle_p30), 1,000 steps, 3 seeds interleaved.
python3 -m odin_bench.cli bench --data data/castle_p30 --steps 1000 --seeds 3 --gpus 1 --modes sync --out /tmp/castle 2>&1 | tail -5 | tee $OUT/bench_castle.txt
cp /tmp/castle/results.json $OUT/bench_castle.json
