#!/usr/bin/env bash
# profiles of steps 231-236 of the large scene on two GPUs: no-exchange, sync with the scoped and the dense
# exchange, quality-first (`odin-ns timeline` figures per rank)
# two NVIDIA H200 (NVLink), 2026-11-30. Run from the repository root; `python3 -m odin_ns.cli` is what `odin-bench` (lab
# subcommands) and `odin-ns` (demo-scene) are today. Files land where this folder's files came from.
python3 -m odin_ns.cli demo-scene /tmp/large --preset large
run() { # name, extra flags
  torchrun --nproc-per-node 2 $(which ns-train) odin-splatfacto --data /tmp/large --output-dir /tmp/prof --experiment-name $1 \
    --max-num-iterations 240 --pipeline.model.num-downscales 0 --pipeline.model.stop-split-at 0 \
    --profile-start 231 --profile-steps 6 --vis tensorboard --viewer.quit-on-train-completion True \
    --logging.local-writer.enable False "${@:2}"
  python3 -m odin_ns.cli timeline /tmp/prof/$1/odin-splatfacto/*/profile_rank*.json.gz --out $1.png > $1.json
}
run no_exchange --pipeline.odin.mode no-exchange
run sync_scoped --pipeline.odin.mode sync --pipeline.odin.exchange auto
run sync_dense --pipeline.odin.mode sync --pipeline.odin.exchange dense
run quality_first --pipeline.odin.mode quality-first --pipeline.odin.exchange auto
