"""Captured units (odin_ns.runtime.capture) on the CPU: when a unit runs eagerly, is captured, replayed or recaptured,
when capture falls back, and that the runtime's sync path trains the same state through a graph as eagerly. The
graph here is a stand-in that re-runs the captured function and writes its results into the captured outputs, as a
replay does; tests/test_captured_steps.py replays CUDA graphs of the real step on a GPU."""

from __future__ import annotations

import functools

import pytest
import torch

from odin_ns.comm.context import DistContext
from odin_ns.runtime import capture as capture_module
from odin_ns.runtime.capture import CapturedCompute, UnitEffect, UnitGraphs, same_unit
from odin_ns.runtime.config import RuntimeConfig
from odin_ns.runtime.optimizer import ScopedAdam


def _write_into(captured, fresh) -> None:
    if isinstance(captured, torch.Tensor):
        captured.copy_(fresh)
    elif isinstance(captured, dict):
        for key in captured:
            _write_into(captured[key], fresh[key])
    elif isinstance(captured, (tuple, list)):
        for old, new in zip(captured, fresh):
            _write_into(old, new)


class ReplayingGraph:
    """A graph stand-in: capture runs the function once; replay runs it again and writes what it returns into the
    tensors capture returned (a CUDA graph's replay rewrites the same memory)."""

    made = 0

    def __init__(self) -> None:
        ReplayingGraph.made += 1
        self._fn = None
        self._outputs = None

    def capture(self, fn):
        self._fn = fn
        self._outputs = fn()
        return self._outputs

    def replay(self) -> None:
        _write_into(self._outputs, self._fn())


class StaleGraph(ReplayingGraph):
    """A graph that missed a kernel: the kernel ran once, during capture, on buffers the recorded kernels had not
    written yet (garbage), and its output never changes again."""

    def capture(self, fn):
        outputs = super().capture(fn)
        outputs[2].mul_(3.0)  # the gradient table, from the garbage the missed kernel read
        return outputs

    def replay(self) -> None:
        pass


class RefusingGraph:
    def capture(self, fn):
        raise RuntimeError("operation not permitted when stream is capturing\nmore detail")

    def replay(self) -> None:
        raise AssertionError("never captured")


def doubled(calls: list):
    def fn(inputs):
        calls.append(inputs["x"])
        return {"y": inputs["x"] * 2}

    return fn


def test_a_key_runs_eagerly_first_then_is_captured_then_replayed_into_the_same_outputs():
    said, calls = [], []
    graphs = UnitGraphs(torch.device("cpu"), graph_factory=ReplayingGraph, log=said.append)
    fn = doubled(calls)
    first = graphs.run("k", {"x": torch.tensor([1.0])}, fn)
    assert first["y"].item() == 2 and calls[-1].item() == 1 and graphs.stats.eager == 1  # eager: the step's tensor
    second = graphs.run("k", {"x": torch.tensor([3.0])}, fn)
    assert second["y"].item() == 6 and graphs.stats.captured == 1
    given = torch.tensor([5.0])
    third = graphs.run("k", {"x": given}, fn)
    assert third is second and third["y"].item() == 10, "a replay returns the graph's outputs, rewritten"
    assert calls[-1] is not given and calls[-1].item() == 5, "the graph reads its static copy of the inputs"
    assert graphs.stats.replayed == 1 and said == []


def test_keys_get_graphs_of_their_own_and_the_least_recently_replayed_is_dropped_for_room():
    graphs = UnitGraphs(torch.device("cpu"), graph_factory=ReplayingGraph, max_graphs=2)
    fn = doubled([])
    for key in ("a", "b", "c"):
        for value in (1.0, 2.0):
            graphs.run(key, {"x": torch.tensor([value])}, fn)
    assert graphs.stats.captured == 3 and graphs.stats.dropped == 1
    graphs.run("a", {"x": torch.tensor([4.0])}, fn)  # dropped, seen: captured again, not run eagerly
    assert graphs.stats.captured == 4 and graphs.stats.eager == 3
    out = graphs.run("c", {"x": torch.tensor([7.0])}, fn)
    assert out["y"].item() == 14 and graphs.stats.replayed == 1


