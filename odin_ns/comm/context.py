"""The distributed context: where this process sits in the job and the one door its collectives go through.

Built once by the trainer (``from_torchrun``, ``joined`` under nerfstudio's launcher, ``single`` for one process) and
passed down to the pipeline, datamanager and runtime, as torchtitan's ``ParallelDims``: nothing outside
``odin_ns.comm`` reads ``torch.distributed``'s globals. Every collective here carries the context's timeout and turns
a dead or hung peer into ``PeerFailureError`` naming the rank, the step and the collective: gloo enforces the timeout
per operation, and on NCCL the context's ``CollectiveWatch`` enforces it on the collectives' completion
(``odin_ns.comm.watch``), backed by NCCL's own watchdog, which importing this module configures
(``nccl_backstop_environment``). A one-rank context needs no process group: its collectives are the identity.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from odin_ns.comm.collectives import (
    Clock,
    Collective,
    LocalResult,
    all_gather_async,
    all_gather_into_tensor,
    all_reduce_statistics,
    in_place_async,
)
from odin_ns.comm.process_group import (
    abort_group,
    barrier,
    naming_peer_failures,
    nccl_backstop_environment,
    read_torchrun_env,
    set_group_timeout,
    wait_for,
)
from odin_ns.comm.watch import CollectiveWatch, watchdog_timeout

nccl_backstop_environment()  # before any NCCL group exists; see NCCL_BACKSTOP_ENVIRONMENT for why here


@dataclass(frozen=True)
class DistContext:
    """Rank, world size, device, backend, timeout and process group of this process's collectives."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    timeout: timedelta
    group: dist.ProcessGroup | None = None
    """The group the collectives run over (None: the default group; unused with one rank)."""
    watch: CollectiveWatch | None = None
    """This rank's step, named in errors, and on NCCL the deadlines of its collectives (None with one rank)."""

    @classmethod
    def single(cls, device: torch.device | str, timeout_s: float = 600.0) -> DistContext:
        """One process training alone: no process group, every collective is the identity."""
        device = torch.device(device)
        return cls(0, 1, 0, device, "none", timedelta(seconds=timeout_s))

    @classmethod
    def from_torchrun(cls, timeout_s: float = 600.0, backend: str | None = None) -> DistContext:
        """Join the default process group from torchrun's environment: NCCL on the GPU ``LOCAL_RANK`` when CUDA is
        available, gloo on the CPU otherwise. ``timeout_s`` bounds every collective (gloo enforces it per
        operation, the context's watch on NCCL, whose own watchdog gets a longer timeout as a backstop)."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        rank, world_size, local_rank = read_torchrun_env()
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            nccl_backstop_environment()
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
        else:
            device = torch.device("cpu")
        timeout = timedelta(seconds=timeout_s)
        dist.init_process_group(
            backend,
            rank=rank,
            world_size=world_size,
            timeout=watchdog_timeout(timeout) if backend == "nccl" else timeout,
            device_id=device if backend == "nccl" else None,
        )
        return cls(rank, world_size, local_rank, device, backend, timeout, watch=_watch(rank, timeout, backend, device))

    @classmethod
    def joined(cls, local_rank: int, device: torch.device | str, timeout_s: float) -> DistContext:
        """The default group another launcher (nerfstudio's ``launch``, with its 30-minute timeout) already
        initialised, its timeout set to ``timeout_s`` as ``from_torchrun`` sets it."""
        if not dist.is_initialized():
            raise RuntimeError("DistContext.joined needs an initialised default process group")
        timeout = timedelta(seconds=timeout_s)
        rank, backend, device = dist.get_rank(), dist.get_backend(), torch.device(device)
        set_group_timeout(watchdog_timeout(timeout) if backend == "nccl" else timeout)
        return cls(rank, dist.get_world_size(), local_rank, device, backend, timeout,
                   watch=_watch(rank, timeout, backend, device))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def solo(self) -> DistContext:
        """A context over this rank alone, for ranks that train apart (collective: every rank must call it)."""
        if self.world_size == 1:
            return self
        singletons = [dist.new_group([rank], timeout=self.timeout) for rank in range(self.world_size)]
        return replace(self, world_size=1, group=singletons[self.rank])

    def at_step(self, step: int) -> None:
        """Name ``step`` in this rank's errors from now on."""
        if self.watch is not None:
            self.watch.step = step

    def destroy(self) -> None:
        """Tear the process group down (a one-rank context has none). NCCL's teardown waits for every collective's
        kernel: after a peer failure (the watch has aborted the communicators) or with a collective still pending
        (an error unwinding mid-exchange), the group is aborted instead and left to the exit."""
        watch = self.watch
        unsettled = watch is not None and watch.enforce and not watch.settled()
        if watch is not None:
            watch.stop()
        if self.world_size == 1 or self.group is not None or not dist.is_initialized():
            return
        if unsettled:
            if watch.failure is None:
                try:
                    abort_group()
                except Exception as error:  # noqa: BLE001 - leaving anyway; the exit takes the group down
                    warnings.warn(f"rank {self.rank}: aborting the process group failed: {error}", stacklevel=2)
            return
        dist.destroy_process_group()

    # ------------------------------------------------------------------------------------------------ collectives

    def barrier(self, what: str) -> None:
        if self.world_size > 1:
            barrier(what, self.timeout, self.group, self.watch, self.device)

    def broadcast_(self, tensors: Sequence[torch.Tensor], what: str, src: int = 0) -> None:
        """Overwrite ``tensors`` in place with rank ``src``'s."""
        if self.world_size == 1:
            return
        for tensor in tensors:
            self._blocking(what, lambda: dist.broadcast(tensor, src=src, group=self.group, async_op=True))

    def broadcast_object(self, value: Any, what: str, src: int = 0) -> Any:
        """Rank ``src``'s ``value`` (a picklable object) on every rank."""
        if self.world_size == 1:
            return value
        holder = [value]
        with self._section(what), naming_peer_failures(what, self.timeout, self.watch):
            dist.broadcast_object_list(holder, src=src, group=self.group)
        return holder[0]

    def all_reduce_mean_(self, tensors: Sequence[torch.Tensor], what: str) -> None:
        """Replace ``tensors`` (one dtype and device) by their mean over ranks: one flat collective."""
        if self.world_size == 1 or not tensors:
            return
        flat = torch.cat([tensor.reshape(-1) for tensor in tensors])
        self._blocking(what, lambda: dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group, async_op=True))
        flat /= self.world_size
        for tensor, values in zip(tensors, flat.split([tensor.numel() for tensor in tensors])):
            tensor.copy_(values.view_as(tensor))

    def reduce_statistics(self, statistics: Mapping[str, torch.Tensor], ops: Mapping[str, str]) -> dict[str, torch.Tensor]:
        """``all_reduce_statistics`` over this context (the identity with one rank)."""
        if self.world_size == 1:
            return dict(statistics)
        return all_reduce_statistics(statistics, ops, self.timeout, self.group, self.watch)

    def all_equal(self, values: torch.Tensor, what: str) -> torch.Tensor:
        """bool [len(values)]: whether each element of ``values`` (1-D) is the same on every rank."""
        if self.world_size == 1:
            return torch.ones(values.shape, dtype=torch.bool, device=values.device)
        both = torch.stack([values, -values])
        self._blocking(what, lambda: dist.all_reduce(both, op=dist.ReduceOp.MAX, group=self.group, async_op=True))
        return both[0] == -both[1]

    def gather(self, values: torch.Tensor, what: str) -> torch.Tensor:
        """[world_size, *values.shape]: every rank's ``values`` (blocking)."""
        if self.world_size == 1:
            return values[None]
        output = values.new_empty((self.world_size, *values.shape))
        self._blocking(what, lambda: all_gather_into_tensor(output.view(-1), values.contiguous().view(-1),
                                                            group=self.group, async_op=True))
        return output

    def all_gather_async(
        self, local: torch.Tensor, what: str, clock: Clock, stream: torch.cuda.Stream | None
    ) -> Collective | LocalResult:
        """Every rank's ``local`` as [world_size, *local.shape], in flight."""
        if self.world_size == 1:
            return LocalResult(local[None], clock)
        return all_gather_async(local, what, self.timeout, clock, stream, self.group, self.watch)

    def all_reduce_sum_async(
        self, buffer: torch.Tensor, what: str, clock: Clock, stream: torch.cuda.Stream | None
    ) -> Collective | LocalResult:
        """``buffer`` summed over ranks in place, in flight."""
        return self._in_place(buffer, what, clock, stream,
                              lambda b: dist.all_reduce(b, op=dist.ReduceOp.SUM, group=self.group, async_op=True))

    def _in_place(
        self, buffer: torch.Tensor, what: str, clock: Clock, stream: torch.cuda.Stream | None, launch
    ) -> Collective | LocalResult:
        if self.world_size == 1:
            return LocalResult(buffer, clock)
        return in_place_async(buffer, launch, what, self.timeout, clock, stream, self.watch)

    def _blocking(self, what: str, launch) -> None:
        if self.watch is not None:
            self.watch.check()
        with naming_peer_failures(what, self.timeout, self.watch):
            work = launch()
        wait_for(work, what, self.timeout, self.watch)

    def _section(self, what: str):
        """A blocking call whose works are not exposed, bounded by the timeout on NCCL."""
        return self.watch.section(what) if self.watch is not None else nullcontext()


