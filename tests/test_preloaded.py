"""The suite's forked commands (preloaded.py): an exception nothing catches ends one as it ends the command, and
commands it does not serve are left to the caller. test_bad_input.py compares a forked ns-train with a fresh one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from training import BIN, PRELOADED


@pytest.mark.slow
def test_an_uncaught_exception_in_a_forked_command_exits_1_with_its_traceback(tmp_path: Path):
    unreadable = tmp_path / "config.yml"
    unreadable.write_text("!!python/object:not.a.Module {}\n")
    forked = PRELOADED.run([str(BIN / "ns-eval"), "--load-config", str(unreadable)], 300, dict(os.environ))
    assert forked is not None
    assert forked.returncode == 1, forked.stderr[-2000:]
    assert "Traceback (most recent call last)" in forked.stderr


def test_commands_other_than_console_scripts_and_modules_are_left_to_the_caller():
    assert PRELOADED.run([str(BIN / "odin-bench"), "--help"], 60, dict(os.environ)) is None
    assert PRELOADED.run([sys.executable, "-c", "pass"], 60, dict(os.environ)) is None
    assert PRELOADED.run([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "x.py"], 60,
                         dict(os.environ)) is None
