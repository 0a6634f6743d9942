"""ScopedAdam: equals torch Adam on full scopes, leaves hidden rows untouched, publishes in row ranges at the
learning rates it is given, survives gsplat densification, and hands its state to the delay bound."""

from __future__ import annotations

import copy

import pytest
import torch
from gsplat.strategy import ops as gsplat_ops

from odin_ns.kernels import pack_bitmap
from odin_ns.kernels.dispatch import BACKEND_ENV_VAR, triton_interpreting
from odin_ns.optim import ScopedAdamOptimizerConfig
from odin_ns.runtime.optimizer import ScopedAdam

LR, EPS = 0.01, 1e-15  # splatfacto's eps


@pytest.fixture(params=["torch", "triton"])
def backend(request, monkeypatch):
    """Run each optimizer test on the fallback and (on CUDA, or under TRITON_INTERPRET=1) on the Triton kernel."""
    if request.param == "triton" and not (torch.cuda.is_available() or triton_interpreting()):
        pytest.skip("Triton path needs CUDA or TRITON_INTERPRET=1 (test_kernels.py covers it under the interpreter)")
    monkeypatch.setenv(BACKEND_ENV_VAR, request.param)
    return request.param


def _device(backend: str) -> str:
    return "cuda" if backend == "triton" and torch.cuda.is_available() else "cpu"


def _pair(shape, device, generator):
    """A ScopedAdam param and an identical torch Adam param."""
    data = torch.randn(shape, generator=generator).to(device)
    return torch.nn.Parameter(data.clone()), torch.nn.Parameter(data.clone())


def _publish(optimizer: ScopedAdam, param, grad, rows=None, row_range=None, advance_step=True) -> None:
    """One publication of ``param`` at the optimizer's current learning rates, as the runtime's ``Publication`` does
    with the rates it snapshotted."""
    optimizer.step_rows({param: grad}, rows, row_range, optimizer.learning_rates(), advance_step)


@pytest.mark.parametrize("shape", [(37,), (37, 3), (70, 15, 3)])
@pytest.mark.parametrize("full_scope", ["step", "none", "mask", "bitmap"])
def test_full_scope_equals_torch_adam(backend, shape, full_scope):
    """``step()`` from ``param.grad`` and ``step_rows`` over every row (None, a full mask, a full bitmap) are torch
    Adam's step."""
    generator = torch.Generator().manual_seed(0)
    device = _device(backend)
    ours, theirs = _pair(shape, device, generator)
    scoped = ScopedAdam([ours], lr=LR, eps=EPS, betas=(0.8, 0.99))
    adam = torch.optim.Adam([theirs], lr=LR, eps=EPS, betas=(0.8, 0.99), foreach=False)
    everything = torch.ones(shape[0], dtype=torch.bool, device=device)
    rows = {"step": None, "none": None, "mask": everything, "bitmap": pack_bitmap(everything)}[full_scope]
    for _ in range(6):
        grad = torch.randn(shape, generator=generator).to(device)
        theirs.grad = grad.clone()
        if full_scope == "step":
            ours.grad = grad.clone()
            scoped.step()
        else:
            _publish(scoped, ours, grad, rows)
        adam.step()
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    for key in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(scoped.state[ours][key], adam.state[theirs][key], rtol=0, atol=1e-6)
    assert scoped.state[ours]["step"].item() == adam.state[theirs]["step"].item() == 6


