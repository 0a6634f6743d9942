"""odin-bench time-to-quality: its reading of the curves (the training run itself is exercised on the GPU)."""

from __future__ import annotations

from odin_bench.time_to_quality import STOCK, summary_table, time_to_reach


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
