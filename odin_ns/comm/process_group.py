"""Joining the training process group from torchrun's environment, with timeouts that turn a dead peer into an error.

Every collective of the runtime goes through ``wait_for`` or ``barrier`` here, so a rank that dies or hangs makes the
survivors raise ``PeerFailureError`` naming the collective within the configured timeout instead of blocking forever.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist

TORCHRUN_ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


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
