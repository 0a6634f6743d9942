#!/usr/bin/env bash
# session 12 call 4 (one H200): cup77 1,000 steps seed 0 again: stock and odin with their Gaussian counts (stock's
# densification log, both final checkpoints), and odin with dense Adam, torch kernels and a random order together
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }; mkdir -p $OUT/r
timeout 110 python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --gpus 1 --modes sync --out /tmp/g > /tmp/g.txt 2>&1
echo rc=$? at $(el); cp /tmp/g/results.json $OUT/r/g.json; grep "^| s" /tmp/g.txt | cut -c1-200
grep -h "Now having" /tmp/g/runs/*.log | tail -12
ODIN_KERNELS=torch timeout 70 python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --gpus 1 --modes sync \
  --no-stock --out /tmp/h "--extra=--pipeline.odin.adam dense --pipeline.datamanager.order random" > /tmp/h.txt 2>&1
echo rc=$? at $(el); cp /tmp/h/results.json $OUT/r/h.json; grep "^| s" /tmp/h.txt | cut -c1-200
python3 - <<'PY'
import glob, torch
for path in sorted(glob.glob("/tmp/[gh]/runs/*/*/*/*/nerfstudio_models/*.ckpt")):
    state = torch.load(path, map_location="cpu", weights_only=False)["pipeline"]
    means = [v for k, v in state.items() if k.endswith("gauss_params.means")]
    print(path.split("/runs/")[1][:40], path.rsplit("/", 1)[1], "gaussians", means[0].shape[0] if means else None)
PY
echo end at $(el)
