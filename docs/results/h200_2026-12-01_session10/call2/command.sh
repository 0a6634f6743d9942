#!/usr/bin/env bash
# session 10 call 2 (one H200): CUDA-graph probe with the budget frozen; B=4 vs B=1 at 6,000 views, seeds 1 and 2
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
mkdir -p $OUT/r
ls /tmp/large >/dev/null 2>&1 || python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
for d in data/cup77 /tmp/large; do n=$(basename $d); t0=$(date +%s)
timeout 120 python3 .gpu/graph_probe.py $d 1 4 > $OUT/probe2_$n.txt 2>&1
echo "probe $n wall $(( $(date +%s)-t0 )) s"; grep -E "^B=|^  [ABCl]|Error" $OUT/probe2_$n.txt | head -20
done
for s in 1 2; do t0=$(date +%s)
timeout 200 python3 -m odin_ns.cli bench --data data/cup77 --steps 6000 --seeds 1 --first-seed $s --gpus 1 --no-stock \
    --modes sync --views-per-rank 1 4 --out /tmp/b6k_s$s > /tmp/b6k_s$s.txt 2>&1
cp /tmp/b6k_s$s/results.json $OUT/r/b6k_s$s.json; cp /tmp/b6k_s$s.txt $OUT/r/; grep "^| s" /tmp/b6k_s$s.txt | cut -c1-250
echo "b6k s$s wall $(( $(date +%s)-t0 )) s"
done
