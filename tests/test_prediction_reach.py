"""``odin-bench prediction-reach`` on the tiny demo scene, whose ring views each see one region: finer buckets let more
windows leave part of an exchange in flight."""

from __future__ import annotations

from pathlib import Path

import pytest

from odin_bench.prediction_reach import PredictionReachCommand, reach


def test_finer_buckets_let_more_windows_leave_part_of_an_exchange_in_flight(tiny_scene: Path):
    coarse, fine = reach(tiny_scene, world_size=2, buckets=(1, 16), units=24)
    assert fine["buckets"] > 8 * coarse["buckets"]
    assert 0.0 < fine["view_meets"] < 1.0
    assert fine["windows_in_flight"] > coarse["windows_in_flight"]
    assert 0.0 < fine["in_flight"] < 1.0


def test_bad_input_stops_with_one_line(tmp_path: Path):
    with pytest.raises(SystemExit, match="--world-size must be at least 2"):
        PredictionReachCommand(data=tmp_path, world_size=1).main()
    with pytest.raises(SystemExit, match="data directory does not exist"):
        PredictionReachCommand(data=tmp_path / "missing").main()
