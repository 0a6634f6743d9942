"""Densification of time-to-quality runs from their logs (gsplat's "Step N: ... GSs duplicated/split/pruned"
lines), per configuration: Gaussians added and removed over stretches of views, and the count after the last refine.

    python densification.py LABEL=VIEWS_PER_STEP:LOG[,LOG...] ...

Each argument names a run, its views per step (which turns steps into views) and its log files (a run resumed over
several invocations has one per invocation).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

STRETCHES = ((600, 1300), (1400, 2900), (3200, 3200), (3300, 15000))
"""Views of the refines summed together: the first refines, the growth before the first opacity reset (3,000
views), the refine after it (the reset's prune), and the refines up to the end of densification."""


def refines(logs, views_per_step):
    """{views: (added, pruned, count after)} from gsplat's verbose lines."""
    text = "".join(Path(log).read_text(errors="replace") for log in logs).replace("\r", "\n")
    rows = {}
    grown = r"Step (\d+): (\d+) GSs duplicated, (\d+) GSs split. Now having (\d+)"
    for step, dupli, split, _ in re.findall(grown, text):
        rows.setdefault(int(step) * views_per_step, [0, 0, 0])[0] = int(dupli) + int(split)
    for step, pruned, count in re.findall(r"Step (\d+): (\d+) GSs pruned. Now having (\d+)", text):
        row = rows.setdefault(int(step) * views_per_step, [0, 0, 0])
        row[1], row[2] = int(pruned), int(count)
    return rows


def main(arguments):
    stretches = [f"{a:,}-{b:,} views" if a < b else f"at {a:,} views" for a, b in STRETCHES]
    header = "| run | " + " | ".join(f"{views}: added / pruned" for views in stretches) + " | after 2,900 views |"
    print(header + "\n" + "|---" * (len(STRETCHES) + 2) + "|")
    for argument in arguments:
        label, rest = argument.split("=", 1)
        views_per_step, logs = rest.split(":", 1)
        rows = refines(logs.split(","), int(views_per_step))
        cells = []
        for first, last in STRETCHES:
            chosen = [row for views, row in rows.items() if first <= views <= last]
            cells.append(f"{sum(row[0] for row in chosen):,} / {sum(row[1] for row in chosen):,}")
        print(f"| {label} | " + " | ".join(cells) + f" | {rows.get(2900, [0, 0, 0])[2]:,} |")


if __name__ == "__main__":
    main(sys.argv[1:])
