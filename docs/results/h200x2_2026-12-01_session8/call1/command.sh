#!/usr/bin/env bash
# session 8 call 1: profile both ranks of a 2-rank and a 1-rank steady sync step on cup77; sync vs sync-one-bucket x3
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi -L
NS="python3 $(which ns-train)"
for gpus in 2 1; do
t0=$(date +%s)
timeout 120 $NS odin-splatfacto --data data/cup77 --output-dir /tmp/prof_w$gpus --max-num-iterations 240 \
    --pipeline.odin.mode sync --profile-start 221 --profile-steps 6 --machine.num-devices $gpus \
    --vis tensorboard --viewer.quit-on-train-completion True --logging.local-writer.enable False > /tmp/prof_w$gpus.txt 2>&1
tail -3 /tmp/prof_w$gpus.txt; echo "prof w$gpus wall $(( $(date +%s)-t0 )) s"
mkdir -p $OUT/prof_w$gpus
for f in /tmp/prof_w$gpus/*/odin-splatfacto/*/profile_rank*.json.gz /tmp/prof_w$gpus/*/odin-splatfacto/*/odin_units*.jsonl; do cp $f $OUT/prof_w$gpus/; done
timeout 120 python3 -m odin_ns.cli timeline /tmp/prof_w$gpus/*/odin-splatfacto/*/profile_rank*.json.gz --out $OUT/timeline_cup77_w$gpus.png > $OUT/timeline_w$gpus.txt 2>&1
tail -60 $OUT/timeline_w$gpus.txt
done
B="python3 -m odin_ns.cli bench --gpus 2 --no-quality --no-stock --seeds 1"
for s in 0 1 2; do
t0=$(date +%s)
timeout 130 $B --steps 300 --data data/cup77 --first-seed $s --modes sync,sync-one-bucket --out /tmp/k$s > /tmp/k$s.txt 2>&1
cp /tmp/k$s/results.json $OUT/buckets_s$s.json; grep "^|" /tmp/k$s.txt | head -8; echo "buckets s$s wall $(( $(date +%s)-t0 )) s"
done
(cd /tmp && find k0 k1 k2 -name "*.jsonl" | tar czf $OUT/logs1.tgz -T - 2>/dev/null)
