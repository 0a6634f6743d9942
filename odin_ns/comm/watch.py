"""Deadlines of a rank's collectives: a dead peer on NCCL becomes PeerFailureError on the survivors, in time.

gloo enforces the timeout per operation and its waits raise on the training thread, so ``naming_peer_failures``
suffices there. NCCL does not: its collectives run on a GPU stream, the host does not wait for them (the runtime's
exchange is asynchronous by design), and a collective whose peer died spins on the GPU forever. The training thread
then blocks inside whichever CUDA call next needs the result (an ``.item()``, a stream synchronisation), where no
Python code of that thread runs.

``CollectiveWatch`` enforces the deadline itself, from a daemon thread: each collective launched through the
context is tracked until its work completes; when one is still pending ``timeout`` after its launch, the watch

1. prints ``PeerFailureError: rank R, step S: <collective> did not complete within the T s collective timeout ...``
   on stderr (one line, the survivor's own: nerfstudio's launcher reports only the first process that failed, here
   the dead one),
2. raises ``PeerFailureError`` with that message asynchronously in the training thread,
3. aborts the communicators, so the hung kernels exit, the blocked CUDA call returns, and the training thread raises
   at its next bytecode, unwinding through ``finally`` blocks as any error does,
4. arms ``alarm(grace_s)``: if the process is still alive then (stuck where no abort reaches), SIGALRM ends it.

The watch is Python, so it runs only while no thread holds the GIL for good. A CUDA call made from C++ without
releasing the GIL does (gsplat 1.4's ``isect_tiles``, called on every render, reads its intersection count with
``.item()`` inside its pybind11 function); when it waits for a hung collective, every Python thread of the process
stops, the watch and signal handlers included (2 x H200, 2026-11-30: no line, no alarm, SIGKILL by the launcher 30 s
later). So the NCCL group gets a timeout of its own, ``watchdog_timeout``: just past the watch's, so the watch reports
first whenever it can run; and NCCL's watchdog, a C++ thread that needs no GIL, is told to abort the communicators
at it and leave the process alive (``odin_ns.comm.process_group.NCCL_BACKSTOP_ENVIRONMENT``). That releases the
blocked call; the training thread runs Python again, and the watch (or the training thread's next ``check``, before
any launch) reports the timed-out collective as above.

A context that enforces nothing (gloo) keeps a watch too, for the step it names in errors.
"""

from __future__ import annotations

import ctypes
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from odin_ns.comm.process_group import PeerFailureError, peer_failure_message

GRACE_S = 15.0
"""After a peer failure, how long the process may take to unwind and exit before SIGALRM ends it. nerfstudio's
launcher and torchrun kill the survivors 30 s after a rank dies; this ends a stuck survivor first."""

BACKSTOP_MARGIN = timedelta(seconds=2)
"""How long after the watch's deadline NCCL's watchdog aborts (at least; ``timeout / 20`` for long timeouts): more
than the watch's poll, so a watch that can run reports first."""


def watchdog_timeout(timeout: timedelta) -> timedelta:
    """The timeout given to the NCCL group itself, at which NCCL's watchdog (a C++ thread, running when no Python
    thread can) aborts the communicators of a collective the watch could not report: just past the watch's."""
    return timeout + max(BACKSTOP_MARGIN, timeout / 20)


def peer_failure_type(message: str) -> type[PeerFailureError]:
    """A PeerFailureError class whose instances default to ``message``: an asynchronous exception is raised as a
    class, instantiated without arguments."""

    def __init__(self, *args: Any) -> None:
        PeerFailureError.__init__(self, *(args or (message,)))

    return type("PeerFailureError", (PeerFailureError,),
                {"__init__": __init__, "__module__": PeerFailureError.__module__, "__qualname__": "PeerFailureError"})


def raise_in_thread(thread_id: int, error_type: type[BaseException]) -> bool:
    """Raise ``error_type`` in thread ``thread_id`` at its next bytecode (CPython's PyThreadState_SetAsyncExc)."""
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(error_type)) == 1


