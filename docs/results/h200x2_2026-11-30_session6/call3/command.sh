#!/usr/bin/env bash
# session 6 call 3: cup77 sync vs QFP seeds 0,1; large sync vs QFP seed 1
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
B="python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1"
timeout 200 $B --steps 300 --data data/cup77 --first-seed 0 --modes quality-first-predicted,sync --out /tmp/q0 > /tmp/q0.txt 2>&1; cp /tmp/q0/results.json $OUT/cupq_s0.json
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
timeout 170 $B --steps 200 --data /tmp/large --first-seed 1 --modes quality-first-predicted,sync --out /tmp/L1 "--extra=--pipeline.model.stop-split-at 0" > /tmp/L1.txt 2>&1; cp /tmp/L1/results.json $OUT/large_s1.json
timeout 120 $B --steps 300 --data data/cup77 --first-seed 1 --modes quality-first-predicted,sync --out /tmp/q1 > /tmp/q1.txt 2>&1; cp /tmp/q1/results.json $OUT/cupq_s1.json
(cd /tmp && find q0 q1 L1 -name "*.jsonl" | tar czf $OUT/logs3.tgz -T - 2>/dev/null)
