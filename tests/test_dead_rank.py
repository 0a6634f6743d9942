"""A dead rank: the watch that turns a collective past its deadline into PeerFailureError (on the CPU, with stand-in
works), the failure the first 2-GPU run met (a training thread blocked holding the GIL, which stops the watch until
NCCL's watchdog releases it; docs/gpu.md), on 2 GPUs the survivor of a rank killed mid-training under NCCL, with
torchrun and nerfstudio's launcher, and on the CPU under torchrun a survivor its launcher SIGTERMs while its peer hangs.

The gloo path (gloo enforces the timeout itself) is also tested in
``test_runtime_distributed.py::test_dead_peer_makes_the_survivor_fail_with_a_clear_error``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch
import torch.distributed as dist

from odin_ns.comm.context import DistContext
from odin_ns.comm.process_group import (
    NCCL_BACKSTOP_ENVIRONMENT,
    PeerFailureError,
    naming_peer_failures,
    peer_failure_message,
)
from odin_ns.comm.watch import TIMEOUT_RESULT, CollectiveWatch, watchdog_timeout
from training import QUIET_TRAINING, torchrun

TESTS = Path(__file__).resolve().parent


class StandInWork:
    """A collective's work as the watch sees it: complete once ``done`` is set (or an abort releases it)."""

    def __init__(self, done: bool = False, error: Exception | None = None):
        self.done = threading.Event()
        if done:
            self.done.set()
        self.error = error

    def is_completed(self) -> bool:
        if self.error is not None:
            raise self.error
        return self.done.is_set()


def run_training_thread(body, timeout_s: float = 0.5, **watch_options):
    """Run ``body(watch, released)`` in a thread that builds the watch (its training thread); ``released`` is set by
    the watch's abort, as aborting NCCL's communicators releases a host blocked on a hung collective. Returns
    (what the body returned or the exception it raised, seconds it ran, number of aborts)."""
    released = threading.Event()
    aborts = []
    outcome = {}

    def abort():
        aborts.append(time.monotonic())
        released.set()

    def thread():
        watch = CollectiveWatch(3, datetime.timedelta(seconds=timeout_s), enforce=True, abort=abort, grace_s=None,
                                poll_s=0.02, **watch_options)
        watch.step = 7
        started = time.monotonic()
        try:
            outcome["result"] = body(watch, released)
        except BaseException as error:  # noqa: BLE001 - the test looks at it
            outcome["result"] = error
        outcome["seconds"] = time.monotonic() - started

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the training thread never got the error"
    return outcome["result"], outcome["seconds"], len(aborts)


def blocked_until_released(watch: CollectiveWatch, released: threading.Event):
    """A bucket all-reduce whose peer is gone, then the host blocked in a call that only the abort ends (as a CUDA
    synchronisation on a hung NCCL kernel); the error must come at the next bytecode after it returns."""
    watch.track(StandInWork(), "gradient bucket 0 (rows 0-512) of unit 7")
    released.wait()  # one uninterruptible C-level wait
    return "carried on after the abort"


def test_a_collective_past_its_deadline_raises_peer_failure_in_the_training_thread(capfd):
    error, seconds, aborts = run_training_thread(blocked_until_released)
    expected = ("rank 3, step 7: gradient bucket 0 (rows 0-512) of unit 7 did not complete within the 0.5 s "
                "collective timeout: a peer rank died or hung")
    assert isinstance(error, PeerFailureError) and str(error) == expected, error
    assert type(error).__name__ == "PeerFailureError"
    assert 0.5 <= seconds < 2.0 and aborts == 1
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("PeerFailureError")]
    assert lines == [f"PeerFailureError: {expected}"], "one line on stderr, the rank's own"


def test_nothing_is_launched_after_a_failure():
    def body(watch, released):
        try:
            blocked_until_released(watch, released)
        except PeerFailureError:
            pass
        watch.track(StandInWork(done=True), "scope exchange of unit 8")

    error, _, aborts = run_training_thread(body)
    assert isinstance(error, PeerFailureError) and "gradient bucket 0" in str(error) and aborts == 1


