"""ns-train in which rank 1 dies by SIGKILL at the start of step $ODIN_TEST_KILL_STEP, for the dead-rank tests.

Run as ``python -m dying_rank odin-splatfacto ... --machine.num-devices 2`` (nerfstudio's launcher: its spawned
workers import this module again, so they are patched too) or ``torchrun ... -m dying_rank odin-splatfacto ...``,
with this folder on PYTHONPATH. Rank 1 writes the time of its death to $ODIN_TEST_KILLED_AT first; rank 0 writes the
time it exits to $ODIN_TEST_SURVIVOR_EXITED from an atexit handler, which runs only when the process unwinds
through Python (not when a signal or the watch's alarm ends it).
"""

from __future__ import annotations

import atexit
import os
import signal
import time
from pathlib import Path

from odin_ns.trainer import OdinTrainer

_train_unit = OdinTrainer._train_unit


def _stamp(variable: str) -> None:
    Path(os.environ[variable]).write_text(repr(time.time()))


def _train_unit_or_die(self: OdinTrainer, step: int):
    if step == int(os.environ["ODIN_TEST_KILL_STEP"]):
        if self.context.rank == 1:
            _stamp("ODIN_TEST_KILLED_AT")
            os.kill(os.getpid(), signal.SIGKILL)
        elif self.context.rank == 0:
            atexit.register(_stamp, "ODIN_TEST_SURVIVOR_EXITED")
    return _train_unit(self, step)


OdinTrainer._train_unit = _train_unit_or_die

if __name__ == "__main__":
    from nerfstudio.scripts.train import entrypoint

    entrypoint()
