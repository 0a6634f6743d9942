#!/usr/bin/env bash
# session 12 call 2 (one H200): cup77 stock against odin sync, 1 GPU, 1,000 steps, quality, seeds 0-2; the large scene
# seed 2 (300 steps, as the tenth session's seeds 0-1); the large scene's kernel-only profile with 4 views, presized
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
for s in 0 1 2; do echo "=== cup77 s$s at $(el) s"
timeout 130 python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
    --out /tmp/c_s$s > /tmp/c_s$s.txt 2>&1; echo rc=$?
cp /tmp/c_s$s/results.json $OUT/r/c_s$s.json; cp /tmp/c_s$s.txt $OUT/r/; grep "^| s" /tmp/c_s$s.txt | cut -c1-250
done
ls /tmp/large >/dev/null 2>&1 || python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
if [ $(el) -lt 330 ]; then echo "=== large s2 at $(el) s"
timeout 170 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 2 --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/ls_s2 > /tmp/ls_s2.txt 2>&1; echo rc=$?
cp /tmp/ls_s2/results.json $OUT/r/ls_s2.json; cp /tmp/ls_s2.txt $OUT/r/; grep "^| s" /tmp/ls_s2.txt | cut -c1-250; fi
if [ $(el) -lt 500 ]; then echo "=== profile large B=4 presized at $(el) s"
timeout 80 python3 $(which ns-train) odin-splatfacto --data /tmp/large --output-dir /tmp/prof4 --max-num-iterations 240 \
  --pipeline.model.num-downscales 0 --pipeline.model.stop-split-at 0 --profile-start 221 --profile-steps 6 \
  --pipeline.datamanager.views-per-rank 4 --pipeline.model.presized-intersections True \
  --profile-host-ops False --vis tensorboard --viewer.quit-on-train-completion True > $OUT/profile_large_b4.log 2>&1; echo "rc=$?"
grep -i "error\|illegal" $OUT/profile_large_b4.log | head -5
python3 -m odin_ns.cli timeline /tmp/prof4/*/odin-splatfacto/*/profile_rank0.json.gz --out $OUT/timeline_large_b4.png > $OUT/timeline_large_b4.json 2>/dev/null
grep -E "window_ms|compute_ms|busy" $OUT/timeline_large_b4.json; fi
echo "=== end at $(el) s"
