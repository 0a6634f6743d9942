#!/usr/bin/env bash
# Held-out views that single cup77 runs lose by 30,000 views, from the stored results (CPU). From the repository root.
python3 docs/results/cpu_2026-12-08/lost_views/lost_views.py > docs/results/cpu_2026-12-08/lost_views/output.md
