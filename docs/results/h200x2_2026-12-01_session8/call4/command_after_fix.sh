#!/usr/bin/env bash
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
timeout 100 python3 -m pytest -q -m gpu tests/test_host_reads.py > $OUT/gpu_tests.log 2>&1; tail -3 $OUT/gpu_tests.log
