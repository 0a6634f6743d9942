#!/usr/bin/env bash
# session 10 call 3 (one H200): the probe's host syncs located (sync debug mode) and the forward's capture checked,
# cup77; then the large scene, stock splatfacto against odin sync, 1 GPU, 300 steps, quality on, seeds 0-2
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
mkdir -p $OUT/r
t0=$(date +%s)
timeout 60 python3 .gpu/graph_probe.py data/cup77 1 4 > $OUT/probe3_cup77.txt 2>&1
echo "probe wall $(( $(date +%s)-t0 )) s"; grep -E "^B=|^  [ABCfl]|Error" $OUT/probe3_cup77.txt | head -20
ls /tmp/large >/dev/null 2>&1 || python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
for s in 0 1 2; do t0=$(date +%s)
timeout 165 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed $s --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/ls_s$s > /tmp/ls_s$s.txt 2>&1
cp /tmp/ls_s$s/results.json $OUT/r/ls_s$s.json; cp /tmp/ls_s$s.txt $OUT/r/; grep "^| s" /tmp/ls_s$s.txt | cut -c1-250
echo "large s$s wall $(( $(date +%s)-t0 )) s"
done
