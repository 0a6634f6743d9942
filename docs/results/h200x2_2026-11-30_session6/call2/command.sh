#!/usr/bin/env bash
# session 6 call 2: cup77 seed 2 (sync, sync-sharded, QFP), dead rank NCCL, large sync vs QFP vs sharded 1 seed
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
B="python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1"
timeout 150 $B --steps 300 --data data/cup77 --first-seed 2 --modes sync,sync-sharded,quality-first-predicted --out /tmp/c2 > /tmp/c2.txt 2>&1; cp /tmp/c2/results.json $OUT/cup_s2.json
timeout 60 bash .gpu/dead_rank_nccl.sh > /tmp/dead.txt 2>&1; tail -5 /tmp/dead.txt; cp /tmp/dead.txt $OUT/dead_rank_nccl.log
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
timeout 330 $B --steps 200 --data /tmp/large --modes sync,quality-first-predicted,sync-sharded,no-exchange --out /tmp/L "--extra=--pipeline.model.stop-split-at 0" > /tmp/L.txt 2>&1; cp /tmp/L/results.json $OUT/large_s0.json
(cd /tmp && find c2 L -name "*.jsonl" | tar czf $OUT/logs2.tgz -T - 2>/dev/null)
