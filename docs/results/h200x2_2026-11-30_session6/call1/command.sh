#!/usr/bin/env bash
# session 6 call 1: cup77 3 seeds at log10: stock 1-GPU, odin 1-GPU, sync, sync-sharded, quality-first-predicted; dead rank NCCL
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi -L
B="python3 -m odin_ns.cli bench --steps 300 --gpus 2 --no-quality --seeds 1 --data data/cup77"
for s in 0 1 2; do
  t0=$(date +%s)
  timeout 200 $B --first-seed $s --modes sync,sync-sharded,quality-first-predicted --out /tmp/c$s > /tmp/c$s.txt 2>&1
  cp /tmp/c$s/results.json $OUT/cup_s$s.json; grep "^|" /tmp/c$s.txt; echo "seed $s wall $(( $(date +%s)-t0 )) s"; tail -3 /tmp/c$s.txt
done
timeout 70 bash .gpu/dead_rank_nccl.sh > /tmp/dead.txt 2>&1; tail -6 /tmp/dead.txt; cp /tmp/dead.txt $OUT/dead_rank_nccl.log
(cd /tmp && find c0 c1 c2 -name "*.jsonl" | tar czf $OUT/logs1.tgz -T - 2>/dev/null)
