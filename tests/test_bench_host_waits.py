"""``odin-bench host-waits``: the host synchronisations of steady steps on a GPU, counted by call site. On the CPU:
the capture of what native code prints, and the warm-up that makes the counted steps steady."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from odin_bench import host_waits
from odin_bench.host_waits import SYNC_WARNING, native_stderr_lines, steps_until_counted_views_sized_ahead


def test_native_stderr_is_captured_for_counting_and_written_back(capfd):
    """A C++ extension's sync warning bypasses Python (c10 prints it to file descriptor 2): the host-waits count
    reads it from there, and what was printed still reaches standard error."""
    with native_stderr_lines() as lines:
        os.write(2, f"[W CUDAFunctions.cpp:162] Warning: {SYNC_WARNING} (function warn_or_error_on_sync)\n".encode())
        os.write(2, b"something else\n")
    assert sum(SYNC_WARNING in line for line in lines) == 1 and "something else" in lines
    assert SYNC_WARNING in capfd.readouterr().err


class _CyclicPlan:
    """A plan whose rank 0 renders views 0, 1, 2, 3, 0, 1, ... one per step (4 units per epoch)."""

    units_per_epoch = 4

    def views_for(self, step: int, rank: int) -> list:
        return [step % 4]


def test_presized_warmup_lasts_until_every_counted_view_has_a_count_on_the_host():
    """With presized intersections a view is sized exactly (a host read) until the count of an earlier render has
    reached the host, ``lag`` renders after it: host-waits counts from the first step whose counted views all have
    one, training from step 0, never earlier than the warm-up asked for."""
    plan = _CyclicPlan()
    assert steps_until_counted_views_sized_ahead(plan, warmup_steps=2, counted_steps=3) == 4  # views 0-3 seen by 4
    assert steps_until_counted_views_sized_ahead(plan, warmup_steps=10, counted_steps=3) == 10
    twice = type("Twice", (_CyclicPlan,), {"units_per_epoch": 6, "views_for": lambda self, s, r: [s // 2 % 3]})()
    # views 0, 0, 1, 1, 2, 2, 0, ...: view 1 is first rendered at step 2, so at step 3 it has no count yet with lag 2
    assert steps_until_counted_views_sized_ahead(twice, warmup_steps=2, counted_steps=1, lag=0) == 3
    assert steps_until_counted_views_sized_ahead(twice, warmup_steps=2, counted_steps=1, lag=2) == 6
    with pytest.raises(ValueError, match="without a count"):
        steps_until_counted_views_sized_ahead(type("Never", (_CyclicPlan,), {"views_for": lambda self, s, r: [s]})(),
                                              warmup_steps=2, counted_steps=1)


def test_host_waits_warm_up_trains_from_step_0(monkeypatch, tmp_path: Path):
    """The warm-up trains the steps the presized warm-up assumes rendered: 0 .. w - 1, as nerfstudio's loop does
    (step 0's views are otherwise first rendered among the counted steps, a host read counted as a steady one)."""
    trained, counted = [], []
    trainer = type("Trainer", (), {"pipeline": type("P", (), {"datamanager": type("D", (), {"plan": _CyclicPlan()})})})
    monkeypatch.setattr(host_waits.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(host_waits.torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(host_waits, "in_process_trainer", lambda *args, **kwargs: trainer)
    monkeypatch.setattr(host_waits, "run_step", lambda trainer, step: trained.append(step))
    monkeypatch.setattr(host_waits, "count_host_syncs", lambda trainer, steps: counted.extend(steps) or Counter())
    host_waits.HostWaitsCommand(data=tmp_path, warmup_steps=2, steps=3, presized_intersections=True).main()
    assert trained == [0, 1, 2, 3] and counted == [4, 5, 6]
