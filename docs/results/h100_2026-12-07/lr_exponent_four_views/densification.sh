#!/usr/bin/env bash
# Gaussians added and pruned by four views per step at each learning-rate exponent (densification.py of
# ../held_out_61_four_views over the stored logs); run from the repository root.
here=docs/results/h100_2026-12-07
runs=()
for seed in 3 5 7; do
  runs+=("seed $seed, exponent 0.5=4:$here/held_out_61_four_views/seed$seed/log.txt")
  for exponent in 0 0.25 0.75 1; do
    runs+=("seed $seed, exponent $exponent=4:$here/lr_exponent_four_views/exponent_$exponent/seed_$seed/odin-b4/log.txt")
  done
done
python $here/held_out_61_four_views/densification.py "${runs[@]}"