def test_hidden_rows_untouched_and_step_count_global(backend):
    generator = torch.Generator().manual_seed(1)
    device = _device(backend)
    n = 45
    ours, theirs = _pair((n, 3), device, generator)
    scoped = ScopedAdam([ours], lr=LR, eps=EPS)
    adam = torch.optim.Adam([theirs], lr=LR, eps=EPS, foreach=False)
    always = torch.arange(n, device=device) % 3 == 0  # visible at every step
    late = torch.arange(n, device=device) % 3 == 1  # visible from step 3 on
    # Reference for the late rows: torch Adam on just those rows, starting from zero moments at global step 2.
    late_rows = torch.nn.Parameter(ours.detach()[late].clone())
    late_adam = torch.optim.Adam([late_rows], lr=LR, eps=EPS, foreach=False)
    late_adam.state[late_rows] = {
        "step": torch.tensor(2.0),
        "exp_avg": torch.zeros_like(late_rows),
        "exp_avg_sq": torch.zeros_like(late_rows),
    }
    for step in range(1, 5):
        grad = torch.randn(n, 3, generator=generator).to(device)
        visible = always | late if step >= 3 else always
        moments_before = {
            key: scoped.state[ours].get(key, torch.zeros_like(ours)).clone() for key in ("exp_avg", "exp_avg_sq")
        }
        param_before = ours.detach().clone()
        theirs.grad = grad.clone()
        _publish(scoped, ours, grad, visible)
        adam.step()
        if step >= 3:
            late_rows.grad = grad[late].clone()
            late_adam.step()
        assert torch.equal(ours[~visible], param_before[~visible])
        for key, value in moments_before.items():
            assert torch.equal(scoped.state[ours][key][~visible], value[~visible]), key
        torch.testing.assert_close(ours[always], theirs[always], rtol=0, atol=1e-6)
    torch.testing.assert_close(ours[late], late_rows.detach(), rtol=0, atol=1e-6)
    assert scoped.state[ours]["step"].item() == 4


def test_chunked_publication_equals_one_step(backend):
    """A unit published bucket run by bucket run (the step count advanced by its first range only) equals the same
    unit published whole."""
    generator = torch.Generator().manual_seed(2)
    device = _device(backend)
    n = 100
    chunked, whole = _pair((n, 4), device, generator)
    chunked_opt, whole_opt = ScopedAdam([chunked], lr=LR), ScopedAdam([whole], lr=LR)
    rows = pack_bitmap(torch.rand(n, generator=generator).to(device) < 0.5)
    for _ in range(3):
        grad = torch.randn(n, 4, generator=generator).to(device)
        for lo, hi in ((0, 33), (33, 64), (64, 100)):
            _publish(chunked_opt, chunked, grad, rows, row_range=(lo, hi), advance_step=lo == 0)
        _publish(whole_opt, whole, grad, rows)
    assert torch.equal(chunked, whole)
    assert chunked_opt.state[chunked]["step"].item() == whole_opt.state[whole]["step"].item() == 3


def test_publication_uses_the_learning_rates_it_is_given(backend):
    """A scheduler may move ``param_groups``' rates while a unit's exchange is in flight: the unit publishes, range
    after range, at the rates it ran under (one per group), never the moved ones; ``step()`` uses the current ones."""
    generator = torch.Generator().manual_seed(5)
    device = _device(backend)
    n, rates = 64, [0.03, 0.005]
    (a, a_ref), (b, b_ref) = _pair((n, 3), device, generator), _pair((n,), device, generator)
    scoped = ScopedAdam([{"params": [a], "lr": 1.0}, {"params": [b], "lr": 2.0}], eps=EPS)
    groups = [{"params": [a_ref], "lr": rates[0]}, {"params": [b_ref], "lr": rates[1]}]
    adam = torch.optim.Adam(groups, eps=EPS, foreach=False)
    for _ in range(3):
        grads = {param: torch.randn(param.shape, generator=generator).to(device) for param in (a, b)}
        for lo, hi in ((0, 32), (32, 64)):
            for group in scoped.param_groups:
                group["lr"] *= 10  # the scheduler moving on between two ranges of one publication
            scoped.step_rows(grads, None, (lo, hi), rates, advance_step=lo == 0)
        a_ref.grad, b_ref.grad = grads[a].clone(), grads[b].clone()
        adam.step()
    torch.testing.assert_close(a, a_ref, rtol=0, atol=1e-6)
    torch.testing.assert_close(b, b_ref, rtol=0, atol=1e-6)

    for optimizer in (scoped, adam):
        for group, rate in zip(optimizer.param_groups, [0.2, 0.1]):
            group["lr"] = rate
    for param, reference in ((a, a_ref), (b, b_ref)):
        param.grad = torch.randn(param.shape, generator=generator).to(device)
        reference.grad = param.grad.clone()
    scoped.step()
    adam.step()
    torch.testing.assert_close(a, a_ref, rtol=0, atol=1e-6)
    torch.testing.assert_close(b, b_ref, rtol=0, atol=1e-6)