def test_collectives_that_complete_in_time_never_fail():
    def body(watch, released):
        for unit in range(20):
            work = StandInWork()
            watch.track(work, f"scope exchange of unit {unit}")
            time.sleep(0.05)
            work.done.set()
        with watch.section("the Odin plan"):
            time.sleep(0.2)
        time.sleep(0.6)  # past every deadline: all completed
        return "trained"

    result, _, aborts = run_training_thread(body)
    assert result == "trained" and aborts == 0


def test_a_blocking_call_past_its_deadline_fails():
    def body(watch, released):
        with watch.section("run directory of rank 0"):
            released.wait()
        return "carried on"

    error, seconds, _ = run_training_thread(body)
    assert isinstance(error, PeerFailureError) and "run directory of rank 0 did not complete" in str(error)
    assert seconds < 2.0


def test_a_backend_error_on_a_collective_fails_at_once_naming_it():
    def body(watch, released):
        watch.track(StandInWork(error=RuntimeError("NCCL error: remote process exited\nframe #0 ...")), "stop request")
        released.wait()

    error, seconds, _ = run_training_thread(body, timeout_s=60.0)
    assert isinstance(error, PeerFailureError) and seconds < 2.0
    assert str(error).endswith("a peer rank died or hung (NCCL error: remote process exited)"), "one line"


def test_a_backend_error_met_by_the_training_thread_is_reported_the_same_way(capfd):
    def body(watch, released):
        with naming_peer_failures("scope exchange of unit 7", watch.timeout, watch):
            raise RuntimeError("NCCL communicator was aborted on rank 3.\nException raised from ...")

    error, _, aborts = run_training_thread(body, timeout_s=60.0)
    expected = ("rank 3, step 7: scope exchange of unit 7 did not complete within the 60 s collective timeout: a peer "
                "rank died or hung (NCCL communicator was aborted on rank 3.)")
    assert isinstance(error, PeerFailureError) and str(error) == expected and aborts == 1
    assert [line for line in capfd.readouterr().err.splitlines() if "PeerFailureError" in line] == [
        f"PeerFailureError: {expected}"], "the line a launcher that swallows the traceback still shows"


class BackstopWork(StandInWork):
    """A NCCL collective whose peer died, as NCCL's own watchdog leaves it at the group's (backstop) timeout: marked
    TIMEOUT and complete (its communicators aborted, its kernel gone) from ``released_at`` on, pending before."""

    def __init__(self, released_at: float):
        super().__init__()
        self.released_at = released_at

    def is_completed(self) -> bool:
        return time.monotonic() >= self.released_at

    def get_future_result(self):
        work = self

        class Result:
            def done(self):
                return work.is_completed()

            def value(self):
                return TIMEOUT_RESULT

        return Result()


def hold_the_gil(seconds: float) -> None:
    """Block in C without releasing the GIL, as gsplat 1.4's ``isect_tiles`` does in its ``.item()`` (a pybind11
    function: the GIL is kept) when its stream waits for a hung collective; ctypes.PyDLL keeps the GIL too."""
    libc = ctypes.PyDLL(ctypes.util.find_library("c"))
    libc.usleep(ctypes.c_uint(int(seconds * 1e6)))


def test_a_training_thread_blocked_holding_the_gil_is_reported_once_the_backend_releases_it(capfd):
    """The failure of 2026-11-30 on 2 x H200 (docs/gpu.md): no Python thread runs while the training thread blocks
    in a C call that holds the GIL, so the watch cannot report at its deadline; NCCL's watchdog (C++) releases the
    call at the backstop, and the watch then reports the collective within its poll, as its own timeout."""

    def body(watch, released):
        watch.track(BackstopWork(released_at=time.monotonic() + 1.2), "gradient bucket 0 (rows 0-512) of unit 40")
        hold_the_gil(1.2)  # past the 0.3 s deadline; what NCCL's watchdog releases at the backstop
        while True:  # Python again: the PeerFailureError comes at a bytecode
            time.sleep(0.01)

    error, seconds, aborts = run_training_thread(body, timeout_s=0.3)
    assert isinstance(error, PeerFailureError), error
    assert str(error) == ("rank 3, step 7: gradient bucket 0 (rows 0-512) of unit 40 did not complete within the 0.3 s "
                          "collective timeout: a peer rank died or hung (NCCL's watchdog timed it out and aborted the "
                          "communicators)")
    assert 1.2 <= seconds < 2.5 and aborts == 1
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("PeerFailureError")]
    assert lines == [f"PeerFailureError: {error}"]


