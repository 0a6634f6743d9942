"""Joining the training process group from torchrun's environment, with timeouts that turn a dead peer into an error.

Every collective of the runtime goes through ``wait_for`` or ``barrier`` here (and, on NCCL, a
``odin_ns.comm.watch.CollectiveWatch`` backed by NCCL's own watchdog, ``NCCL_BACKSTOP_ENVIRONMENT``), so a rank that
dies or hangs makes the survivors raise ``PeerFailureError`` naming the collective within the configured timeout
instead of blocking forever.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from odin_ns.comm.watch import CollectiveWatch

TORCHRUN_ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")

NCCL_BACKSTOP_ENVIRONMENT = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
    "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "100",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "0",
    "TORCH_FR_BUFFER_SIZE": "0",
}
"""How NCCL's own watchdog thread must treat a collective past the group's timeout for it to release a rank whose
training thread is blocked in a CUDA call that holds the GIL (gsplat 1.4's ``isect_tiles`` reads its intersection
count with ``.item()`` inside C++ without releasing it), where no Python thread runs, the collective watch included:

- ``ASYNC_ERROR_HANDLING=2`` (CleanUpOnly): abort the communicators, so the hung kernels exit and the blocked call
  returns, and leave the process alive (torch's default, 3, takes it down with no error a user can read);
- ``WAIT_TIMEOUT_DUMP_MILSEC=100``: torch's watchdog sleeps four times this (a minute by default) before aborting, so
  that other ranks can dump their flight recorders;
- ``DUMP_ON_TIMEOUT=0`` and ``FR_BUFFER_SIZE=0``: no flight recorder. With it, the watchdog symbolises the failed
  collective's Python stack on a helper thread, which needs the GIL, and then waits for that thread for good.

Read when a ProcessGroupNCCL is created, so ``nccl_backstop_environment`` must run before: the context module calls it
on import, which under nerfstudio's launcher happens in the parent (it reads the method's configuration to parse the
command line) before it spawns the workers, whose environment it becomes, and under torchrun before the trainer joins
the group. A value the user set is kept."""


class PeerFailureError(RuntimeError):
    """A collective failed or timed out: a peer rank died, hung, or issued different collectives."""


def read_torchrun_env(env: Mapping[str, str] = os.environ) -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's variables; ValueError naming any that is missing or invalid."""
    missing = [name for name in TORCHRUN_ENV_VARS if name not in env]
    if missing:
        raise ValueError(f"missing torchrun environment variable(s) {', '.join(missing)}: launch with torchrun")
    try:
        rank, world_size, local_rank = (int(env[name]) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    except ValueError as error:
        raise ValueError(f"RANK, WORLD_SIZE and LOCAL_RANK must be integers: {error}") from error
    if not 0 <= rank < world_size:
        raise ValueError(f"RANK={rank} is not within WORLD_SIZE={world_size}")
    return rank, world_size, local_rank


def nccl_backstop_environment(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set ``NCCL_BACKSTOP_ENVIRONMENT``'s variables the user left unset; returns those set otherwise
    (``{name: value}``), with which NCCL's watchdog may not release a rank as the watch expects."""
    for name, value in NCCL_BACKSTOP_ENVIRONMENT.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name, value in NCCL_BACKSTOP_ENVIRONMENT.items() if environ[name] != value}


def peer_failure_message(
    what: str, timeout: timedelta, rank: int | str, step: int | None = None, cause: BaseException | str | None = None
) -> str:
    """One line: which rank, at which step, waited for which collective, how long, and the backend's first line."""
    where = f"rank {rank}" if step is None else f"rank {rank}, step {step}"
    message = (f"{where}: {what} did not complete within the {timeout.total_seconds():g} s collective timeout: "
               "a peer rank died or hung")
    lines = str(cause).strip().splitlines() if cause is not None else []
    return f"{message} ({lines[0]})" if lines else message


@contextmanager
def naming_peer_failures(what: str, timeout: timedelta, watch: CollectiveWatch | None = None) -> Iterator[None]:
    """Re-raise a backend error inside the block as PeerFailureError naming the collective ``what``.

    gloo reports a dead peer as a plain RuntimeError ("Connection reset by peer", "Operation timed out") at whichever
    call touches the connection next; naming the collective and the timeout makes the survivor's error actionable.
    """
    try:
        yield
    except PeerFailureError:
        raise
    except RuntimeError as error:
        if watch is not None:
            message = watch.report(what, error)
        else:
            message = peer_failure_message(what, timeout, dist.get_rank() if dist.is_initialized() else "?", None, error)
        raise PeerFailureError(message) from error


def wait_for(work: dist.Work, what: str, timeout: timedelta, watch: CollectiveWatch | None = None) -> None:
    """Make the current stream wait for ``work``; PeerFailureError naming ``what`` if a peer dies or time runs out.

    gloo enforces ``timeout`` in the wait itself, so the host blocks until the work completes. On NCCL (a watch that
    enforces the deadline) the host goes on: given a timeout, NCCL's wait blocks the host, polling the work every
    millisecond, and every collective waited for that way would tie this host to the slowest peer (the next host
    read, if any, waits for the stream anyway). The watch tracks the deadline from its own thread instead, backed by
    NCCL's watchdog (``odin_ns.comm.watch``); a barrier's work still blocks the host, as barriers must.
    """
    with naming_peer_failures(what, timeout, watch):
        if watch is not None and watch.enforce:
            watch.track(work, what)
            work.wait()
        else:
            work.wait(timeout=timeout)


def barrier(
    what: str,
    timeout: timedelta,
    group: dist.ProcessGroup | None = None,
    watch: CollectiveWatch | None = None,
    device: torch.device | None = None,
) -> None:
    """All ranks meet here; gloo's monitored barrier names the ranks that never arrive. On NCCL the barrier's work is
    waited for like any collective's (``dist.barrier``'s own wait blocks on a CUDA stream, beyond any timeout)."""
    if dist.get_backend(group) == "gloo":
        with naming_peer_failures(what, timeout, watch):
            dist.monitored_barrier(group=group, timeout=timeout, wait_all_ranks=True)
        return
    if watch is not None:
        watch.check()
    device_ids = [device.index] if device is not None and device.type == "cuda" and device.index is not None else None
    with naming_peer_failures(what, timeout, watch):
        work = dist.barrier(group=group, async_op=True, device_ids=device_ids)
    wait_for(work, what, timeout, watch)


def set_group_timeout(timeout: timedelta, group: dist.ProcessGroup | None = None) -> None:
    """Bound the future collectives of ``group`` (default: the default group) by ``timeout``, e.g. of a group
    another launcher created (nerfstudio's uses 30 minutes)."""
    set_timeout = getattr(dist, "set_timeout", None) or dist.distributed_c10d._set_pg_timeout  # torch < 2.12
    set_timeout(timeout, group)


def abort_group(group: dist.ProcessGroup | None = None) -> None:
    """Abort the communicators of ``group`` (default: the default group): NCCL kernels waiting for a dead peer exit,
    so host calls blocked on them return. The group is unusable afterwards."""
    process_group = group if group is not None else dist.distributed_c10d._get_default_group()
    try:
        process_group.abort()
    except AttributeError:  # torch without ProcessGroup.abort: the backend's
        process_group._get_backend(torch.device("cuda")).abort()
