"""Captured units: a unit's compute replayed from a CUDA graph while its shapes and host decisions repeat.

On one GPU a unit of one view is host-bound: the forward, loss and backward take as long to launch as to run, so the
GPU idles while the host dispatches (docs/results.md, "Where a step's time goes"). A unit's compute (shadow views,
forward, loss, backward, the gradients packed into the unit's table) is the same sequence of launches from step to
step as long as what decides its shapes and its host-side branches is the same: the Gaussian count and layout, the
resolution, the views per unit, the SH degree, the loss's terms. The caller names that as the unit's ``key``; the
tensors that change from unit to unit (cameras, target images, backgrounds) are its ``inputs``.

``UnitGraphs`` runs a key's first unit eagerly (it compiles what compiles lazily: Triton kernels, cuBLAS handles,
gsplat's extension), captures the key's second unit into a graph whose inputs are static copies, and replays that
graph for every later unit of the key after copying the unit's inputs into them. A structural change (``rebind``)
drops every graph: they read and write the tables that change replaced. What the graph returns (loss, rows, the
gradient table, anything the caller reads back) are the same tensors at every replay, overwritten by the next:
a unit's table must be free again when the next unit computes, which holds on sync's path (the unit is exchanged
and published before the next computes), not while an overlapped exchange reads it.

Capture can fail where a computation reads the device on the host or uses what a graph cannot hold. It can also
succeed and record the wrong thing: a kernel launched on another stream than the one captured (gsplat 1.4's
spherical harmonics launch on the legacy default stream) runs once, at capture, and never again. So every capture is
checked: the unit is also computed eagerly first, twice, and the graph's first replay must give what ``check``
accepts as the same outputs, given how far the two eager runs are apart (gsplat's backward accumulates with atomic
adds in no fixed order, so how far a replay may be from an eager unit is measured on the unit itself). A capture
that fails is said once, and every later unit runs eagerly. A replay the check rejects is either a missed kernel,
which every capture repeats, or rounding beyond what one pair of eager runs showed, which the next capture need not
repeat: the key runs eagerly until the next structural change and is captured again then, and after
``MAX_REJECTED_IN_A_ROW`` rejected captures in a row every later unit runs eagerly. The first rejection and the
fallback are each said once.

A unit may also write state (``UnitEffect``: an optimizer step, running statistics), which its graph then replays
with the compute. That must happen once per unit: the check's eager runs compute without it, the state is
snapshotted before the capture and put back after it, and the first replay's effect must be, bit for bit, the effect
applied eagerly to the replay's own outputs from the snapshot.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

Inputs = Mapping[str, torch.Tensor]
CapturableFn = Callable[[Inputs], Any]
"""A unit's compute as a function of its inputs alone (and of tensors that stay in place between structural
changes); returns a tree (tuples, lists, dicts) whose tensors the graph leaves in place."""

MAX_GRAPHS = 2
"""Graphs kept at once, the least recently replayed dropped first: a run alternates between at most two keys (a
scale regularization step every tenth unit and the others), a key whose intersection capacity was resized is not
seen again, and each graph holds its own memory pool (the step's activations and gradients)."""


MAX_REJECTED_IN_A_ROW = 3
"""Rejected captures in a row (none accepted between them) after which every later unit runs eagerly: a missed kernel
is rejected at every capture, so its cost is bounded; rounding beyond one pair of eager runs' spread is rare, and
retrying after the next structural change keeps the rest of the run captured."""


class Graph(Protocol):
    """What ``UnitGraphs`` needs of a graph: capture a function's launches once, replay them."""

    def capture(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` under capture; return its outputs (the tensors replays write)."""

    def replay(self) -> None: ...


class CudaGraph:
    """A ``torch.cuda.CUDAGraph`` with its own memory pool, captured on a side stream."""

    def __init__(self) -> None:
        self._graph = torch.cuda.CUDAGraph()

    def capture(self, fn: Callable[[], Any]) -> Any:
        with torch.cuda.graph(self._graph):
            return fn()

    def replay(self) -> None:
        self._graph.replay()


@dataclass(frozen=True)
class UnitEffect:
    """What a unit writes besides its outputs, replayed with its compute: ``apply(outputs, inputs)`` updates
    ``state()``'s tensors in place from the compute's outputs (an optimizer step, running statistics). Its device
    work must be a function of ``outputs``, ``inputs`` and ``state()`` alone: a graph replays the launches recorded at
    capture, with the host values of that moment."""

    apply: Callable[[Any, Inputs], None]
    state: Callable[[], list[torch.Tensor]]
    """The tensors ``apply`` writes (snapshotted while a capture is checked: the unit's effect must happen once)."""


@dataclass
class _Captured:
    graph: Graph
    inputs: dict[str, torch.Tensor]
    outputs: Any


@dataclass
class CaptureStats:
    """How units ran: replayed from a graph, captured, or eagerly (first of their key, not capturable, or after a
    failed capture)."""

    replayed: int = 0
    captured: int = 0
    eager: int = 0
    dropped: int = 0
    """Graphs dropped: by structural changes or for room."""
    rejected: int = 0
    """Captures whose first replay was not the eager unit (their key ran eagerly until the next structural change)."""
    fallback: str | None = None
    """Why units run eagerly from now on (None: capture is on)."""


class UnitGraphs:
    """Replays units' computes from CUDA graphs, one per key; see the module docstring.

    ``graph_factory`` makes the graphs (``CudaGraph`` on CUDA; tests pass a stand-in); ``log`` says why units run
    eagerly, once; ``check(replayed, eager, eager_again)`` compares a capture's first replay with the same unit
    computed eagerly (twice: how far it is from itself) and says how they differ (None: the same), or is None to skip
    that check."""

    def __init__(
        self,
        device: torch.device,
        graph_factory: Callable[[], Graph] | None = None,
        log: Callable[[str], None] = print,
        max_graphs: int = MAX_GRAPHS,
        check: Callable[[Any, Any, Any], str | None] | None = None,
    ):
        if max_graphs < 1:
            raise ValueError(f"max_graphs must be >= 1, got {max_graphs}")
        self.stats = CaptureStats()
        self._log = log
        self._check = check
        self._max_graphs = max_graphs
        self._graphs: OrderedDict[Hashable, _Captured] = OrderedDict()
        self._seen: set[Hashable] = set()
        """Keys whose first unit ran eagerly (the next one is captured)."""
        self._rejected: set[Hashable] = set()
        """Keys whose capture the check rejected: eager until the next structural change."""
        self._rejected_in_a_row = 0
        self._graph_factory = graph_factory
        if graph_factory is None:
            if device.type == "cuda":
                self._graph_factory = CudaGraph
            else:
                self._fall_back(f"units run eagerly on {device.type}: capture needs CUDA")

    @property
    def capturing(self) -> bool:
        """Whether units of a repeated key are replayed (False after a fallback)."""
        return self.stats.fallback is None

    def disable(self, reason: str) -> None:
        """Run every later unit eagerly, saying ``reason`` (once)."""
        self._fall_back(reason)

    def run(self, key: Hashable | None, inputs: Inputs, fn: CapturableFn, effect: UnitEffect | None = None) -> Any:
        """``fn(inputs)`` then ``effect`` (if any) of its outputs: eagerly (key None, the key's first unit, capture
        off) or from the key's graph, whose static inputs take ``inputs``' values first. Returns ``fn``'s outputs, or
        the graph's."""
        if key is None or not self.capturing or key in self._rejected:
            return self._eager(inputs, fn, effect)
        captured = self._graphs.get(key)
        if captured is not None:
            self._graphs.move_to_end(key)
            _copy_inputs(captured.inputs, inputs, key)
            captured.graph.replay()
            self.stats.replayed += 1
            return captured.outputs
        if key not in self._seen:
            self._seen.add(key)
            return self._eager(inputs, fn, effect)
        return self._capture(key, inputs, fn, effect)

    def rebind(self) -> None:
        """Drop every graph and every key seen: a structural change replaced what they read and write."""
        self.stats.dropped += len(self._graphs)
        self._graphs.clear()
        self._seen.clear()
        self._rejected.clear()

    def _eager(self, inputs: Inputs, fn: CapturableFn, effect: UnitEffect | None) -> Any:
        self.stats.eager += 1
        outputs = fn(inputs)
        if effect is not None:
            effect.apply(outputs, inputs)
        return outputs

    def _capture(self, key: Hashable, inputs: Inputs, fn: CapturableFn, effect: UnitEffect | None) -> Any:
        while len(self._graphs) >= self._max_graphs:
            self._graphs.popitem(last=False)
            self.stats.dropped += 1
        eager = None
        if self._check is not None:  # what the graph's first replay must give, and how far apart eager runs are
            eager = fn(inputs), fn(inputs)
        before = _snapshot(effect)
        static = {name: tensor.clone() for name, tensor in inputs.items()}
        graph = self._graph_factory()

        def unit() -> Any:
            outputs = fn(static)
            if effect is not None:
                effect.apply(outputs, static)
            return outputs

        try:
            outputs = graph.capture(unit)
        except Exception as error:  # noqa: BLE001 - whatever capture refuses, the unit still runs eagerly
            self._fall_back(f"units run eagerly: their capture failed ({type(error).__name__}: "
                            f"{str(error).splitlines()[0] if str(error) else 'no message'})")
            _restore(effect, before)
            return self._eager(inputs, fn, effect)
        _restore(effect, before)  # capture records the launches without running them (a stand-in may run them)
        graph.replay()
        if eager is not None and (difference := self._check(outputs, *eager)) is not None:
            self._reject(key, difference)
        elif effect is not None and (difference := _same_effect(effect, outputs, static, before)) is not None:
            self._fall_back(f"units run eagerly: a replayed unit is not the eager unit ({difference})")
        else:
            self._graphs[key] = _Captured(graph, static, outputs)
            self.stats.captured += 1
            self._rejected_in_a_row = 0
            return outputs
        _restore(effect, before)
        return self._eager(inputs, fn, effect)  # run again: the caller keeps what the unit's last run produced

    def _reject(self, key: Hashable, difference: str) -> None:
        self.stats.rejected += 1
        self._rejected_in_a_row += 1
        if self._rejected_in_a_row >= MAX_REJECTED_IN_A_ROW:
            self._fall_back(f"units run eagerly: {self._rejected_in_a_row} captures in a row were not the eager unit "
                            f"(the last: {difference})")
            return
        self._rejected.add(key)
        if self.stats.rejected == 1:
            self._log(f"a replayed unit is not the eager unit ({difference}): its key runs eagerly until the next "
                      f"structural change, then is captured again")

    def _fall_back(self, reason: str) -> None:
        if self.stats.fallback is None:
            self.stats.fallback = reason
            self._graphs.clear()
            self._log(reason)


def _snapshot(effect: UnitEffect | None) -> list[torch.Tensor]:
    return [] if effect is None else [tensor.clone() for tensor in effect.state()]


def _restore(effect: UnitEffect | None, snapshot: list[torch.Tensor]) -> None:
    if effect is not None:
        for tensor, saved in zip(effect.state(), snapshot):
            tensor.copy_(saved)


def _same_effect(effect: UnitEffect, outputs: Any, inputs: Inputs, before: list[torch.Tensor]) -> str | None:
    """Whether the replay's effect is, bit for bit, the effect applied eagerly to the replay's own outputs from the
    state before it (elementwise steps and sums of one term: no rounding may differ); how it differs, or None. Leaves
    the eager effect in place."""
    replayed = [tensor.clone() for tensor in effect.state()]
    _restore(effect, before)
    effect.apply(outputs, inputs)
    for index, (tensor, value) in enumerate(zip(effect.state(), replayed)):
        if not torch.equal(tensor, value):
            changed = int((tensor != value).sum())
            return f"its effect on state tensor {index} {tuple(tensor.shape)} differs from the eager effect in {changed} entries"
    return None


def _copy_inputs(static: dict[str, torch.Tensor], inputs: Inputs, key: Hashable) -> None:
    if static.keys() != inputs.keys():
        raise ValueError(f"a unit of key {key!r} has inputs {sorted(inputs)}, its graph {sorted(static)}")
    for name, tensor in inputs.items():
        target = static[name]
        if tensor.shape != target.shape or tensor.dtype != target.dtype:
            raise ValueError(f"input '{name}' of a unit of key {key!r} is {tensor.dtype} {tuple(tensor.shape)}, its "
                             f"graph's {target.dtype} {tuple(target.shape)}: the key must decide the inputs' shapes")
        if tensor.data_ptr() != target.data_ptr():
            target.copy_(tensor, non_blocking=True)


@dataclass(frozen=True)
class CapturedCompute:
    """A unit's compute as a function of its shadow views and its device inputs, for replay from a graph: ``fn(views,
    inputs)`` returns (loss, bool[N] rows its views saw), as a ``ComputeFn``; units of one ``key`` (None: not
    capturable) must launch the same work on inputs of the same shapes."""

    key: Hashable | None
    inputs: Inputs
    fn: Callable[[dict[str, torch.Tensor], Inputs], tuple[torch.Tensor, torch.Tensor]]
    effect: UnitEffect | None = None
    """What the unit also writes after its compute (the densification statistics, from the render it left): it goes
    into the unit's graph with the compute, and runs once after the last compute where the unit runs eagerly. Its
    ``apply`` gets (loss, bool[N] rows its views saw) and the unit's inputs on every path."""


GRADIENT_TOLERANCE = 1e-4
"""A replayed unit's gradient table may differ from the eager unit's by this much, relative to the table's largest
entry, or by ``SPREAD_FACTOR`` times what two eager runs of the unit differ by, whichever is larger: gsplat's
backward accumulates with atomic adds in no fixed order, so eager runs differ in the last bits, by more where many
terms meet in one entry (large images, many Gaussians per tile)."""

SPREAD_FACTOR = 4.0
"""How much farther than two eager runs from each other a replay may be from the eager run: the largest of a
difference's entries varies from one pair of runs to another."""

LOSS_TOLERANCE = 1e-6
"""A replayed unit's loss may differ from the eager unit's by this much, relative (the forward has no atomic
accumulation), or by ``SPREAD_FACTOR`` times what two eager runs differ by."""


def same_unit(replayed: tuple, eager: tuple, eager_again: tuple) -> str | None:
    """``UnitGraphs``' check of a unit's (loss, rows, gradient table, ...): the same rows as the eager unit, the loss
    and the gradients within ``LOSS_TOLERANCE`` and ``GRADIENT_TOLERANCE`` or within ``SPREAD_FACTOR`` times how far
    ``eager_again`` (the same unit computed eagerly again) is from ``eager``; how they differ, or None."""
    loss, rows, table = replayed[:3]
    eager_loss, eager_rows, eager_table = eager[:3]
    again_loss, _, again_table = eager_again[:3]
    if not torch.equal(rows, eager_rows):
        return f"it sees {int(rows.sum())} rows, the eager unit {int(eager_rows.sum())}"
    loss_scale = eager_loss.abs().clamp_min(torch.finfo(eager_loss.dtype).tiny)
    loss_difference = ((loss - eager_loss).abs() / loss_scale).item()
    loss_spread = ((again_loss - eager_loss).abs() / loss_scale).item()
    if loss_difference > max(LOSS_TOLERANCE, SPREAD_FACTOR * loss_spread):
        return (f"its loss is {loss.item():.7g}, the eager unit's {eager_loss.item():.7g} and "
                f"{again_loss.item():.7g} when computed again")
    scale = eager_table.abs().max().clamp_min(torch.finfo(eager_table.dtype).tiny)
    difference = ((table - eager_table).abs().max() / scale).item()
    spread = ((again_table - eager_table).abs().max() / scale).item()
    if difference > max(GRADIENT_TOLERANCE, SPREAD_FACTOR * spread):
        column = int((table - eager_table).abs().amax(dim=0).argmax()) if table.dim() == 2 else 0
        return (f"its gradients differ from the eager unit's by {difference:.2g} of the largest (column {column}), "
                f"two eager runs by {spread:.2g}")
    return None
