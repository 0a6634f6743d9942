"""Which views host-waits counted before their intersection count had reached the host (CPU, the plan alone).

The session-14 GPU call 2 counted 0.1 host synchronisations per step at four views with presized intersections. A
view is sized exactly (gsplat's host read) until a count of an earlier render is on the host, ``COUNT_LAG`` renders
after it. This lists, for host-waits' counted window, every view that has no count yet when the warm-up trains from
step 1 (host-waits before the fix) and when it trains from step 0 (after it, and nerfstudio's loop).

Usage: ``python docs/results/h200_2026-12-02_session14/cpu/first_renders.py data/cup77 4 12``
"""

import sys
import tempfile
from pathlib import Path

from odin_ns.benchmarks.host_waits import in_process_trainer, steps_until_counted_views_sized_ahead
from odin_ns.rendering.presized import COUNT_LAG


def views_without_count(plan, warmup: int, counted: int, first_trained: int) -> list:
    """(step, view) of the counted steps whose view has no render at a trained step <= step - 1 - COUNT_LAG."""
    return [(step, view) for step in range(warmup, warmup + counted) for view in plan.views_for(step, 0)
            if not any(view in plan.views_for(s, 0) for s in range(first_trained, step - COUNT_LAG))]


def main() -> None:
    data, views, counted = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with tempfile.TemporaryDirectory() as out:
        plan = in_process_trainer(data, Path(out), "cpu", views).pipeline.datamanager.plan
    warmup = steps_until_counted_views_sized_ahead(plan, 30, counted)
    print(f"{plan.units_per_epoch} units per epoch; counted steps {warmup}..{warmup + counted - 1}")
    for first_trained in (1, 0):
        print(f"warm-up from step {first_trained}: views without a count: "
              f"{views_without_count(plan, warmup, counted, first_trained) or 'none'}")


if __name__ == "__main__":
    main()
