#!/usr/bin/env bash
# One H200, 2026-12-03: odin-splatfacto with captured units (the default) at 1 and 4 views per step to 30,000 views
# on cup77 (full resolution, seed 0), held-out PSNR every 3,000 views outside the training clock, against stock
# splatfacto's curve of the same seed from ../time_to_quality_cup77 (trained on the same machine kind that day; its
# entry is copied in, so time-to-quality does not train it again). Then the third seed of ../captured_vs_stock.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
mkdir -p /tmp/ttq && python3 -c "import json; r = json.load(open('docs/results/h200_2026-12-03/time_to_quality_cup77/results.json')); json.dump({'stock': r['stock']}, open('/tmp/ttq/results.json', 'w'))"
save() { cp /tmp/ttq/results.json $OUT/ttq_results.json; cp /tmp/ttq/time_to_quality.png $OUT/ 2>/dev/null
         for d in cup77 castle_p30; do [ -f /tmp/$d/results.json ] && cp /tmp/$d/results.json $OUT/bench_${d}_seed2.json; done
         grep -rh "eagerly\|dropped" /tmp/ttq /tmp/cup77/runs /tmp/castle_p30/runs 2>/dev/null | sort | uniq -c | head -20 > $OUT/capture_messages.txt; }
trap save EXIT
python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 --views-per-step 1 4 --eval-every-views 3000 --budget-s 330 --out /tmp/ttq 2>&1 | tee $OUT/ttq.log | grep -E "^\||eagerly|dropped|Error"
for d in cup77 castle_p30; do
  timeout 105 python3 -m odin_bench.cli bench --data data/$d --steps 1000 --seeds 1 --first-seed 2 --gpus 1 --modes sync --out /tmp/$d > $OUT/bench_${d}_seed2.log 2>&1
done
