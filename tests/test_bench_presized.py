"""``odin-bench bench-presized`` on the CPU: the reference renderer's pairs, timed and counted."""

from __future__ import annotations

from odin_bench.presized_bench import PresizedBenchCommand
from odin_ns.rendering.presized import ROUND_TO


def test_the_presized_benchmark_runs_and_counts_the_pairs_it_times(capsys):
    PresizedBenchCommand(device="cpu", sizes=(1500,), repeats=1, width=320, height=240).main()
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 1,500 |")]
    assert len(row) == 1
    pairs, slots = (int(cell.replace(",", "")) for cell in row[0].split("|")[2:4])
    assert 1500 < pairs <= slots and slots % ROUND_TO == 0
