"""A steady-state training step reads nothing from the device on the host.

On a GPU every such read (``.item()``, ``.tolist()``, ``bool(tensor)``, ``nonzero`` and boolean-mask indexing, whose
output size the host must learn) stalls the host until the GPU queue drains, so host work and GPU work add up
instead of overlapping. On the CPU the same operations are visible to a dispatch hook: this test trains
odin-splatfacto in-process for a few steps and counts them in a step that neither logs, evaluates, saves nor changes
the Gaussians' structure. Two kinds are not the step's own and are left out: the rasterizer's internals (gsplat
sizes its tile intersections on the host, inside its CUDA extension; the CPU reference renderer does likewise) and
reads of the optimizers' step counters, which torch keeps on the host by design. On CUDA, with the tile
intersections sized ahead (``odin_ns.rendering.presized``), a second test counts the whole step, rasterizer included,
with torch's CUDA sync debug mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from host_read_counter import HostReadCounter
from odin_bench.host_ops import OpCounter as OperationCounter
from odin_bench.host_waits import count_host_syncs as cuda_sync_sites
from odin_bench.step_ops import rasterizer_calls_flagged
from odin_ns.in_process import in_process_trainer, run_step


@pytest.mark.slow
def test_a_steady_step_reads_nothing_from_the_device(tiny_scene: Path, tmp_path: Path):
    trainer = in_process_trainer(tiny_scene, tmp_path, "cpu", warmup_length=10_000)  # no refine in these steps
    for step in range(1, 6):
        run_step(trainer, step)
    step_counters = {
        state["step"].data_ptr()
        for optimizer in trainer.optimizers.optimizers.values()
        for state in optimizer.state.values()
        if "step" in state
    }
    counter = HostReadCounter(step_counters)
    with rasterizer_calls_flagged(counter, "paused"), counter:
        for step in range(6, 9):
            run_step(trainer, step)
    assert not counter.reads, "host reads in a steady step:\n" + "\n".join(
        f"{count} x {name} at {where}" for (name, where), count in counter.reads.most_common()
    )
    with counter:  # the hook does see reads: the rasterizer's own, counted when not paused
        run_step(trainer, 9)
    assert counter.reads


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (gsplat's rasterizer)")
def test_a_steady_cuda_step_with_presized_intersections_synchronises_nothing(tiny_scene: Path, tmp_path: Path):
    """The whole step on the GPU, rasterizer included, under torch's CUDA sync debug mode: with the tile
    intersections sized ahead, a steady step (its unit replayed from the graph captured for its shape) that neither
    logs, evaluates, saves nor refines makes no host synchronisation (without them, gsplat's intersection count is
    one per step; capturing a unit checks the capture on the host, once per shape)."""
    trainer = in_process_trainer(tiny_scene, tmp_path, "cuda", warmup_length=10_000, presized_intersections=True)
    views = len(trainer.pipeline.datamanager.train_dataset)
    step = 1
    while True:  # every view counted, then the unit's shape captured and replayed
        run_step(trainer, step)
        step += 1
        graphs = trainer.pipeline.runtime.graphs  # the runtime is built by the first step
        if step >= views + 4 and graphs.stats.replayed > 0:
            break
        assert step < 3 * views + 8, graphs.stats
    torch.cuda.synchronize()
    replayed = graphs.stats.replayed
    sites = cuda_sync_sites(trainer, range(step, step + 3))
    assert not sites, "host synchronisations in a steady step:\n" + "\n".join(
        f"{count} x {site}" for site, count in sites.most_common())
    assert graphs.stats.replayed == replayed + 3, graphs.stats


@pytest.mark.parametrize("scale", [1.0, 0.5, 0.25])
def test_intrinsics_built_on_the_device_equal_nerfstudios(scale: float):
    from nerfstudio.cameras.cameras import Cameras

    from odin_ns.rendering import scaled_intrinsics

    def cameras() -> Cameras:
        return Cameras(camera_to_worlds=torch.eye(4)[:3].repeat(2, 1, 1), fx=torch.tensor([[500.0], [401.0]]),
                       fy=torch.tensor([[510.0], [411.0]]), cx=torch.tensor([[320.0], [301.5]]),
                       cy=torch.tensor([[240.0], [199.5]]), width=640, height=480)

    rescaled = cameras()
    rescaled.rescale_output_resolution(scale)
    assert torch.equal(scaled_intrinsics(cameras(), scale), rescaled.get_intrinsics_matrices())


@pytest.mark.slow
def test_training_metrics_are_computed_at_logging_steps_only(tiny_scene: Path, tmp_path: Path):
    """nerfstudio writes the training metrics at logging steps only, so the other steps do not compute them: they
    return no metrics and dispatch fewer operations than a logging step of the same Gaussians, which returns
    splatfacto's PSNR over the step's views and the Gaussian count."""
    trainer = in_process_trainer(tiny_scene, tmp_path, "cpu", warmup_length=10_000)  # no refine in these steps
    trainer.config.logging.steps_per_log = 4
    for step in range(1, 4):
        run_step(trainer, step)
    counts = {}
    for step in (4, 5):
        counter = OperationCounter()
        counter.counting = True
        with counter:
            _, _, metrics = trainer.train_iteration(step)
        counts[step] = counter.ops
        if step == 4:
            assert set(metrics) >= {"psnr", "gaussian_count"} and torch.isfinite(metrics["psnr"])
            assert metrics["gaussian_count"] == trainer.pipeline.model.num_points
        else:
            assert metrics == {}
    assert counts[5] < counts[4], counts


@pytest.mark.slow
def test_training_renders_take_the_units_viewmats_and_intrinsics_built_once(tiny_scene: Path, tmp_path: Path, monkeypatch):
    """The datamanager builds a unit's world-to-camera matrices (and full-resolution intrinsics, and the matrices'
    inverses) with its Cameras; a training render uses exactly those (the same tensor, bitwise what the poses give),
    handing gsplat the inverses, and an evaluation render builds its own."""
    from odin_ns.rendering import scaled_intrinsics, splatfacto_view_matrices, view_inverses
    from odin_ns.rendering.presized import PresizedIntersections

    trainer = in_process_trainer(tiny_scene, tmp_path, "cpu")
    model = trainer.pipeline.model
    camera, _ = trainer.pipeline.datamanager.next_train(1)
    viewmats = camera.metadata["viewmats"]
    assert torch.equal(viewmats, splatfacto_view_matrices(camera.camera_to_worlds))
    assert trainer.pipeline.datamanager.next_train(1)[0].metadata["viewmats"] is viewmats  # once per unit of views
    assert model.view_matrices(camera) is viewmats
    assert torch.equal(camera.metadata["intrinsics"], scaled_intrinsics(camera, 1.0))
    inputs = model._rasterization_inputs(camera)  # no resolution warm-up here: full resolution
    assert inputs["viewmats"] is viewmats and inputs["Ks"] is camera.metadata["intrinsics"]
    inverse = camera.metadata["camtoworlds"]
    assert torch.equal(inverse, view_inverses(viewmats))
    held_during_render = []

    class Rendered(Exception):
        pass

    def rasterize(**kwargs):
        held_during_render.append(PresizedIntersections._render.known_inverse)
        raise Rendered

    with monkeypatch.context() as patch:  # what gsplat's module would find while the training render runs
        patch.setattr("odin_ns.model.rasterize_fn", lambda renderer: rasterize)
        with pytest.raises(Rendered):
            model.get_outputs(camera)
    assert held_during_render[0][0] is viewmats and held_during_render[0][1] is inverse
    assert PresizedIntersections._render.known_inverse is None
    model.eval()
    try:
        assert model.view_matrices(camera) is not viewmats and torch.equal(model.view_matrices(camera), viewmats)
    finally:
        model.train()


@pytest.mark.slow
def test_units_of_several_views_are_rows_of_the_device_cameras_and_the_kept_units_stay_bounded(
    tiny_scene: Path, tmp_path: Path
):
    """With several views per rank the plan deals new combinations every epoch: each unit's cameras and matrices are
    those rows of the training cameras, and the units kept for reuse stay at most one per training view."""
    from odin_ns.rendering import scaled_intrinsics, splatfacto_view_matrices, view_inverses

    trainer = in_process_trainer(tiny_scene, tmp_path, "cpu", views_per_rank=2)
    manager = trainer.pipeline.datamanager
    dealt = set()
    for step in range(5 * manager.plan.units_per_epoch):
        camera, _ = manager.next_train(step)
        views = camera.metadata["cam_idx"]
        expected = manager.train_cameras[torch.tensor(views)]
        for name in ("camera_to_worlds", "fx", "fy", "cx", "cy", "width", "height"):
            assert torch.equal(getattr(camera, name), getattr(expected, name)), name
        viewmats = splatfacto_view_matrices(expected.camera_to_worlds)
        assert torch.equal(camera.metadata["viewmats"], viewmats)
        assert torch.equal(camera.metadata["camtoworlds"], view_inverses(viewmats))
        assert torch.equal(camera.metadata["intrinsics"], scaled_intrinsics(expected, 1.0))
        dealt.add(tuple(views))
    assert len(dealt) > len(manager.train_dataset)  # more combinations than views: a cache of each would only grow
    assert len(manager._cameras_of_units) <= len(manager.train_dataset)