def _work_results() -> tuple[int | None, int | None]:
    """The values (TIMEOUT, COMM_ERROR) of a work's result future (``WorkResult``) that mean it failed."""
    results = getattr(dist.distributed_c10d, "WorkResult", None) or getattr(torch._C._distributed_c10d, "WorkResult",
                                                                              None)
    return (int(results.TIMEOUT), int(results.COMM_ERROR)) if results is not None else (None, None)


TIMEOUT_RESULT, COMM_ERROR_RESULT = _work_results()
ERROR_RESULTS = frozenset(result for result in (TIMEOUT_RESULT, COMM_ERROR_RESULT) if result is not None)

BACKEND_TIMED_OUT = "NCCL's watchdog timed it out and aborted the communicators"
BACKEND_ERROR = "the backend reported a communication error on it"


def backend_failure(work: Any) -> str | None:
    """Why the backend failed a completed ``work`` (NCCL's ``is_completed`` is true then, while its kernel may
    still spin): ``BACKEND_TIMED_OUT`` (its own watchdog's timeout, the watch's backstop), ``BACKEND_ERROR``, or None
    where it did not fail or the backend does not say."""
    try:
        result = work.get_future_result()
        if not result.done():
            return None
        value = result.value()
    except (AttributeError, RuntimeError):  # gloo ("not implemented"), stand-ins
        return None
    if value == TIMEOUT_RESULT:
        return BACKEND_TIMED_OUT
    return BACKEND_ERROR if value in ERROR_RESULTS else None


def completed_with_error(work: Any) -> bool:
    """Whether a completed ``work`` completed because its backend reported an error or a timeout."""
    return backend_failure(work) is not None


