"""A torch.profiler window over a few training steps, one Chrome trace per rank (``--profile-steps``).

Why: the overlap of unit t's gradient exchange with unit t+1's rendering is a claim about GPU streams, which only a
kernel timeline shows. The trainer builds a :class:`ProfileWindow` only when profiling is asked for, so training
without it never imports the profiler nor pays for it. Inside the window each step runs under
``record_function("odin_unit_{step}")`` (the step boundaries ``odin-bench timeline`` reads); at its end the trace
goes to ``profile_rank{r}.json.gz`` in the run directory. No stacks, shapes or memory: the file stays small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, TypeVar

import torch
from nerfstudio.utils.rich_utils import CONSOLE

T = TypeVar("T")
STEP_PREFIX = "odin_unit_"
"""Name prefix of the per-step ``record_function`` ranges (followed by the step number)."""


def trace_path(directory: Path, rank: int) -> Path:
    """Where rank ``rank`` writes its trace."""
    return Path(directory) / f"profile_rank{rank}.json.gz"


class ProfileWindow:
    """Profiles steps ``start`` .. ``start + steps - 1`` (the first of them seen, when resuming mid-window)."""

    def __init__(self, start: int, steps: int, directory: Path, rank: int) -> None:
        if steps <= 0:
            raise ValueError(f"a profile window needs at least one step, got {steps}")
        self.start, self.stop, self.directory, self.rank = start, start + steps, Path(directory), rank
        self._profiler: Optional[torch.profiler.profile] = None
        self.written: Optional[Path] = None

    def run(self, step: int, train_step: Callable[[], T]) -> T:
        """``train_step()``, profiled and marked as step ``step`` when the step lies in the window."""
        if not self.start <= step < self.stop or self.written is not None:
            return train_step()
        if self._profiler is None:
            self._begin()
        with torch.profiler.record_function(f"{STEP_PREFIX}{step}"):
            result = train_step()
        if step == self.stop - 1:
            self.close()
        return result

    def activities(self) -> List[torch.profiler.ProfilerActivity]:
        """What the window records: the host's torch operations (step marks, host time per step, host waits), and
        the GPU's kernels where there is a GPU."""
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        return activities

    def _begin(self) -> None:
        self._profiler = torch.profiler.profile(
            activities=self.activities(), record_shapes=False, with_stack=False, profile_memory=False, with_flops=False
        )
        self._profiler.start()

    def close(self) -> Optional[Path]:
        """End the window (if it began) and write this rank's trace; training ending inside the window calls this."""
        if self._profiler is None or self.written is not None:
            return self.written
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # let the window's last kernels finish so their records are collected
        self._profiler.stop()
        self.directory.mkdir(parents=True, exist_ok=True)
        path = trace_path(self.directory, self.rank)
        self._profiler.export_chrome_trace(str(path))
        self._profiler = None
        self.written = path
        CONSOLE.log(f"profile of steps {self.start}-{self.stop - 1} written to {path}")
        return path
