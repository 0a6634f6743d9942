#!/usr/bin/env bash
# session 8 call 2: scaling interleaved (1-GPU sync; 2-GPU sync, sync-one-bucket, no-exchange) x3 seeds on cup77;
# then 1-GPU quality (stock vs odin sync, PSNR) seed 0
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
B="python3 -m odin_ns.cli bench --no-quality --no-stock --seeds 1 --steps 300 --data data/cup77"
mkdir -p $OUT/r
for s in 0 1 2; do
t0=$(date +%s)
timeout 70 $B --gpus 1 --first-seed $s --modes sync --out /tmp/w1_s$s > /tmp/w1_s$s.txt 2>&1
cp /tmp/w1_s$s/results.json $OUT/r/w1_s$s.json
timeout 150 $B --gpus 2 --first-seed $s --modes sync,sync-one-bucket,no-exchange --out /tmp/w2_s$s > /tmp/w2_s$s.txt 2>&1
cp /tmp/w2_s$s/results.json $OUT/r/w2_s$s.json
grep "^| sync\|^| no-ex" /tmp/w1_s$s.txt /tmp/w2_s$s.txt | cut -c1-200; echo "seed $s wall $(( $(date +%s)-t0 )) s"
done
t0=$(date +%s)
timeout 200 python3 -m odin_ns.cli bench --data data/cup77 --steps 300 --seeds 1 --first-seed 0 --gpus 1 --modes sync --out /tmp/q0 > /tmp/q0.txt 2>&1
cp /tmp/q0/results.json $OUT/r/quality_s0.json; grep "^|" /tmp/q0.txt | cut -c1-250; echo "quality s0 wall $(( $(date +%s)-t0 )) s"
(cd /tmp && find w1_s* w2_s* q0 -name "*.jsonl" | tar czf $OUT/logs2.tgz -T - 2>/dev/null)
(cd $OUT && tar czf r.tgz r && rm -rf r)
