#!/usr/bin/env bash
# session 9 call 3 (one H200, warm after call 2, which generated /tmp/large): GPU and host memory over 30,000 steps of
# the large scene with densification until step 15,000, one rank
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
ls /tmp/large >/dev/null 2>&1 || python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
timeout 545 python3 -m odin_ns.benchmarks.memory_soak --data /tmp/large --steps 30000 --ranks 1 --stop-split-at 15000 \
    --sample-every-s 10 --max-seconds 500 --out /tmp/soak > /tmp/soak.txt 2>&1
cp /tmp/soak/results.json /tmp/soak/*.png /tmp/soak.txt $OUT/
