"""SelectiveAdam: equals torch Adam on full scopes, leaves hidden rows untouched, survives gsplat densification."""

from __future__ import annotations

import copy

import pytest
import torch
from gsplat.strategy import ops as gsplat_ops

from odin_ns.kernels import pack_bitmap
from odin_ns.kernels.dispatch import BACKEND_ENV_VAR, triton_interpreting
from odin_ns.optim import SelectiveAdam, SelectiveAdamOptimizerConfig

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
    """A SelectiveAdam param and an identical torch Adam param."""
    data = torch.randn(shape, generator=generator).to(device)
    return torch.nn.Parameter(data.clone()), torch.nn.Parameter(data.clone())


@pytest.mark.parametrize("shape", [(37,), (37, 3), (70, 15, 3)])
@pytest.mark.parametrize("full_scope", ["none", "mask", "bitmap"])
def test_full_scope_equals_torch_adam(backend, shape, full_scope):
    generator = torch.Generator().manual_seed(0)
    device = _device(backend)
    ours, theirs = _pair(shape, device, generator)
    selective = SelectiveAdam([ours], lr=LR, eps=EPS, betas=(0.8, 0.99))
    adam = torch.optim.Adam([theirs], lr=LR, eps=EPS, betas=(0.8, 0.99), foreach=False)
    everything = torch.ones(shape[0], dtype=torch.bool, device=device)
    selective.visible_rows = {"none": None, "mask": everything, "bitmap": pack_bitmap(everything)}[full_scope]
    for _ in range(6):
        grad = torch.randn(shape, generator=generator).to(device)
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        selective.step()
        adam.step()
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    for key in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(selective.state[ours][key], adam.state[theirs][key], rtol=0, atol=1e-6)
    assert selective.state[ours]["step"].item() == adam.state[theirs]["step"].item() == 6


def test_hidden_rows_untouched_and_step_count_global(backend):
    generator = torch.Generator().manual_seed(1)
    device = _device(backend)
    n = 45
    ours, theirs = _pair((n, 3), device, generator)
    selective = SelectiveAdam([ours], lr=LR, eps=EPS)
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
            key: selective.state[ours].get(key, torch.zeros_like(ours)).clone() for key in ("exp_avg", "exp_avg_sq")
        }
        param_before = ours.detach().clone()
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        selective.visible_rows = visible
        selective.step()
        adam.step()
        if step >= 3:
            late_rows.grad = grad[late].clone()
            late_adam.step()
        assert torch.equal(ours[~visible], param_before[~visible])
        for key, value in moments_before.items():
            assert torch.equal(selective.state[ours][key][~visible], value[~visible]), key
        torch.testing.assert_close(ours[always], theirs[always], rtol=0, atol=1e-6)
    torch.testing.assert_close(ours[late], late_rows.detach(), rtol=0, atol=1e-6)
    assert selective.state[ours]["step"].item() == 4


def test_chunked_publication_equals_one_step(backend):
    generator = torch.Generator().manual_seed(2)
    device = _device(backend)
    n = 100
    chunked, whole = _pair((n, 4), device, generator)
    chunked_opt, whole_opt = SelectiveAdam([chunked], lr=LR), SelectiveAdam([whole], lr=LR)
    rows = pack_bitmap(torch.rand(n, generator=generator).to(device) < 0.5)
    for _ in range(3):
        grad = torch.randn(n, 4, generator=generator).to(device)
        chunked.grad, whole.grad = grad.clone(), grad.clone()
        for lo, hi in ((0, 33), (33, 64), (64, 100)):
            chunked_opt.step_rows(rows, row_range=(lo, hi), advance_step=lo == 0)
        whole_opt.step_rows(rows)
    assert torch.equal(chunked, whole)
    assert chunked_opt.state[chunked]["step"].item() == whole_opt.state[whole]["step"].item() == 3


def test_gsplat_densification_ops_keep_optimizer_consistent(backend):
    """duplicate/remove/split/reset_opa rewrite optimizer.state[p] and swap params; SelectiveAdam keeps working."""
    generator = torch.Generator().manual_seed(3)
    device = _device(backend)
    n = 40
    shapes = {
        "means": (3,), "scales": (3,), "quats": (4,), "opacities": (), "features_dc": (3,), "features_rest": (15, 3)
    }
    params = torch.nn.ParameterDict(
        {name: torch.nn.Parameter(torch.randn(n, *s, generator=generator).to(device)) for name, s in shapes.items()}
    )
    optimizers = {name: SelectiveAdam([param], lr=LR, eps=EPS) for name, param in params.items()}

    def train_step(num_rows: int) -> None:
        visible = torch.rand(num_rows, generator=generator).to(device) < 0.5
        for name, param in params.items():
            param.grad = torch.randn(param.shape, generator=generator).to(device)
            optimizers[name].visible_rows = visible
            optimizers[name].step()

    train_step(n)
    train_step(n)
    duplicated = torch.arange(n, device=device) < 10
    gsplat_ops.duplicate(params, optimizers, {}, duplicated)
    n += 10
    for name, param in params.items():
        state = optimizers[name].state[param]
        assert optimizers[name].param_groups[0]["params"][0] is param and param.shape[0] == n
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
    selective = SelectiveAdam([resumed], lr=LR)
    selective.load_state_dict(copy.deepcopy(adam.state_dict()))  # as from a checkpoint: no shared moments
    grad = torch.randn(20, 3, generator=generator)
    param.grad, resumed.grad = grad.clone(), grad.clone()
    adam.step()
    selective.step()
    torch.testing.assert_close(resumed, param, rtol=0, atol=1e-6)
    assert selective.state[resumed]["step"].item() == 3


def test_config_builds_selective_adam_and_rejects_unsupported_options():
    param = torch.nn.Parameter(torch.zeros(8, 3))
    optimizer = SelectiveAdamOptimizerConfig(lr=1.6e-4, eps=1e-15).setup([param])
    assert isinstance(optimizer, SelectiveAdam)
    assert optimizer.param_groups[0]["lr"] == 1.6e-4 and optimizer.param_groups[0]["eps"] == 1e-15
    with pytest.raises(ValueError, match="weight_decay"):
        SelectiveAdamOptimizerConfig(weight_decay=0.1).setup([param])
    with pytest.raises(TypeError):
        SelectiveAdam([param], lr=0.1, amsgrad=True)
    with pytest.raises(ValueError, match="betas"):
        SelectiveAdam([param], betas=(0.9, 1.0))
    optimizer.visible_rows = torch.ones(9, dtype=torch.bool)
    param.grad = torch.zeros(8, 3)
    with pytest.raises(ValueError, match=r"shape \(8,\)"):
        optimizer.step()