def test_while_the_gil_is_held_the_watch_cannot_report():
    """Why the watch needs NCCL's watchdog behind it: past its deadline, it reports only after the GIL comes back."""
    times = {}

    def abort():
        times["reported"] = time.monotonic()

    def body():
        try:
            watch = CollectiveWatch(0, datetime.timedelta(seconds=0.2), enforce=True, abort=abort, grace_s=None,
                                    poll_s=0.02)
            watch.track(StandInWork(), "scope exchange of unit 40")
            times["released"] = time.monotonic() + 1.0
            hold_the_gil(1.0)
            while "reported" not in times:
                time.sleep(0.01)
        except PeerFailureError:
            pass

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(timeout=30)
    assert times["reported"] >= times["released"], "the watch ran while the GIL was held"


def test_a_collective_the_backend_timed_out_is_reported_before_the_next_launch():
    """The training thread, released before the watch's thread polls, meets the failure at its next launch: the
    error names the collective that timed out, not the one being launched."""

    def body(watch, released):
        watch.track(BackstopWork(released_at=time.monotonic() + 0.05), "stop request")
        time.sleep(0.06)
        watch._stopped.set()  # the watch's thread has not polled yet
        watch.track(StandInWork(), "scope exchange of unit 8")
        return "launched on an aborted group"

    error, _, aborts = run_training_thread(body, timeout_s=0.01)
    assert isinstance(error, PeerFailureError) and str(error).startswith("rank 3, step 7: stop request did not"), error
    assert aborts == 1


def test_a_group_with_a_collective_in_flight_is_aborted_not_destroyed(monkeypatch):
    """NCCL's destroy_process_group waits for every kernel: an error unwinding past a hung collective would hang."""
    calls = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "destroy_process_group", lambda: calls.append("destroy"))
    monkeypatch.setattr("odin_ns.comm.context.abort_group", lambda: calls.append("abort"))
    for work, expected in ((StandInWork(done=True), ["destroy"]), (StandInWork(), ["abort"])):
        calls.clear()
        watch = CollectiveWatch(0, datetime.timedelta(seconds=0.1), enforce=True, grace_s=None, poll_s=0.01)
        watch._works.append((time.monotonic() + 0.1, "gradient bucket 1 (rows 512-1024) of unit 9", work))
        DistContext(0, 2, 0, torch.device("cpu"), "nccl", watch.timeout, watch=watch).destroy()
        assert calls == expected


