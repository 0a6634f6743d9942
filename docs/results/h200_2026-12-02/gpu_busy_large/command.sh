#!/usr/bin/env bash
# GPU-busy fraction of the large scene's steady step on one GPU (kernel-only profile of steps 221-226)
# one NVIDIA H200, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
python3 $(which ns-train) odin-splatfacto --data /tmp/large --output-dir /tmp/prof --max-num-iterations 240 \
  --pipeline.model.num-downscales 0 --pipeline.model.stop-split-at 0 --profile-start 221 --profile-steps 6 \
  --profile-host-ops False --vis tensorboard --viewer.quit-on-train-completion True
python3 -m odin_ns.cli timeline /tmp/prof/*/odin-splatfacto/*/profile_rank0.json.gz --out timeline.png > timeline_1_view.json
python3 $(which ns-train) odin-splatfacto --data /tmp/large --output-dir /tmp/prof4 --max-num-iterations 240 \
  --pipeline.model.num-downscales 0 --pipeline.model.stop-split-at 0 --profile-start 221 --profile-steps 6 \
  --pipeline.datamanager.views-per-rank 4 --pipeline.model.presized-intersections True \
  --profile-host-ops False --vis tensorboard --viewer.quit-on-train-completion True
python3 -m odin_ns.cli timeline /tmp/prof4/*/odin-splatfacto/*/profile_rank0.json.gz --out timeline_b4.png \
    > timeline_4_views_presized.json
