"""ns-train in which rank 1 dies by SIGKILL at the start of step $ODIN_TEST_KILL_STEP, for the dead-rank tests.

Run as ``python -m dying_rank odin-splatfacto ... --machine.num-devices 2`` (nerfstudio's launcher: its spawned
workers import this module again, so they are patched too) or ``torchrun ... -m dying_rank odin-splatfacto ...``,
with this folder on PYTHONPATH. Rank 1 writes the time of its death to $ODIN_TEST_KILLED_AT first; rank 0 writes the
time it exits to $ODIN_TEST_SURVIVOR_EXITED from an atexit handler, which runs only when the process unwinds
through Python (not when a signal or the watch's alarm ends it). With $ODIN_TEST_HUNG_PID set, rank 1 hangs instead
(SIGSTOP; no launcher notices) after writing its pid there, for the test to signal the survivor and end rank 1: at
the start of the step, or with $ODIN_TEST_HANG_IN=agreement after the step's unit, where the ranks agree whether one
was asked to stop (so the survivor's first collective without its peer is that agreement).
"""

from __future__ import annotations

import atexit
import os
import signal
import time
from pathlib import Path

from odin_ns.trainer import OdinTrainer

_train_unit = OdinTrainer._train_unit
_agree_to_stop = OdinTrainer._agree_to_stop


def _stamp(variable: str) -> None:
    Path(os.environ[variable]).write_text(repr(time.time()))


def _die_or_hang() -> None:
    if "ODIN_TEST_HUNG_PID" in os.environ:
        Path(os.environ["ODIN_TEST_HUNG_PID"]).write_text(str(os.getpid()))
    _stamp("ODIN_TEST_KILLED_AT")
    os.kill(os.getpid(), signal.SIGSTOP if "ODIN_TEST_HUNG_PID" in os.environ else signal.SIGKILL)


def _train_unit_or_die(self: OdinTrainer, step: int):
    if step == int(os.environ["ODIN_TEST_KILL_STEP"]):
        if self.context.rank == 1 and os.environ.get("ODIN_TEST_HANG_IN") != "agreement":
            _die_or_hang()
        elif self.context.rank == 0:
            atexit.register(_stamp, "ODIN_TEST_SURVIVOR_EXITED")
    return _train_unit(self, step)


def _agree_or_hang(self: OdinTrainer) -> None:
    if (os.environ.get("ODIN_TEST_HANG_IN") == "agreement" and self.context.rank == 1
            and self._completed_step == int(os.environ["ODIN_TEST_KILL_STEP"])):
        _die_or_hang()
    _agree_to_stop(self)


OdinTrainer._train_unit = _train_unit_or_die
OdinTrainer._agree_to_stop = _agree_or_hang

if __name__ == "__main__":
    from nerfstudio.scripts.train import entrypoint

    entrypoint()
