#!/usr/bin/env bash
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
timeout 300 python3 -m odin_ns.cli bench --data data/castle_p30 --steps 300 --seeds 2 --gpus 2 --no-stock --no-quality \
  --modes sync,quality-first-predicted,no-exchange --out /tmp/b2 > /tmp/b2.txt 2>&1
echo "castle rc=$?"; cp /tmp/b2/results.json $OUT/castle_results.json
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1 || tail -3 /tmp/large.txt
timeout 270 python3 -m odin_ns.cli bench --data /tmp/large --steps 200 --seeds 1 --gpus 2 --no-stock --no-quality \
  --modes sync,quality-first-predicted,no-exchange --out /tmp/b3 "--extra=--pipeline.model.stop-split-at 0" > /tmp/b3.txt 2>&1
echo "large rc=$?"; cp /tmp/b3/results.json $OUT/large_results.json
(cd /tmp && find b2 b3 -name "*.jsonl" | tar czf $OUT/logs2.tgz -T - b2.txt b3.txt large.txt 2>/dev/null)
