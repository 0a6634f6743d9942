"""Shared fixtures: a small generated demo scene, a small real capture, and training runs that several tests look at
(each trained once per session, on first use: end-to-end runs dominate the suite's time)."""

from __future__ import annotations

from pathlib import Path

import pytest

CUP77 = Path(__file__).resolve().parent / "data" / "cup77_small"
"""cup77, the team's phone capture of a cup, made small enough to ship with the tests (its README.md says how): 77
real photos at 200x150 and a COLMAP model with real SfM tracks."""

TINY_SCENE_OPTIONS = dict(num_views=24, width=64, height=48, gaussians_per_region=400, seed=3)
"""Small enough to generate in about a second; the same options everywhere so the scene is built once."""


@pytest.fixture(scope="session")
def tiny_scene(tmp_path_factory) -> Path:
    """A generated demo scene (COLMAP layout); tests that modify it must copy it first."""
    from odin_ns.data.demo_scene import generate_demo_scene

    return generate_demo_scene(tmp_path_factory.mktemp("tiny") / "scene", **TINY_SCENE_OPTIONS)


@pytest.fixture(scope="session")
def cup77() -> Path:
    """The small real capture (``CUP77``, COLMAP layout); tests must not modify it."""
    return CUP77


@pytest.fixture(scope="session")
def demo_run(tiny_scene: Path, tmp_path_factory) -> Path:
    """Single-process ns-train of the tiny scene for ``DEMO_STEPS`` steps, evaluating every held-out image at its last
    step (run directory): the demo test checks its quality, the resume tests continue from or truncate (a copy of) its
    checkpoint. Tests must not modify it."""
    from training import DEMO_STEPS, train

    return train(tiny_scene, tmp_path_factory.mktemp("demo-run"), DEMO_STEPS,
                 "--steps-per-eval-all-images", str(DEMO_STEPS - 1))


@pytest.fixture(scope="session")
def densifying_runs(tiny_scene: Path, tmp_path_factory):
    """2-rank torchrun runs through densification and opacity resets, by mode name (``DENSIFYING_MODES``), each
    trained on first use with ``DENSIFYING_RUN_OPTIONS``. Tests must not modify them."""
    from training import DENSIFY_STEPS, DENSIFYING_MODES, DENSIFYING_RUN_OPTIONS, TrainedRuns, torchrun, train

    root = tmp_path_factory.mktemp("densifying-runs")
    return TrainedRuns(lambda mode: train(tiny_scene, root / mode, DENSIFY_STEPS, *DENSIFYING_RUN_OPTIONS,
                                          *DENSIFYING_MODES[mode], launcher=torchrun(2)))


@pytest.fixture(scope="session")
def two_node_run(tiny_scene: Path, tmp_path_factory):
    """quality-first on two torchrun "nodes" of two ranks joined by a c10d rendezvous, ``TWO_NODE_STEPS`` steps:
    (run directory, each node's output). The multi-node test checks the job; the four-rank test compares it with
    sync on four ranks of one torchrun."""
    from training import TWO_NODE_STEPS, train_two_nodes

    return train_two_nodes(tiny_scene, tmp_path_factory.mktemp("two-nodes"), TWO_NODE_STEPS,
                           "--pipeline.odin.mode", "quality-first")