def test_a_structural_change_drops_every_graph_and_the_next_unit_of_a_key_runs_eagerly():
    graphs = UnitGraphs(torch.device("cpu"), graph_factory=ReplayingGraph)
    fn = doubled([])
    for value in (1.0, 2.0, 3.0):
        graphs.run("k", {"x": torch.tensor([value])}, fn)
    graphs.rebind()
    assert graphs.stats.dropped == 1
    graphs.run("k", {"x": torch.tensor([4.0])}, fn)
    assert (graphs.stats.eager, graphs.stats.captured, graphs.stats.replayed) == (2, 1, 1)


def test_units_without_a_key_always_run_eagerly():
    graphs = UnitGraphs(torch.device("cpu"), graph_factory=ReplayingGraph)
    for value in (1.0, 2.0, 3.0):
        assert graphs.run(None, {"x": torch.tensor([value])}, doubled([]))["y"].item() == 2 * value
    assert graphs.stats.eager == 3 and graphs.stats.captured == 0


def test_a_failed_capture_is_said_once_and_every_later_unit_runs_eagerly():
    said = []
    graphs = UnitGraphs(torch.device("cpu"), graph_factory=RefusingGraph, log=said.append)
    fn = doubled([])
    results = [graphs.run("k", {"x": torch.tensor([value])}, fn)["y"].item() for value in (1.0, 2.0, 3.0, 4.0)]
    assert results == [2.0, 4.0, 6.0, 8.0], "the unit whose capture failed still ran"
    assert not graphs.capturing and graphs.stats.eager == 4
    assert said == ["units run eagerly: their capture failed (RuntimeError: operation not permitted when stream is "
                    "capturing)"]
    graphs.disable("another reason")
    assert len(said) == 1


def test_without_cuda_units_run_eagerly_said_once():
    said = []
    graphs = UnitGraphs(torch.device("cpu"), log=said.append)
    for value in (1.0, 2.0, 3.0):
        graphs.run("k", {"x": torch.tensor([value])}, doubled([]))
    assert said == ["units run eagerly on cpu: capture needs CUDA"] and graphs.stats.eager == 3


def test_a_key_whose_inputs_change_shape_is_refused_naming_the_input():
    graphs = UnitGraphs(torch.device("cpu"), graph_factory=ReplayingGraph)
    fn = doubled([])
    graphs.run("k", {"x": torch.tensor([1.0])}, fn)
    graphs.run("k", {"x": torch.tensor([1.0])}, fn)
    with pytest.raises(ValueError, match="input 'x' of a unit of key 'k' is torch.float32 \\(2,\\)"):
        graphs.run("k", {"x": torch.tensor([1.0, 2.0])}, fn)


def summing_effect(total: torch.Tensor) -> UnitEffect:
    """An effect adding each unit's output into ``total`` (as a publication steps its table)."""
    return UnitEffect(lambda outputs, inputs: total.add_(outputs["y"]), lambda: [total])


def test_a_units_effect_happens_once_whether_it_ran_eagerly_was_captured_or_replayed():
    """The capture's eager runs and the stand-in's run at capture are undone: the state sums each unit once."""
    total = torch.zeros(1)
    graphs = UnitGraphs(torch.device("cpu"), graph_factory=ReplayingGraph, check=same_doubled)
    for value in (1.0, 2.0, 3.0, 4.0):
        graphs.run("k", {"x": torch.tensor([value])}, doubled([]), summing_effect(total))
    assert (graphs.stats.eager, graphs.stats.captured, graphs.stats.replayed) == (1, 1, 2)
    assert total.item() == 2 * (1 + 2 + 3 + 4)


def test_a_replay_whose_effect_is_not_the_eager_effect_is_said_once_and_the_unit_runs_eagerly():
    """A graph whose effect missed a kernel (here: one that added the unit twice) is caught at its first replay by
    applying the effect eagerly to the replay's outputs; the state keeps each unit once."""
    said = []
    total = torch.zeros(1)

    class DoublingGraph(ReplayingGraph):
        def replay(self) -> None:
            super().replay()
            total.add_(self._outputs["y"])

    graphs = UnitGraphs(torch.device("cpu"), graph_factory=DoublingGraph, log=said.append, check=same_doubled)
    for value in (1.0, 2.0, 3.0):
        graphs.run("k", {"x": torch.tensor([value])}, doubled([]), summing_effect(total))
    assert said == ["units run eagerly: a replayed unit is not the eager unit (its effect on state tensor 0 (1,) "
                    "differs from the eager effect in 1 entries)"]
    assert total.item() == 2 * (1 + 2 + 3) and graphs.stats.captured == 0 and not graphs.capturing


