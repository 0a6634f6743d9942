#!/usr/bin/env bash
# session 6 call 4: large scene, third seed, sync vs quality-first-predicted
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
timeout 200 python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1 --steps 200 --data /tmp/large \
    --first-seed 2 --modes sync,quality-first-predicted --out /tmp/L2 "--extra=--pipeline.model.stop-split-at 0" > /tmp/L2.txt 2>&1
cp /tmp/L2/results.json $OUT/large_s2.json; (cd /tmp && find L2 -name "*.jsonl" | tar czf $OUT/logs4.tgz -T -)
