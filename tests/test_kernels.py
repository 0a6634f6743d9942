"""odin_ns.kernels against straightforward numpy references, for every backend that can run here.

The torch fallback always runs. The Triton kernels run on CUDA when present and, in CI, on CPU through Triton's
interpreter: ``test_triton_kernels_under_interpreter`` re-runs the Triton cases of this file, test_scoped_adam.py and
test_presized.py in a subprocess with ``TRITON_INTERPRET=1`` (it must be set before triton is imported, so it
cannot be toggled inside this process).
"""

from __future__ import annotations

import math
import os
import types
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import odin_ns.kernels as K
from odin_ns.kernels.dispatch import BACKEND_ENV_VAR, triton_available, triton_interpreting

# Awkward sizes: empty, below one word, word boundaries, not a multiple of any block size.
SIZES = [0, 1, 5, 31, 32, 33, 63, 1000, 4133]
FRACTIONS = [0.0, 0.01, 0.5, 1.0]  # empty scope, sparse, half, full
INTERPRETED_ROWS = 1000
"""Largest table the drift test steps through Triton's interpreter (CI's GPU code path, slow per block): 1,000 rows
of 59 columns span 116 Adam blocks and end inside one, which is what a bigger table adds."""

_CASES = [pytest.param(("torch", "cpu"), id="torch-cpu")]
if triton_available() and triton_interpreting():
    _CASES.append(pytest.param(("triton", "cpu"), id="triton-cpu"))
_gpu = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
_CASES += [pytest.param(("triton", "cuda"), id="triton-cuda", marks=_gpu)]
_CASES += [pytest.param(("torch", "cuda"), id="torch-cuda", marks=_gpu)]


@pytest.fixture(params=_CASES)
def case(request) -> tuple[str, str]:
    """(backend, device) pair the test runs on."""
    return request.param


def random_mask(rng: np.random.Generator, shape: tuple[int, ...], fraction: float) -> np.ndarray:
    return rng.random(shape) < fraction


