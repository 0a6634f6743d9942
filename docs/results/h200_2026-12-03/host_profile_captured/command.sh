#!/usr/bin/env bash
# One H200, 2026-12-03: where a steady captured step's host time and GPU time go, one view per step: cProfile and
# torch.profiler's kernel tables of cup77 and of the large generated scene (odin_bench.host_profile). From the
# repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
timeout 200 python3 -m odin_bench.host_profile --data data/cup77 --views-per-rank 1 --rows 60 --out /tmp/hp_cup > $OUT/host_profile_cup77.txt 2>&1
grep "===" $OUT/host_profile_cup77.txt
timeout 60 python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /dev/null 2>&1
timeout 250 python3 -m odin_bench.host_profile --data /tmp/large --views-per-rank 1 --rows 60 --out /tmp/hp_large > $OUT/host_profile_large.txt 2>&1
grep "===" $OUT/host_profile_large.txt
