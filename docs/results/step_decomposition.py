"""Per-step time of every run of one session that kept its unit log, split into the runtime's GPU spans (compute,
exposed wait, publish; CUDA events on the compute stream) and the rest of the step (the median step time minus the medians of the spans: the
trainer's own work and the GPU idling while its host is blocked or behind).

    python3 docs/results/step_decomposition.py docs/results/h200x2_2026-11-30_session6 docs/img/session6_step_decomposition.png
    python3 docs/results/step_decomposition.py docs/results/h200x2_2026-11-30_session7 docs/img/session7_step_decomposition.png

Reads the bench results (callN/*.json) and unit logs (callN/logs*.tgz) of the session folder; prints a table and
writes the figure. Medians over the second half of each run's units, as the bench's
step time is."""

import glob
import json
import os
import statistics
import sys
import tarfile
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SPANS = ("compute_s", "exposed_wait_s", "publish_s")
HOST_TIMES = ("host_run_s", "host_between_s")
"""Host wall times per unit, in ``run_unit`` and before it (absent from older logs)."""


def unit_logs(session: Path):
    """(run, scene, [medians of each rank's spans and host times, in ms]) of every run whose bench finished (a timed
    out bench has no results entry) and whose rank-0 log was kept; medians over the second half of the units."""
    results = {}
    for path in glob.glob(str(session / "call*" / "*.json")):
        for run in json.load(open(path))["runs"]:
            results[os.path.basename(run["run_dir"])] = run
    for archive in sorted(glob.glob(str(session / "call*" / "logs*.tgz"))):
        with tarfile.open(archive) as tar:
            logs = {member.name: member for member in tar.getmembers() if member.name.endswith(".jsonl")}
            for name in sorted(logs):
                run = results.get(name.split("/")[-2])
                if not name.endswith("/odin_units.jsonl") or run is None:
                    continue
                ranks = []
                for rank in range(run["ranks"]):
                    log = name if rank == 0 else name.replace("odin_units.jsonl", f"odin_units_rank{rank}.jsonl")
                    if log not in logs:
                        break
                    records = [json.loads(line) for line in tar.extractfile(logs[log])]
                    records = [r for r in records if r["unit_id"] >= len(records) // 2]
                    ranks.append({key: 1e3 * statistics.median(r[key] for r in records)
                                  for key in (*SPANS, *HOST_TIMES) if key in records[0]})
                yield run, "cup77" if "/cup77/" in name else "large", ranks


def main(session: Path, out: Path):
    grouped = defaultdict(list)
    logs = list(unit_logs(session))
    for run, scene, ranks in logs:
        label = f"{run['name']} ({run['ranks']} GPU{'s' if run['ranks'] > 1 else ''})"
        grouped[(scene, label)].append((run["step_s"] * 1e3, ranks[0]))
    rows = []
    print("| scene | configuration | runs | step ms | compute | exposed wait | publish | rest of the step |")
    print("|---|---|---|---|---|---|---|---|")
    for (scene, label), runs in sorted(grouped.items()):
        step = statistics.median(s for s, _ in runs)
        parts = {name: statistics.median(spans[name] for _, spans in runs) for name in SPANS}
        rest = step - sum(parts.values())  # so that a bar is as long as the median step
        rows.append((f"{scene}: {label}", parts, rest))
        print(f"| {scene} | {label} | {len(runs)} | {step:.2f} | {parts['compute_s']:.2f} | "
              f"{parts['exposed_wait_s']:.2f} | {parts['publish_s']:.2f} | {rest:.2f} |")
    figure, axis = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.6))
    for lane, (label, parts, rest) in enumerate(rows):
        left = 0.0
        for name, color in zip((*SPANS, "rest"), ("tab:blue", "tab:red", "tab:green", "tab:gray")):
            width = parts[name] if name != "rest" else rest
            axis.barh(lane, width, left=left, color=color, label=name.removesuffix("_s") if lane == 0 else None)
            left += width
    axis.set_yticks(range(len(rows)), [label for label, _, _ in rows])
    axis.invert_yaxis()
    axis.set_xlabel("ms per step (medians)")
    axis.set_title("Where a step goes: the runtime's GPU spans and the rest (2 x H200)")
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4, frameon=False)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    print(f"wrote {out}")
    print("\n| scene | configuration | seed | rank 0: compute, exposed wait, publish[, host in run_unit, host before] "
          "(ms) | rank 1: the same |")
    print("|---|---|---|---|---|")
    for run, scene, ranks in sorted(logs, key=lambda log: (log[1], log[0]["name"], log[0]["seed"])):
        if len(ranks) == 2:
            cells = [", ".join(f"{value:.2f}" for value in spans.values()) for spans in ranks]
            print(f"| {scene} | {run['name']} | {run['seed']} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
