#!/usr/bin/env bash
# the publication's fused Adam launch replayed from a CUDA graph against launched: its GPU tests, its host time
# (kernels_bench at the large scene's rows) and cup77 training on one GPU, seeds 0-2
# one NVIDIA H200, 2026-12-03. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m pytest -q -m gpu tests/test_kernels.py -k "replayed or packed_adam or adam" tests/test_host_reads.py > gpu_tests.txt 2>&1
python3 -m odin_ns.benchmarks.kernels_bench --sizes 1290820 --fractions 0.3 1.0 --repeats 50 > kernels_bench.txt 2>&1
for s in 0 1 2; do
  python3 -m odin_ns.cli bench --data data/cup77 --steps 300 --seeds 1 --first-seed $s --gpus 1 --no-stock --no-quality \
      --modes sync,sync-launched-publication --out /tmp/n_s$s; cp /tmp/n_s$s/results.json captured_vs_launched_s$s.json
done
