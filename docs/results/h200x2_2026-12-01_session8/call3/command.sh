#!/usr/bin/env bash
# session 8 call 3 (one H200: the 2-GPU kind was not lent): 1-GPU quality seeds 1,2 (stock vs odin sync, PSNR);
# GPU-busy profile of the large scene's steady step on one GPU
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi -L
mkdir -p $OUT/r
for s in 1 2; do
t0=$(date +%s)
timeout 170 python3 -m odin_ns.cli bench --data data/cup77 --steps 300 --seeds 1 --first-seed $s --gpus 1 --modes sync --out /tmp/q$s > /tmp/q$s.txt 2>&1
cp /tmp/q$s/results.json $OUT/r/quality_s$s.json; grep "^| s" /tmp/q$s.txt | cut -c1-250; echo "quality s$s wall $(( $(date +%s)-t0 )) s"
done
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
t0=$(date +%s)
timeout 200 python3 $(which ns-train) odin-splatfacto --data /tmp/large --output-dir /tmp/prof1 --max-num-iterations 240 \
    --pipeline.model.num-downscales 0 --pipeline.model.stop-split-at 0 --profile-start 221 --profile-steps 6 \
    --vis tensorboard --viewer.quit-on-train-completion True --logging.local-writer.enable False > /tmp/prof1.txt 2>&1
tail -2 /tmp/prof1.txt; echo "prof large wall $(( $(date +%s)-t0 )) s"
timeout 120 python3 -m odin_ns.cli timeline /tmp/prof1/*/odin-splatfacto/*/profile_rank*.json.gz --out $OUT/timeline_large_1gpu.png > $OUT/timeline_large_1gpu.txt 2>&1
grep -A12 "## Host time" $OUT/timeline_large_1gpu.txt; grep "gpu_busy_fraction\|duration_ms" $OUT/timeline_large_1gpu.txt | head -14
(cd /tmp && find q1 q2 prof1 -name "*.jsonl" | tar czf $OUT/logs3.tgz -T - 2>/dev/null)
(cd $OUT && tar czf r.tgz r && rm -rf r)
