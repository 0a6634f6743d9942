"""Joining the training process group from torchrun's environment, with timeouts that turn a dead peer into an error.

Every collective of the runtime goes through ``wait_for`` or ``barrier`` here, so a rank that dies or hangs makes the
survivors raise ``PeerFailureError`` naming the collective within the configured timeout instead of blocking forever.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import NamedTuple

import torch
import torch.distributed as dist

TORCHRUN_ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class PeerFailureError(RuntimeError):
    """A collective failed or timed out: a peer rank died, hung, or issued different collectives."""


class JoinedGroup(NamedTuple):
    """What joining the default group settled (``odin_ns.comm.context.DistContext`` is built from it)."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    timeout: timedelta


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


def init_from_env(timeout_s: float = 600.0, backend: str | None = None) -> JoinedGroup:
    """Join the default process group: NCCL on the GPU ``LOCAL_RANK`` when CUDA is available, gloo on the CPU otherwise.

    ``timeout_s`` bounds every collective (gloo enforces it per operation, NCCL through its watchdog).
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    rank, world_size, local_rank = read_torchrun_env()
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    timeout = timedelta(seconds=timeout_s)
    dist.init_process_group(
        backend,
        rank=rank,
        world_size=world_size,
        timeout=timeout,
        device_id=device if backend == "nccl" else None,
    )
    return JoinedGroup(rank, world_size, local_rank, device, backend, timeout)


@contextmanager
def naming_peer_failures(what: str, timeout: timedelta) -> Iterator[None]:
    """Re-raise a backend error inside the block as PeerFailureError naming the collective ``what``.

    gloo reports a dead peer as a plain RuntimeError ("Connection reset by peer", "Operation timed out") at whichever
    call touches the connection next; naming the collective and the timeout makes the survivor's error actionable.
    """
    try:
        yield
    except RuntimeError as error:
        rank = dist.get_rank() if dist.is_initialized() else "?"
        raise PeerFailureError(
            f"rank {rank}: {what} did not complete within the {timeout.total_seconds():g} s collective timeout: "
            f"a peer rank died or hung ({error})"
        ) from error


def wait_for(work: dist.Work, what: str, timeout: timedelta) -> None:
    """Block the host until ``work`` completes; PeerFailureError naming ``what`` if a peer dies or time runs out."""
    with naming_peer_failures(what, timeout):
        work.wait(timeout=timeout)


def barrier(what: str, timeout: timedelta, group: dist.ProcessGroup | None = None) -> None:
    """All ranks meet here; gloo's monitored barrier names the ranks that never arrive."""
    with naming_peer_failures(what, timeout):
        if dist.get_backend(group) == "gloo":
            dist.monitored_barrier(group=group, timeout=timeout, wait_all_ranks=True)
        else:
            dist.barrier(group=group)
