"""Deadlines of a rank's collectives: a dead peer on NCCL becomes PeerFailureError on the survivors, in time.

gloo enforces the timeout per operation and its waits raise on the training thread, so ``naming_peer_failures``
suffices there. NCCL does not: its collectives run on a GPU stream, the host does not wait for them (the runtime's
exchange is asynchronous by design), and a collective whose peer died spins on the GPU forever. The training thread
then blocks inside whichever CUDA call next needs the result (an ``.item()``, a stream synchronisation), where no
Python code runs. NCCL's own watchdog thread notices the timeout, but then sleeps a minute for its debug dump and
takes the process down (``TORCH_NCCL_ASYNC_ERROR_HANDLING``'s default), leaving no error a user can read.

``CollectiveWatch`` enforces the deadline itself, from a daemon thread: each collective launched through the
context is tracked until its work completes; when one is still pending ``timeout`` after its launch, the watch

1. prints ``PeerFailureError: rank R, step S: <collective> did not complete within the T s collective timeout ...``
   on stderr (one line, the survivor's own: nerfstudio's launcher reports only the first process that failed, here
   the dead one),
2. raises ``PeerFailureError`` with that message asynchronously in the training thread,
3. aborts the communicators, so the hung kernels exit, the blocked CUDA call returns, and the training thread raises
   at its next bytecode, unwinding through ``finally`` blocks as any error does,
4. arms ``alarm(grace_s)``: if the process is still alive then (stuck where no abort reaches), SIGALRM ends it.

The group itself is created with a longer timeout (``watchdog_timeout``), so NCCL's watchdog only backs the watch up.
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


def watchdog_timeout(timeout: timedelta) -> timedelta:
    """The timeout given to the NCCL group itself: past the watch's deadline, so NCCL's watchdog (a minute's sleep
    for its debug dump, then the process taken down) never reports before the watch does."""
    return timeout + max(timedelta(seconds=30), timeout / 4)


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


def _error_results() -> frozenset[int]:
    """The values of a work's result future (``WorkResult``) that mean it failed."""
    results = getattr(dist.distributed_c10d, "WorkResult", None) or getattr(torch._C._distributed_c10d, "WorkResult",
                                                                              None)
    return frozenset({int(results.COMM_ERROR), int(results.TIMEOUT)}) if results is not None else frozenset()


ERROR_RESULTS = _error_results()


def completed_with_error(work: Any) -> bool:
    """Whether a completed ``work`` completed because its backend reported an error (NCCL's ``is_completed`` is
    also true then, while its kernel may still spin); False where the backend does not say."""
    try:
        result = work.get_future_result()
        return result.done() and result.value() in ERROR_RESULTS
    except (AttributeError, RuntimeError):  # gloo ("not implemented"), stand-ins
        return False


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
        """Raise the reported failure, if any: nothing is launched on a group the watch has aborted."""
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

    @property
    def backstop(self) -> timedelta:
        """The bound of a host wait the watch also covers (the group's watchdog timeout)."""
        return watchdog_timeout(self.timeout)

    def message(self, what: str, cause: BaseException | str | None = None) -> str:
        return peer_failure_message(what, self.timeout, self.rank, self.step, cause)

    def stop(self) -> None:
        """Stop watching (the group is being torn down)."""
        self._stopped.set()

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
        """(what, cause) of the oldest collective past its deadline or failed; None while all are in time."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._works:
                    break
                deadline, what, work = self._works[0]
            try:
                completed = work.is_completed()
            except Exception as error:  # noqa: BLE001 - a backend error on the collective is a failure of it
                return what, error
            if not completed:
                if now >= deadline:
                    return what, None
                break
            if completed_with_error(work):
                return what, "the backend reported a communication error on it"
            with self._lock:
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
