#!/usr/bin/env bash
# session 9 calls 4 and 5 (one H200): stock splatfacto then odin sync on the large scene, 1 GPU, 300 steps, no
# densification. Call 4 ran both in one bench, but call 2's killed bench had left /tmp/l_s0's odin run folder
# behind, so the odin run failed on two config.yml (the bench now clears a run's folder first); call 5 ran odin
# alone into a fresh folder. The two runs are adjacent, not interleaved; stock's quality was not evaluated.
source .gpu/device_env.sh >/dev/null; export PYTHONPATH=$PWD:$PYTHONPATH
ls /tmp/large >/dev/null 2>&1 || python3 -m odin_ns.cli demo-scene /tmp/large --preset large > /tmp/large.txt 2>&1
timeout 290 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 0 --gpus 1 --modes sync \
    "--extra=--pipeline.model.stop-split-at 0" --out /tmp/l_s0 > /tmp/l_s0.txt 2>&1   # call 4
timeout 170 python3 -m odin_ns.cli bench --data /tmp/large --steps 300 --seeds 1 --first-seed 0 --gpus 1 --no-stock \
    --modes sync "--extra=--pipeline.model.stop-split-at 0" --out /tmp/l2_s0 > /tmp/l2_s0.txt 2>&1   # call 5
