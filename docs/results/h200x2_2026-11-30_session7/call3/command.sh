#!/usr/bin/env bash
# session 7 call 3: cup77 seed 2 sync vs QFP; dead rank on NCCL; 1 GPU stock vs odin sync seeds 0, 1
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
B="python3 -m odin_ns.cli bench --no-quality --seeds 1 --steps 300 --data data/cup77"
t0=$(date +%s)
timeout 110 $B --gpus 2 --no-stock --first-seed 2 --modes sync,quality-first-predicted --out /tmp/a2 > /tmp/a2.txt 2>&1
cp /tmp/a2/results.json $OUT/cup_s2.json; grep "^|" /tmp/a2.txt | head -4; echo "cup s2 wall $(( $(date +%s)-t0 )) s"
t0=$(date +%s)
timeout 210 bash .gpu/dead_rank_nccl.sh > /tmp/dead.txt 2>&1; grep -E "passed|failed|PeerFailure|^E " /tmp/dead.txt | head; cp /tmp/dead.txt $OUT/dead_rank_nccl.log; echo "dead wall $(( $(date +%s)-t0 )) s"
for s in 0 1; do t0=$(date +%s)
timeout 100 $B --gpus 1 --first-seed $s --modes sync --out /tmp/g$s > /tmp/g$s.txt 2>&1
cp /tmp/g$s/results.json $OUT/one_gpu_s$s.json; grep "^|" /tmp/g$s.txt | head -4; echo "1gpu s$s wall $(( $(date +%s)-t0 )) s"; done
(cd /tmp && find a2 g0 g1 -name "*.jsonl" | tar czf $OUT/logs3.tgz -T - 2>/dev/null)