def same_doubled(replayed, eager, eager_again) -> str | None:
    return None if torch.equal(replayed["y"], eager["y"]) else "y differs"


# --------------------------------------------------------------------------------------- the runtime's sync path

ROWS = 300


def toy_compute(views, inputs):
    """A unit's loss from its inputs alone: the rows inside the window pulled towards the target (no host read of
    the inputs, as a captured unit's)."""
    means = views["means"]
    window = inputs["window"]
    seen = ((means.detach() >= window[:2]) & (means.detach() < window[2:])).all(dim=1)
    weight = seen.float()[:, None]
    loss = (weight * (views["colors"] - inputs["target"]).square()).sum() + (weight * (means - 0.5).square()).sum()
    loss.backward()
    return loss.detach(), seen


def toy_runtime(captured: bool, monkeypatch, graph=ReplayingGraph, log=lambda _: None):
    monkeypatch.setattr("odin_ns.runtime.executor.UnitGraphs",
                        functools.partial(capture_module.UnitGraphs, graph_factory=graph))
    generator = torch.Generator().manual_seed(3)
    params = {"means": torch.nn.Parameter(torch.rand(ROWS, 2, generator=generator)),
              "colors": torch.nn.Parameter(torch.rand(ROWS, 3, generator=generator))}
    optimizers = {name: ScopedAdam([param], lr=0.05) for name, param in params.items()}
    config = RuntimeConfig(mode="sync", captured_units=captured, timeout_s=10.0)
    runtime = config.setup(params=params, optimizers=optimizers, context=DistContext.single("cpu"), log=log)
    return runtime, params, optimizers


def unit_inputs(unit: int) -> dict[str, torch.Tensor]:
    corner = torch.tensor([(unit % 3) / 3, (unit % 2) / 2])
    return {"window": torch.cat([corner, corner + 0.5]), "target": torch.tensor([unit / 20, 0.5, 1 - unit / 20])}


def grow(params, optimizers, runtime) -> None:
    """A structural change: every tensor gains its first ten rows again (moments of the new rows zero)."""
    for name in list(params):
        old = params[name]
        new = torch.nn.Parameter(torch.cat([old.detach(), old.detach()[:10]]))
        state = optimizers[name].state.pop(old)
        for key in ("exp_avg", "exp_avg_sq"):
            state[key] = torch.cat([state[key], torch.zeros_like(state[key][:10])])
        optimizers[name].state[new] = state
        optimizers[name].param_groups[0]["params"] = [new]
        params[name] = new
    runtime.rebind(params)


def train(captured: bool, monkeypatch) -> tuple[dict[str, torch.Tensor], list[float], UnitGraphs | None]:
    runtime, params, optimizers = toy_runtime(captured, monkeypatch)
    losses = []
    for unit in range(16):
        if unit == 9:
            grow(params, optimizers, runtime)
        inputs = unit_inputs(unit)
        key = ("toy", runtime.structure_version)
        loss = runtime.run_unit(unit, lambda views: toy_compute(views, inputs), captured=CapturedCompute(key, inputs, toy_compute))
        losses.append(loss.item())
    state = {}
    for name, param in params.items():
        state[name] = param.detach().clone()
        for key, value in optimizers[name].state[param].items():
            state[f"{name}.{key}"] = value.clone()
    return state, losses, runtime.graphs


def test_sync_units_replayed_from_a_graph_train_the_eager_units_state_bitwise(monkeypatch):
    eager_state, eager_losses, no_graphs = train(False, monkeypatch)
    state, losses, graphs = train(True, monkeypatch)
    assert no_graphs is None
    assert losses == eager_losses
    assert state.keys() == eager_state.keys()
    for name, value in eager_state.items():
        assert torch.equal(state[name], value), name
    # units 0 and 9 (after the structural change) eager, 1 and 10 captured, the rest replayed
    assert (graphs.stats.eager, graphs.stats.captured, graphs.stats.replayed, graphs.stats.dropped) == (2, 2, 12, 1)