class CollectiveWatch:
    """This rank's place in the run (``step``, named in errors) and, when ``enforce``, its collectives' deadlines.

    ``abort`` (called once, from the watch's thread, on a failure) must make the training thread's blocked CUDA calls
    return: for NCCL, aborting the group's communicators. ``grace_s=None`` leaves the process alive after a failure.
    """

    def __init__(
        self,
        rank: int,
        timeout: timedelta,
        enforce: bool = False,
        abort: Callable[[], None] | None = None,
        grace_s: float | None = GRACE_S,
        poll_s: float | None = None,
        on_start: Callable[[], None] | None = None,
    ):
        self.rank = rank
        self.timeout = timeout
        self.enforce = enforce
        self.step: int | None = None
        self.failure: str | None = None
        """The message of the failure the watch reported (None: none)."""
        self._abort = abort
        self._grace_s = grace_s
        self._poll_s = poll_s if poll_s is not None else min(0.25, timeout.total_seconds() / 40)
        self._on_start = on_start
        self._target = threading.get_ident()
        """The training thread: the one that built the watch (and the context holding it)."""
        self._lock = threading.Lock()
        self._works: deque[tuple[float, str, Any]] = deque()
        """(deadline, what, work) in launch order: one group's works complete in that order."""
        self._sections: dict[int, tuple[float, str]] = {}
        self._next_section = 0
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------------- training thread

    def check(self) -> None:
        """Raise the reported failure, if any: nothing is launched on a group the watch has aborted. Also looks for
        one itself: a tracked collective past its deadline or failed by the backend is reported here, in the
        training thread, when the watch's thread has not yet (a training thread that was blocked holding the GIL
        until NCCL's watchdog released it gets here first)."""
        if self.failure is None and self.enforce and self._thread is not None:
            expired = self._expired()
            if expired is not None:
                self._fail(*expired, in_training_thread=True)
        if self.failure is not None:
            raise PeerFailureError(self.failure)

    def track(self, work: Any, what: str) -> None:
        """Watch ``work`` (``is_completed()``) until it completes; a failure if it has not ``timeout`` from now."""
        if not self.enforce:
            return
        self.check()
        with self._lock:
            self._works.append((time.monotonic() + self.timeout.total_seconds(), what, work))
        self._start()

    @contextmanager
    def section(self, what: str) -> Iterator[None]:
        """A blocking call (one whose works are not exposed) that must return within the timeout."""
        if not self.enforce:
            yield
            return
        self.check()
        with self._lock:
            key = self._next_section
            self._next_section += 1
            self._sections[key] = (time.monotonic() + self.timeout.total_seconds(), what)
        self._start()
        try:
            yield
        finally:
            with self._lock:
                self._sections.pop(key, None)

    def message(self, what: str, cause: BaseException | str | None = None) -> str:
        return peer_failure_message(what, self.timeout, self.rank, self.step, cause)

    def stop(self) -> None:
        """Stop watching (the group is being torn down)."""
        self._stopped.set()

    def settled(self) -> bool:
        """Whether every collective tracked completed, none failed and none was reported, waiting for those still
        in flight up to their deadlines: only then may the group be destroyed (NCCL's ``destroy_process_group`` waits
        for every kernel, a hung one forever)."""
        while self.failure is None:
            with self._lock:
                works = list(self._works)
            now = time.monotonic()
            try:
                pending = [deadline for deadline, _, work in works if not work.is_completed()]
                if any(backend_failure(work) is not None for _, _, work in works):
                    return False
            except Exception:  # noqa: BLE001 - a backend error: not settled
                return False
            if not pending:
                return True
            if now >= min(pending):
                return False
            time.sleep(self._poll_s)
        return False

    # ---------------------------------------------------------------------------------------------- watch thread

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="odin-collective-watch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            if self._on_start is not None:
                self._on_start()
            while not self._stopped.wait(self._poll_s):
                expired = self._expired()
                if expired is not None:
                    self._fail(*expired)
                    return
        except Exception as error:  # noqa: BLE001 - never leave works piling up unwatched
            print(f"rank {self.rank}: the collective watch stopped: {error!r}", file=sys.stderr, flush=True)
            self.enforce = False
            with self._lock:
                self._works.clear()
                self._sections.clear()

    def _expired(self) -> tuple[str, BaseException | str | None] | None:
        """(what, cause) of the oldest collective past its deadline or failed; None while all are in time. Called
        from the watch's thread and from the training thread (``check``)."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._works:
                    break
                head = self._works[0]
            deadline, what, work = head
            try:
                completed = work.is_completed()
            except Exception as error:  # noqa: BLE001 - a backend error on the collective is a failure of it
                return what, error
            if not completed:
                if now >= deadline:
                    return what, None
                break
            failure = backend_failure(work)
            if failure is not None:
                return what, failure
            with self._lock:
                if self._works and self._works[0] is head:  # the other thread may have removed it already
                    self._works.popleft()
        with self._lock:
            late = [(deadline, what) for deadline, what in self._sections.values() if now >= deadline]
        return (min(late)[1], None) if late else None

    def report(self, what: str, cause: BaseException | str | None = None) -> str:
        """A failure the training thread met itself (the backend raised): reported as the watch reports one, except
        that the caller raises it. Returns the message to raise (the first failure's, if one was reported)."""
        if self.enforce:
            self._fail(what, cause, in_training_thread=True)
        return self.failure or self.message(what, cause)

    def _fail(self, what: str, cause: BaseException | str | None, in_training_thread: bool = False) -> None:
        with self._lock:
            if self.failure is not None:
                return
            message = self.failure = self.message(what, cause)
        self._stopped.set()
        print(f"PeerFailureError: {message}", file=sys.stderr, flush=True)
        if not in_training_thread:
            raise_in_thread(self._target, peer_failure_type(message))
        if self._grace_s is not None:
            signal.alarm(max(1, round(self._grace_s)))
        if self._abort is not None:
            try:
                self._abort()
            except Exception as error:  # noqa: BLE001 - the alarm still ends the process
                print(f"rank {self.rank}: aborting the process group failed: {error}", file=sys.stderr, flush=True)
