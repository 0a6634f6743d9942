#!/usr/bin/env bash
# cup77 to 30,000 views for its PSNR, seeds 7 and 8, the defaults, with splatfacto's view matrices: stock splatfacto
# and odin-splatfacto with one and four views per step, held-out PSNR every 3,000 views. All six runs train at once,
# each in its own process on the one GPU (--clock-shared): their clocks are not comparable and time-to-quality-report
# counts only their PSNR. Every trainer is seeded as ns-train seeds it. The runs span device calls on one machine by
# --budget-s (run this again until every run is done); then each seed's three results join into seed_N/results.json.
# From the repository root with .whl, .gpu and data/cup77 carried (see .gpu/README.md).
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
start=$SECONDS
seeds=${SEEDS:-7 8}
root=outputs/ttq_shared
mkdir -p $root
call=$(ls $root/gpu_use_*.csv 2>/dev/null | wc -l)
save() { grep -h "eager\|captur\|replay" $root/*/call_*.log 2>/dev/null | sort | uniq -c > $root/capture_messages.txt
         nvidia-smi --query-gpu=name --format=csv,noheader > $root/gpu.txt
         tar czf $OUT/ttq_shared.tgz --exclude=runs -C outputs ttq_shared; }
trap save EXIT
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader -l 15 > $root/gpu_use_$call.csv &
sampler=$!; pids=()
budget=$((${CALL_S:-585} - 130 - (SECONDS - start)))
for seed in $seeds; do
  for config in stock b1 b4; do
    case $config in stock) pick="--views-per-step";; b1) pick="--no-stock --views-per-step 1";;
                    b4) pick="--no-stock --views-per-step 4";; esac
    out=$root/seed${seed}_$config; mkdir -p $out
    if python3 -c "import json,sys; r=json.load(open('$out/results.json')); sys.exit(0 if all(v.get('done') for v in r.values()) else 1)" 2>/dev/null; then continue; fi
    timeout $((budget + 110)) python3 -m odin_bench.cli time-to-quality --data data/cup77 --views 30000 $pick \
      --eval-every-views 3000 --seed $seed --clock-shared --budget-s $budget --out $out > $out/call_$call.log 2>&1 &
    pids+=($!)
  done
done
wait ${pids[@]}; kill $sampler
echo "call $call: runs ended after $((SECONDS - start)) s"
for dir in $root/seed*_*; do echo "$(basename $dir): $(python3 -c "import json,sys; r=json.load(open('$dir/results.json'))
print('; '.join(f\"{k} {v['step']} steps {v['curve'][-1]['psnr']:.3f} dB done={v.get('done', False)}\" for k, v in r.items()))" 2>&1 | tail -1)"; done
for seed in $seeds; do
  python3 - $root $seed <<'PY'
import json, sys
from pathlib import Path
root, seed = Path(sys.argv[1]), sys.argv[2]
joined = {}
for config in ("stock", "b1", "b4"):
    path = root / f"seed{seed}_{config}" / "results.json"
    joined.update(json.loads(path.read_text()) if path.exists() else {})
if all(entry.get("done") for entry in joined.values()) and len(joined) == 3:
    (root / f"seed_{seed}").mkdir(exist_ok=True)
    (root / f"seed_{seed}" / "results.json").write_text(json.dumps(joined, indent=2))
    print(f"seed {seed}: joined")
PY
done