def test_first_step_is_bias_corrected_unlike_gsplats_selective_adam(backend):
    """gsplat's ``SelectiveAdam`` (gsplat >= 1.5) has no bias correction: its fused kernel steps by
    lr * m / (sqrt(v) + eps), so its first step moves an element by lr * (1 - beta1) / sqrt(1 - beta2), 3.2 lr at the
    default betas. ScopedAdam's is torch Adam's, lr: swapping one optimizer for the other changes early training."""
    generator = torch.Generator().manual_seed(6)
    device = _device(backend)
    beta1, beta2 = 0.9, 0.999
    param = torch.nn.Parameter(torch.zeros(40, 3, device=device))
    grad = torch.randn(40, 3, generator=generator).to(device)
    _publish(ScopedAdam([param], lr=LR, betas=(beta1, beta2), eps=EPS), param, grad)
    m, v = (1 - beta1) * grad, (1 - beta2) * grad.square()
    without_correction = -LR * m / (v.sqrt() + EPS)
    torch.testing.assert_close(param.detach(), -LR * grad.sign(), rtol=1e-5, atol=0)
    torch.testing.assert_close(without_correction, param.detach() * (1 - beta1) / (1 - beta2) ** 0.5, rtol=1e-5, atol=0)


def test_gsplat_densification_ops_keep_optimizer_consistent(backend):
    """duplicate/remove/split/reset_opa rewrite optimizer.state[p] and swap params; ScopedAdam keeps working and
    holds the swapped-in tensors (what the runtime's rebind checks)."""
    generator = torch.Generator().manual_seed(3)
    device = _device(backend)
    n = 40
    shapes = {
        "means": (3,), "scales": (3,), "quats": (4,), "opacities": (), "features_dc": (3,), "features_rest": (15, 3)
    }
    params = torch.nn.ParameterDict(
        {name: torch.nn.Parameter(torch.randn(n, *s, generator=generator).to(device)) for name, s in shapes.items()}
    )
    optimizers = {name: ScopedAdam([param], lr=LR, eps=EPS) for name, param in params.items()}

    def train_step(num_rows: int) -> None:
        visible = torch.rand(num_rows, generator=generator).to(device) < 0.5
        for name, param in params.items():
            _publish(optimizers[name], param, torch.randn(param.shape, generator=generator).to(device), visible)

    train_step(n)
    train_step(n)
    before = dict(params)
    duplicated = torch.arange(n, device=device) < 10
    gsplat_ops.duplicate(params, optimizers, {}, duplicated)
    n += 10
    for name, param in params.items():
        state = optimizers[name].state[param]
        assert optimizers[name].holds(param) and not optimizers[name].holds(before[name]) and param.shape[0] == n
        assert state["exp_avg"].shape == param.shape and torch.all(state["exp_avg"][-10:] == 0)
        assert state["step"].item() == 2
    train_step(n)

    removed = torch.arange(n, device=device) % 4 == 0
    gsplat_ops.remove(params, optimizers, {}, removed)
    n -= int(removed.sum())
    train_step(n)
    assert all(optimizers[name].state[p]["exp_avg_sq"].shape[0] == n for name, p in params.items())

    gsplat_ops.split(params, optimizers, {}, torch.arange(n, device=device) < 5)  # 5 rows become 10
    n += 5
    train_step(n)
    assert all(optimizers[name].state[p]["exp_avg"].shape == p.shape for name, p in params.items())

    gsplat_ops.reset_opa(params, optimizers, {}, value=0.01)
    opacity_state = optimizers["opacities"].state[params["opacities"]]
    assert torch.all(opacity_state["exp_avg"] == 0) and torch.all(opacity_state["exp_avg_sq"] == 0)
    train_step(n)
    assert all(optimizers[name].state[p]["step"].item() == 6 for name, p in params.items())
    assert all(torch.isfinite(p).all() for p in params.values())


