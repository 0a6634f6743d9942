"""Unit logs: records written and read back are equal, and ``summarize`` counts windows, delays and spans right."""

from __future__ import annotations

from pathlib import Path

import pytest

from odin_ns.runtime.records import UnitRecord, WindowRecord, read_unit_log, summarize, unit_log, write_unit_log
from odin_ns.sync.hazards import DelayBound

ADMITTED = WindowRecord(conflict_rows=0, buckets=8, buckets_with_updates=6, buckets_published_first=0)
WAITED = WindowRecord(conflict_rows=40, buckets=8, buckets_with_updates=8, buckets_published_first=8,
                      refused_bound=DelayBound(pixels=2.0, opacity=0.5, param_step=0.1))
DELAYED = WindowRecord(conflict_rows=30, buckets=8, buckets_with_updates=4, buckets_published_first=2,
                       delayed_rows=12, delayed_buckets=1, delayed_ratio=0.15, conflict_ratio=0.2,
                       delay_bound=DelayBound(pixels=0.25, opacity=0.004, param_step=0.02))
DELAYED_MORE = WindowRecord(conflict_rows=20, buckets=8, buckets_with_updates=4, buckets_published_first=1,
                            delayed_rows=6, delayed_buckets=1, delayed_ratio=0.05, conflict_ratio=0.1,
                            delay_bound=DelayBound(pixels=0.4, opacity=0.001, param_step=0.03))


def unit(unit_id: int, window: WindowRecord | None, **fields) -> UnitRecord:
    return UnitRecord(unit_id=unit_id, mode="throughput-first", structure_version=0, exchange="dense",
                      bytes_exchanged=1000 * (unit_id + 1), update_rows=50, window=window,
                      compute_s=0.01 * (unit_id + 1), exposed_wait_s=0.002, comm_s=0.003, publish_s=0.001,
                      host_run_s=0.004 * (unit_id + 1), host_between_s=0.001 * unit_id, **fields)


RECORDS = [unit(0, None), unit(1, ADMITTED), unit(2, WAITED, reruns=1, rerun_compute_s=0.004),
           unit(3, DELAYED), unit(4, DELAYED_MORE), unit(5, None, sync_path=True)]


def test_unit_log_reads_back_the_records_written(tmp_path: Path):
    log = unit_log(tmp_path, 0)
    write_unit_log(log, RECORDS[:2])
    write_unit_log(log, RECORDS[2:])  # appended at the next logging step
    assert read_unit_log(log) == RECORDS
    assert log.name == "odin_units.jsonl" and unit_log(tmp_path, 3).name == "odin_units_rank3.jsonl"


def test_summarize_counts_windows_delays_and_means():
    summary = summarize(RECORDS)
    assert (summary.units, summary.reruns, summary.windows, summary.units_on_sync_path) == (6, 1, 4, 1)
    assert summary.windows_admitted == 1  # only ADMITTED waited for no bucket
    assert summary.windows_overlapped == 3  # WAITED published every bucket with updates first
    assert summary.buckets_overlapped_fraction == pytest.approx(1 - (0 + 8 + 2 + 1) / 32)
    assert (summary.delayed_windows, summary.delayed_rows, summary.delayed_ratio_max) == (2, 18, 0.15)
    assert summary.delay_bound_max == DelayBound(pixels=0.4, opacity=0.004, param_step=0.03)  # refused bounds left out
    assert summary.compute_s == pytest.approx(0.035) and summary.rerun_compute_s == pytest.approx(0.004 / 6)
    assert summary.bytes_exchanged == pytest.approx(3500)
    assert summary.host_run_s == pytest.approx(0.014) and summary.host_between_s == pytest.approx(0.0025)
    assert summary.to_json()["delay_bound_max"] == {"pixels": 0.4, "opacity": 0.004, "param_step": 0.03}


def test_summarize_without_windows_has_no_bucket_fraction_and_no_bound():
    summary = summarize([unit(0, None)])
    assert summary.windows == 0 and summary.buckets_overlapped_fraction is None
    assert summary.delay_bound_max is None and summary.delayed_ratio_max == 0.0
    with pytest.raises(ValueError, match="no unit records"):
        summarize([])
