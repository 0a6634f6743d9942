#!/usr/bin/env bash
# profiles of steps 221-226 of sync on cup77, one and two GPUs (`odin-ns timeline` output)
# two NVIDIA H200 (NVLink), 2026-12-01. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
for gpus in 2 1; do
  python3 $(which ns-train) odin-splatfacto --data data/cup77 --output-dir /tmp/prof_w$gpus --max-num-iterations 240 \
      --pipeline.odin.mode sync --profile-start 221 --profile-steps 6 --machine.num-devices $gpus \
      --vis tensorboard --viewer.quit-on-train-completion True --logging.local-writer.enable False
  python3 -m odin_ns.cli timeline /tmp/prof_w$gpus/*/odin-splatfacto/*/profile_rank*.json.gz --out timeline.png \
      > timeline_${gpus}gpu.txt
done