def test_resumes_from_a_torch_adam_state_dict():
    generator = torch.Generator().manual_seed(4)
    param = torch.nn.Parameter(torch.randn(20, 3, generator=generator))
    adam = torch.optim.Adam([param], lr=LR, foreach=False)
    for _ in range(2):
        param.grad = torch.randn(20, 3, generator=generator)
        adam.step()
    resumed = torch.nn.Parameter(param.detach().clone())
    scoped = ScopedAdam([resumed], lr=LR)
    scoped.load_state_dict(copy.deepcopy(adam.state_dict()))  # as from a checkpoint: no shared moments
    grad = torch.randn(20, 3, generator=generator)
    param.grad = grad.clone()
    adam.step()

    def closure():
        """Sets the gradient step() then reads: the closure runs first, as torch's optimizers run it."""
        resumed.grad = grad.clone()
        return "loss"

    assert scoped.step(closure) == "loss"
    torch.testing.assert_close(resumed, param, rtol=0, atol=1e-6)
    assert scoped.state[resumed]["step"].item() == 3


def test_adam_rows_is_the_state_the_next_step_finds_at_the_given_rate():
    """What throughput-first's delay bound reads: the moments before the pending step, the step count that step
    will bias-correct with, and the rate the unit ran under (not the group's current one)."""
    a, b = torch.nn.Parameter(torch.zeros(8, 3)), torch.nn.Parameter(torch.zeros(8))
    scoped = ScopedAdam([{"params": [a], "lr": 0.1}, {"params": [b], "lr": 0.2}], betas=(0.8, 0.99))
    assert scoped.holds(b) and not scoped.holds(torch.nn.Parameter(b.detach().clone()))
    fresh = scoped.adam_rows(b, [0.3, 0.4])
    assert fresh.param.data_ptr() == b.data_ptr() and not fresh.param.requires_grad
    assert (fresh.exp_avg, fresh.exp_avg_sq, fresh.step) == (None, None, 1)
    assert (fresh.lr, fresh.beta1, fresh.beta2) == (0.4, 0.8, 0.99)
    for _ in range(2):
        scoped.step_rows({a: torch.ones(8, 3), b: torch.ones(8)}, None, None, [0.1, 0.2], advance_step=True)
    rows = scoped.adam_rows(b, [0.3, 0.4])
    assert rows.step == 3 and rows.lr == 0.4
    assert rows.exp_avg is scoped.state[b]["exp_avg"] and rows.exp_avg_sq is scoped.state[b]["exp_avg_sq"]
    assert scoped.adam_rows(a, [0.3, 0.4]).lr == 0.3


def test_config_builds_scoped_adam_and_rejects_unsupported_options():
    param = torch.nn.Parameter(torch.zeros(8, 3))
    optimizer = ScopedAdamOptimizerConfig(lr=1.6e-4, eps=1e-15).setup([param])
    assert isinstance(optimizer, ScopedAdam)
    assert optimizer.learning_rates() == [1.6e-4] and optimizer.param_groups[0]["eps"] == 1e-15
    with pytest.raises(ValueError, match="weight_decay"):
        ScopedAdamOptimizerConfig(weight_decay=0.1).setup([param])
    with pytest.raises(TypeError):
        ScopedAdam([param], lr=0.1, amsgrad=True)
    with pytest.raises(ValueError, match="betas"):
        ScopedAdam([param], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="lr"):
        ScopedAdam([param], lr=-1.0)


def test_step_rows_rejects_bad_arguments():
    param = torch.nn.Parameter(torch.zeros(8, 3))
    optimizer = ScopedAdam([param], lr=LR)
    grad = torch.zeros(8, 3)
    with pytest.raises(ValueError, match="2 learning rates for 1 parameter groups"):
        optimizer.step_rows({param: grad}, None, None, [LR, LR], advance_step=True)
    with pytest.raises(ValueError, match="before any step advanced"):
        optimizer.step_rows({param: grad}, None, None, [LR], advance_step=False)
    for rows, message in [
        (torch.ones(9, dtype=torch.bool), r"shape \(8,\)"),
        (torch.ones(8), r"shape \(8,\)"),
        (torch.zeros(2, dtype=torch.int32), "2 words but 8 Gaussians need 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            optimizer.step_rows({param: grad}, rows, None, [LR], advance_step=True)
    with pytest.raises(ValueError, match="sparse"):
        optimizer.step_rows({param: grad.to_sparse()}, None, None, [LR], advance_step=True)