def test_a_units_effect_gets_its_loss_and_rows_whether_it_ran_eagerly_or_from_the_graph(monkeypatch):
    """The eager path and the graph (capture, check, replays) hand a unit's effect the same form of outputs: the
    compute's loss and the rows its views saw, nothing of what the graph computes besides."""
    runtime, _, _ = toy_runtime(True, monkeypatch)
    seen, count = [], torch.zeros(1)

    def record(outputs, inputs):
        seen.append((len(outputs), tuple(outputs[0].shape), outputs[1].dtype, tuple(outputs[1].shape)))
        count.add_(1)

    effect = UnitEffect(record, lambda: [count])
    for unit in range(4):
        inputs = unit_inputs(unit)
        runtime.run_unit(unit, lambda views: toy_compute(views, inputs),
                         captured=CapturedCompute(("toy", 0), inputs, toy_compute, effect=effect))
    assert (runtime.graphs.stats.eager, runtime.graphs.stats.captured, runtime.graphs.stats.replayed) == (1, 1, 2)
    assert seen and set(seen) == {(2, (), torch.bool, (ROWS,))}
    assert count.item() == 4


def test_overlapped_modes_and_dense_parameters_run_units_eagerly_said_once(monkeypatch):
    said = []
    params = {"means": torch.nn.Parameter(torch.rand(ROWS, 2))}
    optimizers = {"means": ScopedAdam([params["means"]], lr=0.05)}
    config = RuntimeConfig(mode="quality-first", captured_units=True, timeout_s=10.0)
    runtime = config.setup(params=params, optimizers=optimizers, context=DistContext.single("cpu"), log=said.append)
    assert not runtime.graphs.capturing and said == ["units run eagerly on cpu: capture needs CUDA"]
    monkeypatch.setattr("odin_ns.runtime.executor.UnitGraphs",
                        functools.partial(capture_module.UnitGraphs, graph_factory=ReplayingGraph))
    for mode, dense in (("quality-first", ()), ("sync", (torch.zeros(2, requires_grad=True),))):
        said.clear()
        config = RuntimeConfig(mode=mode, captured_units=True, timeout_s=10.0)
        runtime = config.setup(params=params, optimizers=optimizers, context=DistContext.single("cpu"),
                               dense_params=dense, log=said.append)
        assert not runtime.graphs.capturing and len(said) == 1
        assert ("quality-first mode" in said[0]) == (mode == "quality-first")
        assert ("dense parameters" in said[0]) == bool(dense)


def test_a_capture_whose_replay_is_not_the_eager_unit_is_said_once_and_units_run_eagerly(monkeypatch):
    """Each capture is checked against the same unit computed eagerly: a graph that missed a kernel (one launched
    outside the captured stream) is caught at its first replay, at every capture; those units and every later one
    run eagerly and train the eager state, and after MAX_REJECTED_IN_A_ROW rejected captures capture stops."""
    said = []

    def losses(runtime) -> list[float]:
        losses = []
        for unit in range(12):
            if unit % 4 == 0 and unit and runtime.graphs is not None:
                runtime.graphs.rebind()  # a structural change (of nothing here): the key is captured again
            inputs = unit_inputs(unit)
            losses.append(runtime.run_unit(unit, lambda views: toy_compute(views, inputs),
                                           captured=CapturedCompute("toy", inputs, toy_compute)).item())
        return losses

    runtime, _, _ = toy_runtime(True, monkeypatch, graph=StaleGraph, log=said.append)
    assert losses(runtime) == losses(toy_runtime(False, monkeypatch)[0])
    assert len(said) == 2 and said[0].startswith("a replayed unit is not the eager unit (")
    assert said[1].startswith(f"units run eagerly: {capture_module.MAX_REJECTED_IN_A_ROW} captures in a row were not the eager unit")
    stats = runtime.graphs.stats
    assert stats.rejected == capture_module.MAX_REJECTED_IN_A_ROW == 3 and stats.captured == 0 and stats.replayed == 0
    assert not runtime.graphs.capturing


