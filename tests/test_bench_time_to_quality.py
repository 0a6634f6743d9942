"""odin-bench time-to-quality: its reading of the curves (the training run itself is exercised on the GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odin_bench.time_to_quality import STOCK, TimeToQualityCommand, summary_table, time_to_reach


def curve(points):
    return [{"views": views, "train_s": seconds, "psnr": psnr} for views, seconds, psnr in points]


def test_time_to_reach_is_the_first_evaluation_at_or_above_the_target():
    points = curve([(1000, 10.0, 20.0), (2000, 20.0, 24.5), (3000, 30.0, 24.0), (4000, 40.0, 25.0)])
    assert time_to_reach(points, 24.5) == (20.0, 2000)
    assert time_to_reach(points, 25.0) == (40.0, 4000)
    assert time_to_reach(points, 25.1) is None


def test_the_table_gives_each_configurations_time_to_stocks_final_psnr_as_a_share_of_stocks():
    results = {
        STOCK: {"curve": curve([(1000, 50.0, 22.0), (2000, 100.0, 24.0)]), "done": True},
        "odin-b1": {"curve": curve([(1000, 20.0, 23.0), (2000, 40.0, 24.2)]), "done": True},
        "odin-b4": {"curve": curve([(1000, 10.0, 21.0)])},
    }
    table = summary_table(results, [STOCK, "odin-b1"]).splitlines()
    assert table[2].startswith("| stock | 2,000 | 24.000 | 100.0 | 100.0 | 2,000 | 1.00 |")
    assert table[3].startswith("| odin-b1 | 2,000 | 24.200 | 40.0 | 40.0 | 2,000 | 0.40 |")
    assert table[4].startswith("| odin-b4 (in progress) | 1,000 | 21.000 | 10.0 | not reached")


def test_stock_can_come_from_an_earlier_run_and_a_mismatched_one_is_refused_in_one_line(tmp_path: Path, capsys):
    earlier = tmp_path / "earlier.json"
    stock = {"curve": curve([(1000, 50.0, 22.0), (2000, 100.0, 24.0)]), "done": True}
    earlier.write_text(json.dumps({STOCK: stock, "odin-b1": {"curve": curve([(2000, 40.0, 24.2)]), "done": True}}))
    out = tmp_path / "out"
    TimeToQualityCommand(data=tmp_path, views=2000, views_per_step=(), stock_from=earlier, out=out).main()
    results = json.loads((out / "results.json").read_text())
    assert results.keys() == {STOCK} and results[STOCK]["curve"] == stock["curve"]
    assert results[STOCK]["from"] == str(earlier)
    assert "| stock | 2,000 | 24.000 | 100.0 |" in capsys.readouterr().out and (out / "time_to_quality.png").exists()
    with pytest.raises(SystemExit, match="^error: --stock-from .*: stock trained to 2,000 views, this run to 30,000$"):
        TimeToQualityCommand(data=tmp_path, views=30_000, stock_from=earlier, out=out).main()
    earlier.write_text(json.dumps({STOCK: {**stock, "done": False}}))
    with pytest.raises(SystemExit, match="no finished stock run in it"):
        TimeToQualityCommand(data=tmp_path, views=2000, stock_from=earlier, out=out).main()
    with pytest.raises(SystemExit, match="^error: --stock-from .*missing.json: "):
        TimeToQualityCommand(data=tmp_path, views=2000, stock_from=tmp_path / "missing.json", out=out).main()
