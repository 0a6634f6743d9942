#!/usr/bin/env bash
# cup77: sync vs quality-first-predicted vs no-exchange, 3 seeds interleaved, then the NCCL dead-rank test
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi -L
timeout 380 python3 -m odin_ns.cli bench --data data/cup77 --steps 300 --seeds 3 --gpus 2 --no-stock --no-quality \
  --modes sync,quality-first-predicted,no-exchange --out /tmp/b1 > /tmp/b1.txt 2>&1
echo "bench rc=$?"; cp /tmp/b1/results.json $OUT/cup77_results.json; grep -E "^\||views/s|Error|error" /tmp/b1.txt | tail -30
timeout 100 bash .gpu/dead_rank_nccl.sh > /tmp/dead.txt 2>&1; echo "dead rc=$?"; tail -15 /tmp/dead.txt
cp /tmp/dead.txt $OUT/dead_rank_nccl.log
(cd /tmp && find b1 -name "*.jsonl" -o -name "*.txt" -o -name "*.log" | tar czf $OUT/cup77_logs.tgz -T - b1.txt 2>/dev/null)
ls -la $OUT
