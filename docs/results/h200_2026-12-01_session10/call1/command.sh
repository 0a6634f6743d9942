#!/usr/bin/env bash
# session 10 call 1 (one H200): CUDA-graph probe on cup77 and the large scene; B=4 vs B=1 at 6,000 views, seed 0
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
mkdir -p $OUT/r
t0=$(date +%s)
timeout 150 python3 .gpu/graph_probe.py data/cup77 1 4 > $OUT/probe_cup77.txt 2>&1
echo "probe cup77 wall $(( $(date +%s)-t0 )) s"; grep -v Warning $OUT/probe_cup77.txt | tail -30
t0=$(date +%s)
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
echo "large gen wall $(( $(date +%s)-t0 )) s"
t0=$(date +%s)
timeout 150 python3 .gpu/graph_probe.py /tmp/large 1 4 > $OUT/probe_large.txt 2>&1
echo "probe large wall $(( $(date +%s)-t0 )) s"; grep -v Warning $OUT/probe_large.txt | tail -30
s=0; t0=$(date +%s)
timeout 200 python3 -m odin_ns.cli bench --data data/cup77 --steps 6000 --seeds 1 --first-seed $s --gpus 1 --no-stock \
    --modes sync --views-per-rank 1 4 --out /tmp/b6k_s$s > /tmp/b6k_s$s.txt 2>&1
cp /tmp/b6k_s$s/results.json $OUT/r/b6k_s$s.json; cp /tmp/b6k_s$s.txt $OUT/r/; grep "^| s" /tmp/b6k_s$s.txt | cut -c1-250
echo "b6k s$s wall $(( $(date +%s)-t0 )) s"