def _watch(rank: int, timeout: timedelta, backend: str, device: torch.device) -> CollectiveWatch:
    """The watch of a rank of a multi-rank group: enforcing deadlines on NCCL (aborting the default group on a
    failure), only naming the step on gloo, which enforces its timeout itself."""
    if backend != "nccl":
        return CollectiveWatch(rank, timeout)
    overridden = nccl_backstop_environment()
    if overridden:
        warnings.warn(f"rank {rank}: {overridden} set in the environment: NCCL's watchdog may not release a rank "
                      "blocked on a dead peer's collective as odin_ns.comm.process_group.NCCL_BACKSTOP_ENVIRONMENT "
                      "expects", stacklevel=2)
    on_start = (lambda: torch.cuda.set_device(device)) if device.type == "cuda" else None
    return CollectiveWatch(rank, timeout, enforce=True, abort=abort_group, on_start=on_start)


@contextmanager
def torchrun_context(timeout_s: float = 600.0, backend: str | None = None) -> Iterator[DistContext]:
    """``DistContext.from_torchrun`` for the duration of a block, its group destroyed on exit even after a peer
    failure: destroying it on the error path lets the survivor of a dead peer exit with its error and a non-zero
    status rather than aborting in gloo's teardown."""
    context = DistContext.from_torchrun(timeout_s, backend)
    try:
        yield context
    finally:
        context.destroy()
