#!/usr/bin/env bash
# a rank SIGKILLed at step 40 on NCCL: the survivor must exit naming the peer failure (torchrun and nerfstudio's
# launcher, --pipeline.odin.timeout-s 8)
# two NVIDIA H200 (NVLink), NCCL 2.28.9, 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m pytest -q -s -m gpu \
    tests/test_dead_rank.py::test_a_rank_killed_on_nccl_makes_the_survivor_exit_naming_peer_failure > dead_rank_nccl.log 2>&1