class RoundingGraph(ReplayingGraph):
    """A graph whose replays land beyond the check's tolerance (atomic rounding wider than one pair of eager runs
    showed)."""

    def replay(self) -> None:
        super().replay()
        self._outputs["y"].add_(1.0)


def test_a_rejected_capture_runs_its_key_eagerly_until_the_next_structural_change_then_captures_again():
    said, calls, made = [], [], []

    def first_graph_rounds_wide():
        made.append(None)
        return RoundingGraph() if len(made) == 1 else ReplayingGraph()

    graphs = UnitGraphs(torch.device("cpu"), graph_factory=first_graph_rounds_wide, log=said.append, check=same_doubled)
    fn = doubled(calls)
    results = [graphs.run("k", {"x": torch.tensor([value])}, fn)["y"].item() for value in (1.0, 2.0, 3.0)]
    assert results == [2.0, 4.0, 6.0], "the rejected capture's unit and the next ran eagerly"
    assert (graphs.stats.rejected, graphs.stats.captured, graphs.stats.eager) == (1, 0, 3) and graphs.capturing
    assert said == ["a replayed unit is not the eager unit (y differs): its key runs eagerly until the next "
                    "structural change, then is captured again"]
    graphs.rebind()
    results = [graphs.run("k", {"x": torch.tensor([value])}, fn)["y"].item() for value in (4.0, 5.0, 6.0)]
    assert results == [8.0, 10.0, 12.0]
    assert (graphs.stats.captured, graphs.stats.replayed) == (1, 1) and len(said) == 1


def test_only_rejections_in_a_row_stop_capture():
    """An accepted capture between two rejections starts the count again."""
    accepted = [True]
    graphs = UnitGraphs(torch.device("cpu"), graph_factory=ReplayingGraph, log=lambda _: None,
                        check=lambda replayed, eager, again: None if accepted[0] else "y differs")
    for epoch in range(2 * capture_module.MAX_REJECTED_IN_A_ROW):
        accepted[0] = epoch % capture_module.MAX_REJECTED_IN_A_ROW == capture_module.MAX_REJECTED_IN_A_ROW - 1
        for value in (1.0, 2.0):
            graphs.run("k", {"x": torch.tensor([value])}, doubled([]))
        graphs.rebind()
    assert graphs.capturing and graphs.stats.rejected == 2 * (capture_module.MAX_REJECTED_IN_A_ROW - 1)


def test_the_check_accepts_gradients_within_atomic_rounding_and_names_what_differs():
    loss, rows, table = torch.tensor(0.5), torch.tensor([True, False]), torch.tensor([[1.0, -2.0], [0.0, 0.5]])
    eager = (loss, rows, table)
    assert same_unit((loss, rows, table * (1 + 1e-6)), eager, eager) is None
    assert "loss is 0.6" in same_unit((torch.tensor(0.6), rows, table), eager, eager)
    assert "sees 2 rows" in same_unit((loss, torch.tensor([True, True]), table), eager, eager)
    difference = same_unit((loss, rows, table + torch.tensor([0.0, 0.01])), eager, eager)
    assert "gradients differ" in difference and "(column 1)" in difference and "two eager runs by 0" in difference


def test_the_check_measures_atomic_rounding_on_the_unit_itself():
    """Where two eager runs of a unit differ (many atomic adds into one entry), a replay as far from the eager run is
    accepted; one much farther is not, nor one whose loss moved where the eager losses did not."""
    loss, rows, table = torch.tensor(0.5), torch.tensor([True, False]), torch.tensor([[1.0, -2.0], [0.0, 0.5]])
    again = (loss, rows, table + 1e-3)  # 5e-4 of the largest entry: above GRADIENT_TOLERANCE
    assert same_unit((loss, rows, table - 1e-3), (loss, rows, table), again) is None
    assert "two eager runs by 0.0005" in same_unit((loss, rows, table + 0.01), (loss, rows, table), again)
    assert same_unit((torch.tensor(0.5001), rows, table), (loss, rows, table), (torch.tensor(0.50005), rows, table)) is None
    assert "loss is" in same_unit((torch.tensor(0.5001), rows, table), (loss, rows, table), again)
