"""Print the 2-GPU host-time tables of docs/results.md ("Two GPUs") from the raw files beside this script (run from
anywhere): host_bound_cup77/ (1 and 2 GPUs, sync, one bucket, no-exchange) and one_bucket_cup77/.

For every 2-GPU run: views/s, each rank's host time per unit (in ``run_unit`` and between units, means over the units
after the first 40) and its compute stream's exposed wait (median). For the no-exchange runs also the lockstep
prediction: the mean over units of the slower rank's host time, pairing unit u of rank 0 with unit u of rank 1, what
a step takes when both hosts meet once per unit (a host read after the exchange) and nothing else is added.
"""

import io
import json
import re
import statistics
import tarfile
from pathlib import Path

HERE = Path(__file__).parent
WARM_UP = 40


def unit_logs(archive: Path) -> dict[str, dict[int, list[dict]]]:
    """{bench folder/run label: {rank: records}} from one tgz of unit logs."""
    runs: dict[str, dict[int, list[dict]]] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            match = re.search(r"^(?:\./)?([^/]+/)runs/([^/]+)/.*odin_units(?:_rank(\d+))?\.jsonl$", member.name)
            if not match:
                continue
            lines = io.TextIOWrapper(tar.extractfile(member)).read().splitlines()
            records = [json.loads(line) for line in lines if line]
            records = [r for r in records if r.get("host_between_s") is not None][WARM_UP:]
            runs.setdefault(match.group(1) + match.group(2), {})[int(match.group(3) or 0)] = records
    return runs


def bench_results(folder: Path) -> dict[str, float]:
    """{bench folder/run label: views/s} from the results.json files of a folder (loose or in results.tgz)."""
    texts = [path.read_text() for path in folder.glob("*.json")]
    if (folder / "results.tgz").exists():
        with tarfile.open(folder / "results.tgz") as tar:
            texts += [tar.extractfile(m).read().decode() for m in tar.getmembers() if m.name.endswith(".json")]
    views = {}
    for text in texts:
        for run in json.loads(text)["runs"]:
            folder = run["run_dir"].split("/runs/")[0].rsplit("/", 1)[-1]
            views[f"{folder}/{run['name']}-w{run['ranks']}-b{run['views_per_rank']}-s{run['seed']}"] = run["views_per_s"]
    return views


def host_ms(record: dict) -> float:
    return 1e3 * (record["host_run_s"] + record["host_between_s"])


def main() -> None:
    print("| run | views/s | host ms per unit, rank 0 / 1 (in run_unit + between) | exposed wait ms, rank 0 / 1 "
          "| lockstep prediction ms |")
    print("|---|---|---|---|---|")
    for call in (HERE / "one_bucket_cup77", HERE / "host_bound_cup77"):
        views = bench_results(call)
        for archive in sorted(call.glob("unit_logs.tgz")):
            for label, ranks in sorted(unit_logs(archive).items()):
                hosts = " / ".join(
                    f"{statistics.mean(map(host_ms, r)):.2f} ({statistics.mean(x['host_run_s'] for x in r) * 1e3:.2f}"
                    f" + {statistics.mean(x['host_between_s'] for x in r) * 1e3:.2f})" for _, r in sorted(ranks.items()))
                waits = " / ".join(f"{statistics.median(x['exposed_wait_s'] for x in r) * 1e3:.2f}"
                                   for _, r in sorted(ranks.items()))
                lockstep = ""
                if "/no-exchange" in label and len(ranks) == 2:
                    pairs = zip(map(host_ms, ranks[0]), map(host_ms, ranks[1]))
                    lockstep = f"{statistics.mean(max(pair) for pair in pairs):.2f}"
                rate = views.get(label)
                print(f"| {call.name}/{label} | {rate:.1f} | {hosts} | {waits} | {lockstep} |" if rate else
                      f"| {call.name}/{label} | - | {hosts} | {waits} | {lockstep} |")


if __name__ == "__main__":
    main()
