#!/usr/bin/env bash
# session 9 call 2 (one H200): cup77 seed 2 (sync B=1, sync-presized B=1, sync B=4, quality); large scene GPU-busy
# profile at B=1 and B=4; large scene stock vs odin 1 GPU with quality, seed 0
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
mkdir -p $OUT/r
B="python3 -m odin_ns.cli bench --data data/cup77 --steps 1200 --seeds 1 --gpus 1 --no-stock"
s=2
t0=$(date +%s)
timeout 150 $B --first-seed $s --modes sync,sync-presized --out /tmp/a_s$s > /tmp/a_s$s.txt 2>&1
cp /tmp/a_s$s/results.json $OUT/r/a_s$s.json; grep "^| s" /tmp/a_s$s.txt | cut -c1-250; echo "a s$s wall $(( $(date +%s)-t0 )) s"
t0=$(date +%s)
timeout 90 $B --first-seed $s --modes sync --views-per-rank 4 --out /tmp/b_s$s > /tmp/b_s$s.txt 2>&1
cp /tmp/b_s$s/results.json $OUT/r/b_s$s.json; grep "^| s" /tmp/b_s$s.txt | cut -c1-250; echo "b s$s wall $(( $(date +%s)-t0 )) s"
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
for v in 1 4; do
t0=$(date +%s)
timeout 110 python3 $(which ns-train) odin-splatfacto --data /tmp/large --output-dir /tmp/prof_b$v --max-num-iterations 240 \
    --pipeline.model.num-downscales 0 --pipeline.model.stop-split-at 0 --profile-start 221 --profile-steps 6 \
    --pipeline.datamanager.views-per-rank $v \
    --vis tensorboard --viewer.quit-on-train-completion True --logging.local-writer.enable False > /tmp/prof_b$v.txt 2>&1
tail -1 /tmp/prof_b$v.txt; echo "prof b$v wall $(( $(date +%s)-t0 )) s"
timeout 60 python3 -m odin_ns.cli timeline /tmp/prof_b$v/*/odin-splatfacto/*/profile_rank*.json.gz --out $OUT/timeline_large_b$v.png > $OUT/timeline_large_b$v.txt 2>&1
grep -A12 "## Host time" $OUT/timeline_large_b$v.txt | head -8; grep "gpu_busy_fraction\|duration_ms" $OUT/timeline_large_b$v.txt | head -14
done
t0=$(date +%s)
timeout 200 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 0 --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/l_s0 > /tmp/l_s0.txt 2>&1
cp /tmp/l_s0/results.json $OUT/r/large_s0.json; grep "^| s" /tmp/l_s0.txt | cut -c1-250; echo "large s0 wall $(( $(date +%s)-t0 )) s"
(cd /tmp && find a_s2 b_s2 l_s0 prof_b* -name "*.jsonl" | tar czf $OUT/logs2.tgz -T - 2>/dev/null)
(cd $OUT && tar czf r.tgz r && rm -rf r)