def reference_pack(mask: np.ndarray) -> np.ndarray:
    """Bit i of word w = element 32*w+i of the OR over leading dims; int32 words."""
    flat = mask.reshape(-1, mask.shape[-1]).any(axis=0) if mask.size else np.zeros(mask.shape[-1], dtype=bool)
    padded = np.zeros(-(-flat.size // 32) * 32, dtype=np.uint64)
    padded[: flat.size] = flat
    words = (padded.reshape(-1, 32) << np.arange(32, dtype=np.uint64)).sum(axis=1)
    return words.astype(np.uint32).view(np.int32)


def to_device_bitmap(mask: np.ndarray, device: str) -> torch.Tensor:
    return torch.from_numpy(reference_pack(mask)).to(device)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("leading", [(), (3,), (0,)])
def test_pack_bitmap_matches_reference(case, n, leading):
    backend, device = case
    rng = np.random.default_rng(n)
    mask = random_mask(rng, (*leading, n), 0.3)
    packed = K.pack_bitmap(torch.from_numpy(mask).to(device), backend=backend)
    assert packed.dtype == torch.int32 and packed.shape == (K.num_words(n),)
    np.testing.assert_array_equal(packed.cpu().numpy(), reference_pack(mask))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_set_algebra_and_counts(case, n, fraction):
    backend, device = case
    rng = np.random.default_rng(n + 7)
    read, update = random_mask(rng, (n,), fraction), random_mask(rng, (n,), 0.5)
    a, b = to_device_bitmap(read, device), to_device_bitmap(update, device)
    expected = {"or": read | update, "and": read & update, "andnot": read & ~update}
    for op, fn in (("or", K.bitmap_or), ("and", K.bitmap_and), ("andnot", K.bitmap_andnot)):
        np.testing.assert_array_equal(fn(a, b, backend=backend).cpu().numpy(), reference_pack(expected[op]), err_msg=op)

    count = K.bitmap_count(a, backend=backend)
    shared = K.bitmap_and_count(a, b, backend=backend)
    ratio = K.overlap_ratio(a, b, backend=backend)
    for value in (count, shared, ratio):
        assert value.dim() == 0 and value.device == a.device
    assert count.dtype == shared.dtype == torch.int64 and ratio.dtype == torch.float32
    assert count.item() == read.sum()
    assert shared.item() == (read & update).sum()
    expected_ratio = (read & update).sum() / read.sum() if read.any() else 0.0
    assert ratio.item() == pytest.approx(expected_ratio, abs=1e-6)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_indices_and_mask(case, n, fraction):
    backend, device = case
    mask = random_mask(np.random.default_rng(n + 11), (n,), fraction)
    bitmap = to_device_bitmap(mask, device)
    indices = K.bitmap_indices(bitmap, n, backend=backend)
    assert indices.dtype == torch.int64
    np.testing.assert_array_equal(indices.cpu().numpy(), np.flatnonzero(mask))
    np.testing.assert_array_equal(K.bitmap_to_mask(bitmap, n, backend=backend).cpu().numpy(), mask)


def reference_adam(param, grad, exp_avg, exp_avg_sq, rows, lr, beta1, beta2, eps, step):
    """Textbook Adam in float64 on the selected rows only (returns new arrays)."""
    p, g, m, v = (x.astype(np.float64).copy() for x in (param, grad, exp_avg, exp_avg_sq))
    m[rows] = beta1 * m[rows] + (1 - beta1) * g[rows]
    v[rows] = beta2 * v[rows] + (1 - beta2) * g[rows] ** 2
    bias_correction1, bias_correction2 = 1 - beta1**step, 1 - beta2**step
    p[rows] -= (lr / bias_correction1) * m[rows] / (np.sqrt(v[rows]) / np.sqrt(bias_correction2) + eps)
    return p, m, v


@pytest.mark.parametrize("n", [1, 31, 33, 1000])
@pytest.mark.parametrize("row_shape", [(), (3,), (15, 3)])
@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("row_range", [None, "middle"])
def test_selective_adam_step_matches_reference(case, n, row_shape, fraction, row_range):
    backend, device = case
    rng = np.random.default_rng(n * 3 + len(row_shape))
    shape = (n, *row_shape)
    param, grad, exp_avg = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    exp_avg_sq = rng.random(shape).astype(np.float32)
    selected = random_mask(rng, (n,), fraction)
    lo, hi = (n // 3, n - n // 4) if row_range == "middle" else (0, n)
    updated = selected.copy()
    updated[:lo] = updated[hi:] = False
    tensors = [torch.from_numpy(x.copy()).to(device) for x in (param, grad, exp_avg, exp_avg_sq)]
    K.selective_adam_step(
        *tensors, to_device_bitmap(selected, device), lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, step=4,
        row_range=None if row_range is None else (lo, hi), backend=backend,
    )
    expected = reference_adam(param, grad, exp_avg, exp_avg_sq, updated, 0.01, 0.9, 0.999, 1e-8, 4)
    for name, got, before, want in zip(("param", "exp_avg", "exp_avg_sq"), tensors[:1] + tensors[2:],
                                       (param, exp_avg, exp_avg_sq), expected):
        got = got.cpu().numpy()
        np.testing.assert_array_equal(got[~updated], before[~updated], err_msg=f"{name}: hidden rows changed")
        np.testing.assert_allclose(got[updated], want[updated], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("n", [1, 33, 1000])
@pytest.mark.parametrize("fraction", [0.01, 1.0])
@pytest.mark.parametrize("row_range", [None, "middle"])
def test_packed_adam_step_equals_each_group_stepped_alone(case, n, fraction, row_range):
    """A packed [N, 59] table (splatfacto's groups side by side, each with its own learning rate and eps) stepped in
    one call is bitwise the table whose groups were each stepped by ``selective_adam_step`` on their own."""
    backend, device = case
    rng = np.random.default_rng(n + 11)
    columns = _splatfacto_columns(scale=1.0)
    arrays = [rng.standard_normal((n, 59)).astype(np.float32) for _ in range(3)] + [rng.random((n, 59)).astype(np.float32)]
    rows = to_device_bitmap(random_mask(rng, (n,), fraction), device)
    row_range = None if row_range is None else (n // 3, n - n // 4)
    packed = [torch.from_numpy(a.copy()).to(device) for a in arrays]
    K.packed_adam_step(*packed, rows, columns, 0.9, 0.999, step=3, row_range=row_range, backend=backend)
    for group in columns:
        alone = [torch.from_numpy(a[:, group.lo : group.hi].copy()).to(device) for a in arrays]
        K.selective_adam_step(*alone, rows, group.lr, 0.9, 0.999, group.eps, 3, row_range=row_range, backend=backend)
        for got, want in zip(packed, alone):
            assert torch.equal(got[:, group.lo : group.hi], want), f"columns {group.lo}-{group.hi} differ"


@pytest.mark.parametrize("n", [1, 33, 1000, 4133])
@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.5, 1.0])
@pytest.mark.parametrize("row_range", [None, "middle"])
def test_drift_of_the_complement_then_the_scope_is_bitwise_the_dense_step(case, n, fraction, row_range):
    """Dense Adam split in two: a zero-gradient step (no gradient read) over the rows outside a scope, then the
    scope's rows with their gradients, ends bitwise where one dense step over a gradient that is zero outside the
    scope ends, and the drift leaves the scope's rows untouched."""
    backend, device = case
    if (backend, device) == ("triton", "cpu") and n > INTERPRETED_ROWS:
        pytest.skip(f"Triton's interpreter runs many blocks at {INTERPRETED_ROWS} rows already; compiled kernels "
                    "run every size")
    rng = np.random.default_rng(n + 29)
    columns = _splatfacto_columns(scale=1.0)
    mask = random_mask(rng, (n,), fraction)
    arrays = [rng.standard_normal((n, 59)).astype(np.float32) for _ in range(2)] + [rng.random((n, 59)).astype(np.float32)]
    grad = rng.standard_normal((n, 59)).astype(np.float32) * mask[:, None]
    rows = to_device_bitmap(mask, device)
    row_range = None if row_range is None else (n // 3, n - n // 4)
    dense = [torch.from_numpy(a.copy()).to(device) for a in arrays]
    split = [torch.from_numpy(a.copy()).to(device) for a in arrays]
    K.packed_adam_step(dense[0], torch.from_numpy(grad).to(device), *dense[1:], None, columns, 0.9, 0.999, 7,
                       row_range, backend=backend)
    before = [t.clone() for t in split]
    K.packed_adam_step(split[0], None, *split[1:], rows, columns, 0.9, 0.999, 7, row_range, backend=backend,
                       complement=True)
    scope = torch.from_numpy(mask).to(device)
    for got, was in zip(split, before):
        assert torch.equal(got[scope], was[scope]), "the drift wrote a row of the scope"
    K.packed_adam_step(split[0], torch.from_numpy(grad).to(device), *split[1:], rows, columns, 0.9, 0.999, 7,
                       row_range, backend=backend)
    for got, want in zip(split, dense):
        assert torch.equal(got, want)


@pytest.mark.parametrize("n", [1, 97])
@pytest.mark.parametrize("fraction", [None, 0.3])
def test_packed_adam_step_from_device_values_is_the_scalar_step(case, n, fraction):
    """The whole-table step whose step-dependent values come from a device tensor (what a captured unit replays) is
    bitwise the step taking them as host scalars, dense and over a rows bitmap (rows outside it untouched): with
    Triton, and with torch on the CPU; torch on CUDA rounds its scalar operands differently (within fp32 rounding)."""
    backend, device = case
    rng = np.random.default_rng(n + 5)
    columns = _splatfacto_columns(scale=1.0)
    arrays = [rng.standard_normal((n, 59)).astype(np.float32) for _ in range(3)] + [rng.random((n, 59)).astype(np.float32)]
    rows = None if fraction is None else to_device_bitmap(random_mask(rng, (n,), fraction), device)
    scalar = [torch.from_numpy(a.copy()).to(device) for a in arrays]
    from_device = [torch.from_numpy(a.copy()).to(device) for a in arrays]
    for step in (1, 2, 9):
        K.packed_adam_step(*scalar, rows, columns, 0.9, 0.999, step, backend=backend)
        hyper = K.packed_adam_hyper(columns, 59, 0.9, 0.999, step).to(device)
        K.packed_adam_step_from(*from_device, rows, hyper, 0.9, 0.999, backend=backend)
    for got, want in zip(from_device, scalar):
        if backend == "torch" and device == "cuda":
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(got, want)
    if rows is not None:
        unselected = ~K.bitmap_to_mask(rows, n)
        assert torch.equal(from_device[0][unselected], torch.from_numpy(arrays[0]).to(device)[unselected])


def _splatfacto_columns(scale: float) -> list:
    widths = (3, 3, 4, 3, 45, 1)
    edges = np.cumsum((0, *widths))
    rates = (1.6e-4, 5e-3, 1e-3, 2.5e-3, 1.25e-4, 0.05)
    return [K.ColumnGroup(int(lo), int(hi), lr * scale, eps) for lo, hi, lr, eps in
            zip(edges[:-1], edges[1:], rates, (1e-15, 1e-15, 1e-8, 1e-15, 1e-6, 1e-15))]


@pytest.mark.parametrize("selective", [True, False], ids=["selective", "dense"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=_gpu)])
def test_packed_adam_replayed_from_a_cuda_graph_is_bitwise_the_launched_step(device, selective):
    """A run of steps through ``PackedAdam(capture=True)`` (a graph captured at the second launch over the same
    operands and replayed after, each replay with that step's learning rates and bias corrections) ends bitwise
    where launching every step ends; new operands (another gradient table, another row range) get their own graph.
    On the CPU nothing is captured and every step is launched."""
    n, rng = 3001, np.random.default_rng(5)
    arrays = [rng.standard_normal((n, 59)).astype(np.float32) for _ in range(2)] + [rng.random((n, 59)).astype(np.float32)]
    launched = [torch.from_numpy(a.copy()).to(device) for a in arrays]
    replayed = [torch.from_numpy(a.copy()).to(device) for a in arrays]
    rows = to_device_bitmap(random_mask(rng, (n,), 0.3), device) if selective else None
    grads = [torch.from_numpy(rng.standard_normal((n, 59)).astype(np.float32)).to(device) for _ in range(2)]
    adam = K.PackedAdam(capture=True)
    plan = [(grads[0], (0, n))] * 4 + [(grads[1], (0, n))] * 3 + [(grads[1], (100, 2000))] * 2
    for step, (grad, row_range) in enumerate(plan, start=1):
        grad.mul_(0.9).add_(0.01 * step)  # in place: the captured graph must read this step's gradients
        columns = _splatfacto_columns(scale=0.97**step)  # a scheduler moving the learning rates
        K.packed_adam_step(launched[0], grad, *launched[1:], rows, columns, 0.9, 0.999, step, row_range)
        adam.step(replayed[0], grad, *replayed[1:], rows, columns, 0.9, 0.999, step, row_range)
        for got, want in zip(replayed, launched):
            assert torch.equal(got, want), f"step {step} differs"
    expected = (3, 9 - 3) if device == "cuda" else (0, 0)  # each operand set: launched once, then captured
    assert (adam.captures, adam.replays) == expected
    off = K.PackedAdam(capture=False)
    for step in (1, 2, 3):
        off.step(replayed[0], grads[0], *replayed[1:], rows, _splatfacto_columns(1.0), 0.9, 0.999, step, (0, n))
    assert (off.captures, off.replays) == (0, 0)


@pytest.mark.parametrize("n", [0, 1, 33, 4133])
def test_pack_columns_is_torch_cat_of_the_rows(case, n):
    """Strided and contiguous row-aligned tensors side by side in one table, as ``torch.cat`` puts them."""
    backend, device = case
    generator = torch.Generator().manual_seed(n)
    colors = torch.randn(n, 16, 3, generator=generator).to(device)
    tensors = [torch.randn(n, 3, generator=generator).to(device), colors[:, :1], colors[:, 1:],
               torch.randn(n, generator=generator).to(device)]
    table = K.pack_columns(tensors, backend=backend)
    assert table.shape == (n, 52) and table.is_contiguous()
    assert torch.equal(table, torch.cat([t.reshape(n, math.prod(t.shape[1:])) for t in tensors], dim=1))


def test_packed_adam_stops_capturing_where_the_operands_keep_changing(monkeypatch):
    """Row ranges cycling through more combinations than graphs are kept would make every launch a capture; once
    ``JUDGED_AFTER`` captures are made, another is made only while the replays number four per capture. Where they repeat (a
    sync run's one range) captures stay rare and every later step replays. The capture itself is stood in for (it
    needs CUDA): a graph whose replay launches the step."""
    def stand_in(self, param, grad, exp_avg, exp_avg_sq, rows, complement, columns, beta1, beta2, step, row_range, key):
        hyper = torch.empty(2 * param.shape[1] + 1)
        graph = types.SimpleNamespace(replay=lambda: K.packed_adam_step(
            param, grad, exp_avg, exp_avg_sq, rows, columns, beta1, beta2, self._step_now, row_range))
        self.captures += 1
        self._graphs[key] = (graph, hyper)
        return self._graphs[key]

    def key(self, param, grad, exp_avg, exp_avg_sq, rows, complement, beta1, beta2, row_range):
        return tuple(row_range)

    monkeypatch.setattr(K.PackedAdam, "_captured", stand_in)
    monkeypatch.setattr(K.PackedAdam, "_key", key)
    n, columns = 64, _splatfacto_columns(1.0)
    tables = [torch.randn(n, 59), torch.randn(n, 59), torch.zeros(n, 59), torch.zeros(n, 59)]

    def run(ranges: list[tuple[int, int]]) -> K.PackedAdam:
        adam = K.PackedAdam(capture=True)
        for step, row_range in enumerate(ranges, start=1):
            adam._step_now = step
            adam.step(tables[0], tables[1], *tables[2:], None, columns, 0.9, 0.999, step, row_range)
        return adam

    cycling = run([(lo, lo + 8) for _ in range(10) for lo in range(48)])  # 48 ranges in turn, 8 graphs kept
    judged = K.PackedAdam.JUDGED_AFTER
    assert judged < cycling.captures <= cycling.replays // K.PackedAdam.REPLAYS_PER_CAPTURE + 1
    assert cycling.captures < 480 // 10  # without the rule: a capture at every launch after the first round
    repeating = run([(0, n)] * 100 + [(0, 32), (32, n)] * 50)
    assert (repeating.captures, repeating.replays) == (3, 99 + 2 * 49)


def test_packed_adam_step_rejects_columns_that_do_not_tile_the_table():
    table = torch.zeros(4, 6)
    with pytest.raises(ValueError, match="do not tile the 6 columns"):
        K.packed_adam_step(table, table.clone(), table.clone(), table.clone(), None, [K.ColumnGroup(0, 4, 0.1, 1e-8)], 0.9, 0.99, 1)


@pytest.mark.parametrize("n", [0, 1, 33, 1000])
@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_gather_scatter_rows(case, n, fraction, index_dtype):
    backend, device = case
    rng = np.random.default_rng(n + 5)
    # The grads of a splatfacto model: means, scales, quats, opacities, features_dc, features_rest.
    arrays = [rng.standard_normal((n, *s)).astype(np.float32) for s in ((3,), (3,), (4,), (1,), (3,), (15, 3))]
    rows = np.flatnonzero(random_mask(rng, (n,), fraction))
    rng.shuffle(rows)  # scatter/gather must not rely on sorted indices
    tensors = [torch.from_numpy(a.copy()).to(device) for a in arrays]
    indices = torch.from_numpy(rows).to(device=device, dtype=index_dtype)

    buf = K.gather_rows_packed(tensors, indices, backend=backend)
    expected = np.concatenate([a[rows].reshape(len(rows), int(np.prod(a.shape[1:]))) for a in arrays], axis=1)
    assert buf.shape == expected.shape
    np.testing.assert_array_equal(buf.cpu().numpy(), expected)

    new_rows = rng.standard_normal(expected.shape).astype(np.float32)
    K.scatter_rows_packed(tensors, indices, torch.from_numpy(new_rows).to(device), backend=backend)
    column = 0
    for array, tensor in zip(arrays, tensors):
        width = int(np.prod(array.shape[1:]))
        want = array.copy()
        want[rows] = new_rows[:, column : column + width].reshape(len(rows), *array.shape[1:])
        np.testing.assert_array_equal(tensor.cpu().numpy(), want)
        column += width


def _rectangles_scene(n_cameras: int, n_gaussians: int, seed: int):
    """Screen-space Gaussians over a 13 x 8 tile grid: some culled (radius 0), many clipped at the grid's edges (means
    off screen, radii up to 60 px), one covering the whole grid (the longest run), and a negative depth (its bits
    sign-extend into the key, as in gsplat's kernel)."""
    generator = torch.Generator().manual_seed(seed)
    means2d = torch.rand(n_cameras, n_gaussians, 2, generator=generator) * torch.tensor([288.0, 208.0]) - 40.0
    radii = torch.randint(0, 60, (n_cameras, n_gaussians), generator=generator, dtype=torch.int32)
    radii[:, ::5] = 0
    radii[0, 1], means2d[0, 1] = 400, torch.tensor([100.0, 60.0])
    depths = torch.rand(n_cameras, n_gaussians, generator=generator) * 5 + 0.1
    depths[:, ::7] = 2.5
    depths[-1, 3] = -1.5
    return means2d, radii, depths


def reference_fill(lowest, span, counts, depths, tile_width, tile_bits, padding_key, capacity):
    """Each Gaussian's rectangle, row-major, Gaussian after Gaussian, cut at ``capacity``, then padding."""
    n_gaussians = depths.shape[1]
    depth_bits = depths.reshape(-1).view(torch.int32).tolist()
    keys, ids = [], []
    for i, (count, (x0, y0), (width, height)) in enumerate(zip(counts.tolist(), lowest.tolist(), span.tolist())):
        if count == 0:
            continue
        assert count == width * height
        for y in range(y0, y0 + height):
            for x in range(x0, x0 + width):
                keys.append(((i // n_gaussians) << (32 + tile_bits)) | ((y * tile_width + x) << 32) | depth_bits[i])
                ids.append(i)
    keys, ids = keys[:capacity], ids[:capacity]
    padding = capacity - len(keys)
    return torch.tensor(keys + [padding_key] * padding), torch.tensor(ids + [0] * padding, dtype=torch.int32)


def test_tile_intersection_fill_matches_reference(case):
    """The unsorted presized intersection slots (odin_ns.rendering.presized) for several cameras, culled Gaussians and
    rectangles clipped at the grid's edges, into capacities that cut a rectangle in the middle, end exactly at the
    count, or leave padding (over several programs' worth of slots): the reference's keys and ids slot for slot, and
    on Triton (which computes the rectangles and counts in its own launches) bitwise the torch path's counts and
    slots."""
    from odin_ns.kernels.isect import tile_rectangles
    from odin_ns.rendering.presized import tile_key_bits

    backend, device = case
    tile_width, tile_height, n_cameras = 13, 8, 3
    means2d, radii, depths = (t.to(device) for t in _rectangles_scene(n_cameras, 300, seed=1))
    lowest, span, counts = tile_rectangles(means2d.cpu(), radii.cpu(), 16, tile_width, tile_height)
    got_counts = K.tile_intersection_counts(means2d, radii, 16, tile_width, tile_height, backend=backend)
    assert got_counts.dtype == torch.int64 and torch.equal(got_counts.cpu(), counts)
    ends = torch.cumsum(got_counts, 0)
    assert int(counts[1]) == tile_width * tile_height, "one Gaussian covers the whole grid"
    assert bool(((counts == 0) & (radii.cpu().reshape(-1) > 0)).any()), "some Gaussians are off the grid altogether"
    assert bool(((lowest == 0) & (counts > 0)[:, None]).any()) and bool(((lowest + span)[:, 0] == tile_width).any())
    tile_bits = tile_key_bits(n_cameras, tile_width, tile_height)
    padding_key = ((n_cameras - 1) << (32 + tile_bits)) | ((tile_width * (tile_height + 1) - 1) << 32)
    total = int(ends[-1])
    cut = int(torch.nonzero(counts >= 3)[len(counts) // 2])  # a capacity ending inside this Gaussian's rectangle
    for capacity in (1, int(ends[cut] - counts[cut]) + 2, total, total + 1, total + 5000):
        args = (means2d, radii, ends, depths, 16, tile_width, tile_height, tile_bits, padding_key, capacity)
        keys, flat_ids = K.fill_tile_intersections(*args, backend=backend)
        assert keys.dtype == torch.int64 and flat_ids.dtype == torch.int32
        assert keys.shape == flat_ids.shape == (capacity,)
        want_keys, want_ids = reference_fill(lowest, span, counts, depths.cpu(), tile_width, tile_bits, padding_key,
                                             capacity)
        assert torch.equal(keys.cpu(), want_keys), f"capacity {capacity}: keys"
        assert torch.equal(flat_ids.cpu(), want_ids), f"capacity {capacity}: flat ids"
        if backend == "triton":
            torch_keys, torch_ids = K.fill_tile_intersections(*args, backend="torch")
            assert torch.equal(keys, torch_keys) and torch.equal(flat_ids, torch_ids), f"capacity {capacity}"


def test_nonfinite_columns_record_the_first_unit_of_nan_and_inf_only(case):
    """Columns holding NaN, +Inf or -Inf in any row (over several programs' worth of rows) get the unit recorded,
    once: a later unit leaves the record; finite values at float32's limits, whose sums would overflow, are never
    recorded; on Triton bitwise the torch path's record."""
    backend, device = case
    table = torch.zeros(1000, 59, device=device)
    table[:, 1] = 3e38
    table[::2, 2] = -3.4e38
    record = torch.full((59,), K.NEVER, dtype=torch.int64, device=device)
    record = K.record_nonfinite_columns(table, record, 3, backend=backend)
    assert (record == K.NEVER).all()
    table[777, 5], table[0, 40], table[999, 58] = float("nan"), float("inf"), -float("inf")
    record = K.record_nonfinite_columns(table, record, 4, backend=backend)
    table[500, 6] = float("nan")
    record = K.record_nonfinite_columns(table, record, 9, backend=backend)
    want = torch.full((59,), K.NEVER, dtype=torch.int64)
    want[[5, 40, 58]], want[6] = 4, 9
    assert torch.equal(record.cpu(), want)
    assert K.record_nonfinite_columns(table[:0], record, 10, backend=backend) is record  # no rows: nothing to read
    table[3, 7] = float("nan")  # the unit read from the device, as a captured unit's record reads it
    record = K.record_nonfinite_columns(table, record, torch.tensor(12, device=device), backend=backend)
    want[7] = 12
    assert torch.equal(record.cpu(), want)


def test_rows_outside_their_predicted_buckets_record_the_unit(case):
    """The predicted-scope guard's record: unchanged while every row lies in a selected bucket (the last bucket
    partial, several programs' worth of rows), lowered to the unit when one row escapes, and kept at the first
    unit afterwards; on Triton bitwise the torch path's record."""
    backend, device = case
    rows_per_bucket, n_rows = 1024, 9000  # 9 buckets, the last one holding 808 rows
    selected = torch.tensor([True, False, True, True, False, False, True, False, True], device=device)
    rows = torch.zeros(n_rows, dtype=torch.bool, device=device)
    rows[[5, 2048, 3100, 6200, 8999]] = True  # buckets 0, 2, 3, 6 and the last
    record = torch.full((1,), K.NEVER, dtype=torch.int64, device=device)
    record = K.record_rows_outside_buckets(rows, selected, rows_per_bucket, record, 3, backend=backend)
    assert int(record) == K.NEVER
    rows[5 * rows_per_bucket + 17] = True  # bucket 5 is not selected
    record = K.record_rows_outside_buckets(rows, selected, rows_per_bucket, record, 4, backend=backend)
    record = K.record_rows_outside_buckets(rows, selected, rows_per_bucket, record, 8, backend=backend)
    assert int(record) == 4
    with pytest.raises(ValueError, match="do not cover"):
        K.record_rows_outside_buckets(rows, selected[:8], rows_per_bucket, record, 9, backend=backend)


def test_bad_inputs_raise_clear_errors():
    bitmap = K.pack_bitmap(torch.ones(40, dtype=torch.bool))
    with pytest.raises(ValueError, match="bitmaps differ"):
        K.bitmap_or(bitmap, K.pack_bitmap(torch.ones(70, dtype=torch.bool)))
    with pytest.raises(ValueError, match="int32 bitmap"):
        K.bitmap_count(bitmap.to(torch.int64))
    with pytest.raises(ValueError, match="Gaussians need"):
        K.bitmap_indices(bitmap, 100)
    with pytest.raises(ValueError, match="bool mask"):
        K.pack_bitmap(torch.ones(40))
    with pytest.raises(ValueError, match="backend must be"):
        K.bitmap_count(bitmap, backend="cuda")
    param = torch.zeros(40, 3)
    with pytest.raises(ValueError, match="row_range"):
        K.selective_adam_step(param, param, param.clone(), param.clone(), bitmap, 0.1, 0.9, 0.99, 1e-8, 1, (5, 41))
    with pytest.raises(ValueError, match="grad is"):
        K.selective_adam_step(param, param[:, :2], param.clone(), param.clone(), bitmap, 0.1, 0.9, 0.99, 1e-8, 1)
    with pytest.raises(ValueError, match="buf is"):
        K.scatter_rows_packed([param], torch.arange(4), torch.zeros(3, 3))


def test_backend_selection(monkeypatch):
    cpu_tensor = torch.zeros(1, dtype=torch.int32)
    monkeypatch.setenv(BACKEND_ENV_VAR, "torch")
    assert K.resolve_backend("auto", cpu_tensor) == "torch"
    monkeypatch.setenv(BACKEND_ENV_VAR, "gpu")
    with pytest.raises(ValueError, match=BACKEND_ENV_VAR):
        K.resolve_backend("auto", cpu_tensor)
    monkeypatch.delenv(BACKEND_ENV_VAR)
    if not triton_interpreting():
        assert K.resolve_backend("auto", cpu_tensor) == "torch"
        with pytest.raises(ValueError, match="TRITON_INTERPRET"):
            K.resolve_backend("triton", cpu_tensor)


@pytest.mark.skipif(not triton_available() or triton_interpreting(), reason="needs triton; runs the interpreter itself")
@pytest.mark.skipif(torch.cuda.is_available(), reason="the compiled Triton kernels run on CUDA here")
def test_triton_kernels_under_interpreter():
    """Run the Triton cases of the kernel, optimizer and presized-intersection tests through Triton's interpreter
    (CI's GPU code path)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}  # the interpreter runs on CPU tensors
    env.pop(BACKEND_ENV_VAR, None)
    others = ("test_scoped_adam.py", "test_presized.py")
    test_files = [__file__, *(str(Path(__file__).with_name(name)) for name in others)]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *test_files, "-k", "triton"],
        env=env, capture_output=True, text=True, cwd=Path(__file__).parent.parent, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


def _poison_cuda_allocator() -> None:
    """Fill cached CUDA blocks with 0xFF (NaN for floats, -1 for ints) so that outputs a kernel allocates with
    torch.empty, and then fails to write, start as garbage rather than as leftover zeros or correct values."""
    small = [torch.full((2**19,), 0xFF, dtype=torch.uint8, device="cuda") for _ in range(64)]  # small-block pool
    large = torch.full((2**28,), 0xFF, dtype=torch.uint8, device="cuda")
    del small, large


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_triton_matches_fallback_on_gpu(fraction):
    """Triton vs the torch fallback on fresh random data at a size spanning many blocks; bitmaps bit-exact."""
    seed = int.from_bytes(os.urandom(4), "little")
    generator = torch.Generator(device="cuda").manual_seed(seed)
    context = f"seed={seed}"
    n = 1_000_003

    def run_both(fn):
        results = []
        for backend in ("triton", "torch"):
            _poison_cuda_allocator()
            results.append(fn(backend))
        return results

    visibility = torch.rand(3, n, device="cuda", generator=generator) < fraction / 3
    update = torch.rand(n, device="cuda", generator=generator) < 0.5
    ours, reference = run_both(lambda b: K.pack_bitmap(visibility, backend=b))
    assert torch.equal(ours, reference), context
    read, written = ours, K.pack_bitmap(update)
    for fn in (K.bitmap_or, K.bitmap_and, K.bitmap_andnot, K.bitmap_and_count):
        ours, reference = run_both(lambda b: fn(read, written, backend=b))
        assert torch.equal(ours, reference), f"{fn.__name__} {context}"
    ours, reference = run_both(lambda b: K.bitmap_count(read, backend=b))
    assert torch.equal(ours, reference), context
    ours, reference = run_both(lambda b: K.overlap_ratio(read, written, backend=b))
    torch.testing.assert_close(ours, reference, msg=context)
    for fn in (K.bitmap_indices, K.bitmap_to_mask):
        ours, reference = run_both(lambda b: fn(read, n, backend=b))
        assert torch.equal(ours, reference), f"{fn.__name__} {context}"

    # Publication: hidden rows bit-identical, scoped rows within float32 rounding of the fallback.
    shape = (n, 15, 3)
    state = [torch.randn(shape, device="cuda", generator=generator) for _ in range(3)]
    state.append(torch.rand(shape, device="cuda", generator=generator))
    ours, reference = run_both(lambda b: _adam_result(state, read, backend=b))
    hidden = ~K.bitmap_to_mask(read, n)
    for got, want, before in zip(ours, reference, state[:1] + state[2:]):
        assert torch.equal(got[hidden], before[hidden]), context
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=context)

    # Compaction: gathered buffers bit-exact; scattered rows poisoned with NaN first so skipped rows show.
    indices = K.bitmap_indices(read, n)[torch.randperm(int(K.bitmap_count(read)), device="cuda", generator=generator)]
    grads = [torch.randn(n, *s, device="cuda", generator=generator) for s in ((3,), (4,), (1,), (15, 3))]
    ours, reference = run_both(lambda b: K.gather_rows_packed(grads, indices, backend=b))
    assert torch.equal(ours, reference), context
    new_rows = torch.randn_like(ours)
    ours, reference = run_both(lambda b: _scatter_result(grads, indices, new_rows, backend=b))
    for got, want in zip(ours, reference):
        assert torch.equal(got, want), context


def _adam_result(state: list[torch.Tensor], rows: torch.Tensor, backend: str) -> list[torch.Tensor]:
    param, grad, exp_avg, exp_avg_sq = (t.clone() for t in state)
    K.selective_adam_step(param, grad, exp_avg, exp_avg_sq, rows, 1e-3, 0.9, 0.999, 1e-15, 7, backend=backend)
    return [param, exp_avg, exp_avg_sq]


def _scatter_result(tensors: list[torch.Tensor], indices: torch.Tensor, buf: torch.Tensor, backend: str):
    targets = [t.clone() for t in tensors]
    for target in targets:
        target[indices] = float("nan")
    K.scatter_rows_packed(targets, indices, buf, backend=backend)
    return targets
