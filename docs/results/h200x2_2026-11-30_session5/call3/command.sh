#!/usr/bin/env bash
# after the non-blocking NCCL wait: logging every step vs every 10 steps, sync vs quality-first-predicted
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
B="python3 -m odin_ns.cli bench --steps 300 --gpus 2 --no-stock --no-quality --seeds 1"
cup() {
  timeout 75 $B --data data/cup77 --first-seed $1 --modes sync --steps-per-log 1 --out /tmp/c1 > /tmp/c1_$1.txt 2>&1; cp /tmp/c1/results.json $OUT/cup_log1_s$1.json
  timeout 130 $B --data data/cup77 --first-seed $1 --modes sync,quality-first-predicted --out /tmp/c10 > /tmp/c10_$1.txt 2>&1; cp /tmp/c10/results.json $OUT/cup_log10_s$1.json
  python3 - $1 <<'PY'
import json,sys,glob
for f in sorted(glob.glob(f"{__import__('os').environ['OUT']}/cup_log*_s{sys.argv[1]}.json")):
    for r in json.load(open(f))["runs"]: print(f.split('/')[-1], r["name"], round(r["views_per_s"],1), "step_ms", round(r["step_s"]*1e3,2))
PY
}
cup 0
python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
timeout 160 python3 -m odin_ns.cli bench --data /tmp/large --steps 200 --gpus 2 --no-stock --no-quality --seeds 1 --modes sync,quality-first-predicted --out /tmp/L "--extra=--pipeline.model.stop-split-at 0" > /tmp/L.txt 2>&1; cp /tmp/L/results.json $OUT/large_log10.json; grep "^|" /tmp/L.txt
cup 1
timeout 80 bash .gpu/dead_rank_nccl.sh > /tmp/dead.txt 2>&1; tail -4 /tmp/dead.txt; cp /tmp/dead.txt $OUT/dead_rank_nccl.log
(cd /tmp && find c1 c10 L -name "*.jsonl" | tar czf $OUT/logs3.tgz -T - 2>/dev/null)
