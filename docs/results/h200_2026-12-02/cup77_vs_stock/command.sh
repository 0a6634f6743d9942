#!/usr/bin/env bash
# cup77, stock splatfacto against odin-splatfacto on one GPU, 1,000 steps, held-out quality, seeds 0-6
# one NVIDIA H200, 2026-12-02. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
for s in 0 1 2; do
  python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
      --out /tmp/c_s$s > c_s$s.txt 2>&1; cp /tmp/c_s$s/results.json c_s$s.json
done
# seeds 3-6: four benches at once on the same GPU (their PSNR counts, their views/s do not)
for s in 3 4 5 6; do
  python3 -m odin_ns.cli bench --data data/cup77 --steps 1000 --seeds 1 --first-seed $s --gpus 1 --modes sync \
      --out /tmp/q_s$s > q_s$s.txt 2>&1 &
done; wait
for s in 3 4 5 6; do cp /tmp/q_s$s/results.json q_s$s.json; done