def test_importing_the_context_sets_up_nccls_watchdog_as_the_watchs_backstop(tmp_path):
    """NCCL reads these when a group is created: importing the context (as nerfstudio's launcher does before it spawns
    the workers, and every torchrun rank before it joins) sets them, keeping what the user set."""
    script = (
        "import json, os, sys\n"
        "os.environ['TORCH_NCCL_DUMP_ON_TIMEOUT'] = '1'\n"
        "import odin_ns.comm.context\n"
        "from odin_ns.comm.process_group import NCCL_BACKSTOP_ENVIRONMENT, nccl_backstop_environment\n"
        "print(json.dumps([{name: os.environ.get(name) for name in NCCL_BACKSTOP_ENVIRONMENT},\n"
        "                  nccl_backstop_environment()]))\n"
    )
    env = {name: value for name, value in os.environ.items() if name not in NCCL_BACKSTOP_ENVIRONMENT}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    seen, overridden = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {**NCCL_BACKSTOP_ENVIRONMENT, "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}
    assert overridden == {"TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}
    assert seen["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "2", "abort the communicators, keep the process"


def test_a_rank_stuck_beyond_the_abort_is_ended_by_the_alarm():
    """The last resort: a host the abort does not release still exits, after printing the line."""
    script = (
        "import datetime, time\n"
        "from odin_ns.comm.watch import CollectiveWatch\n"
        "class Hung:\n"
        "    def is_completed(self): return False\n"
        "watch = CollectiveWatch(0, datetime.timedelta(seconds=0.5), enforce=True, grace_s=1.0)\n"
        "watch.track(Hung(), 'drain barrier')\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGALRM, result.stderr[-2000:]
    assert "PeerFailureError: rank 0: drain barrier did not complete within the 0.5 s" in result.stderr
    assert time.monotonic() - started < 30


def test_peer_failure_messages_are_one_line():
    message = peer_failure_message("stop request", datetime.timedelta(seconds=600), 1, 40,
                                   RuntimeError("Connection closed by peer\nException raised from ..."))
    assert message == ("rank 1, step 40: stop request did not complete within the 600 s collective timeout: "
                       "a peer rank died or hung (Connection closed by peer)")
    assert watchdog_timeout(datetime.timedelta(seconds=8)) == datetime.timedelta(seconds=10)
    assert watchdog_timeout(datetime.timedelta(seconds=600)) == datetime.timedelta(seconds=630)


def test_a_group_joined_from_another_launcher_gets_the_configured_timeout():
    """nerfstudio's launcher creates the group with a 30-minute timeout; the context sets --pipeline.odin.timeout-s."""
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1,
                                timeout=datetime.timedelta(minutes=30))
        try:
            context = DistContext.joined(0, "cpu", 12.0)
            options = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu")).options
            assert getattr(options, "_timeout", getattr(options, "timeout", None)) == datetime.timedelta(seconds=12)
            assert context.timeout == datetime.timedelta(seconds=12) and not context.watch.enforce
            context.at_step(3)
            context.barrier("leave together")
        finally:
            dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------------------- 2 GPUs

TIMEOUT_S = 8
SLACK_S = 12
"""The watch's poll, the abort and the unwinding; both launchers kill the survivors 30 s after a rank dies, so a
survivor that exits within TIMEOUT_S + SLACK_S of the death exited on its own."""
KILL_STEP = 40
LAUNCHERS = {
    "torchrun": lambda: [*torchrun(2), "-m", "dying_rank"],
    "nerfstudio": lambda: [sys.executable, "-m", "dying_rank"],
}


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="a dead rank on NCCL needs 2 CUDA GPUs")
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_a_rank_killed_on_nccl_makes_the_survivor_exit_naming_peer_failure(launcher, tiny_scene, tmp_path):
    stamps = {name: tmp_path / name for name in ("killed_at", "survivor_exited")}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "ODIN_TEST_KILL_STEP": str(KILL_STEP),
        "ODIN_TEST_KILLED_AT": str(stamps["killed_at"]),
        "ODIN_TEST_SURVIVOR_EXITED": str(stamps["survivor_exited"]),
    }
    command = [*LAUNCHERS[launcher](), "odin-splatfacto", "--data", str(tiny_scene), "--output-dir",
               str(tmp_path / "out"), "--max-num-iterations", "400", *QUIET_TRAINING,
               "--pipeline.odin.timeout-s", str(TIMEOUT_S)]
    if launcher == "nerfstudio":
        command += ["--machine.num-devices", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        output, _ = process.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    ended = time.time()
    tail = output[-6000:]
    assert stamps["killed_at"].exists(), f"rank 1 never reached step {KILL_STEP}:\n{tail}"
    killed_at = float(stamps["killed_at"].read_text())
    lines = [line for line in output.splitlines() if line.startswith("PeerFailureError: rank 0")]
    survivor_s = float(stamps["survivor_exited"].read_text()) - killed_at if stamps["survivor_exited"].exists() else None
    print(f"\n[{launcher}] exit status {process.returncode}; rank 0's line: {lines}; rank 0 exited "
          f"{survivor_s if survivor_s is None else round(survivor_s, 1)} s and the launcher {ended - killed_at:.1f} s "
          f"after rank 1 was killed (timeout {TIMEOUT_S} s)")
    assert process.returncode != 0, tail
    assert len(lines) == 1 and f"did not complete within the {TIMEOUT_S} s collective timeout" in lines[0], tail
    assert survivor_s is not None, f"rank 0 did not unwind through Python (killed, or ended by the alarm):\n{tail}"
    assert survivor_s <= TIMEOUT_S + SLACK_S and ended - killed_at <= TIMEOUT_S + SLACK_S + 5, tail


# ----------------------------------------------------------------------------------------------------- CPU, torchrun

CPU_TIMEOUT_S = 10


@pytest.mark.slow
def test_a_survivor_signalled_by_its_launcher_while_its_peer_hangs_exits_naming_peer_failure(tiny_scene, tmp_path):
    """What torchrun and nerfstudio's launcher do when a rank dies: SIGTERM to the others, a stop request for the
    trainer, which then agrees with the other ranks at the next logging step and drains. With the peer hung (SIGSTOP,
    which no launcher notices) in that step's agreement (the stop protocol's own collective; a peer hung in a unit
    is the gloo case of test_runtime_distributed.py), it may not wait past the timeout: the survivor exits naming the collective in one line within the timeout and slack, unwinding through
    Python. gloo on the CPU (gloo enforces the timeout itself); NCCL above."""
    stamps = {name: tmp_path / name for name in ("killed_at", "survivor_exited", "hung_pid")}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "ODIN_TEST_KILL_STEP": str(KILL_STEP),
        "ODIN_TEST_KILLED_AT": str(stamps["killed_at"]),
        "ODIN_TEST_SURVIVOR_EXITED": str(stamps["survivor_exited"]),
        "ODIN_TEST_HUNG_PID": str(stamps["hung_pid"]),
        "ODIN_TEST_HANG_IN": "agreement",
    }
    command = [*LAUNCHERS["torchrun"](), "odin-splatfacto", "--data", str(tiny_scene), "--output-dir",
               str(tmp_path / "out"), "--max-num-iterations", "400", *QUIET_TRAINING,
               "--pipeline.odin.timeout-s", str(CPU_TIMEOUT_S), "--machine.device-type", "cpu"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    hung = None
    try:
        deadline = time.monotonic() + 300
        while not stamps["killed_at"].exists():
            assert process.poll() is None and time.monotonic() < deadline, f"rank 1 never reached step {KILL_STEP}"
            time.sleep(0.05)
        hung = psutil.Process(int(stamps["hung_pid"].read_text()))
        survivor = next(child for child in psutil.Process(process.pid).children(recursive=True)
                        if child.pid != hung.pid and child.environ().get("RANK") == "0")
        survivor.send_signal(signal.SIGTERM)  # as the launcher does
        signalled = time.time()
        deadline = time.monotonic() + CPU_TIMEOUT_S + 60
        while survivor.is_running() and survivor.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if hung is not None and hung.is_running():
            hung.kill()
        try:
            output, _ = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    tail = output[-6000:]
    # gloo: the error's own line, the last of rank 0's traceback (torchrun prefixes it "[rank0]: ")
    lines = [line for line in output.splitlines() if "PeerFailureError: rank 0, step" in line]
    assert len(lines) == 1 and f"did not complete within the {CPU_TIMEOUT_S} s collective timeout" in lines[0], tail
    assert stamps["survivor_exited"].exists(), f"rank 0 did not unwind through Python:\n{tail}"
    survivor_s = float(stamps["survivor_exited"].read_text()) - signalled
    hung_s = float(stamps["survivor_exited"].read_text()) - float(stamps["killed_at"].read_text())
    print(f"\n[torchrun, gloo, hung in the agreement] rank 0's line: {lines}; rank 0 exited {survivor_s:.1f} s after "
          f"its SIGTERM, {hung_s:.1f} s after rank 1 hung (timeout {CPU_TIMEOUT_S} s)")
    assert survivor_s <= CPU_TIMEOUT_S + SLACK_S and process.returncode != 0, tail
    assert "step 40: stop request did not complete" in lines[0], lines
