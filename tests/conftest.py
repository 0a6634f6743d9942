"""Shared fixtures: a small generated demo scene and the real capture when it is present."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CUP77 = REPO_ROOT.parent / "shared" / "data" / "cup77"

TINY_SCENE_OPTIONS = dict(num_views=24, width=64, height=48, gaussians_per_region=400, seed=3)
"""Small enough to generate in about a second; the same options everywhere so the scene is built once."""


@pytest.fixture(scope="session")
def tiny_scene(tmp_path_factory) -> Path:
    """A generated demo scene (COLMAP layout); tests that modify it must copy it first."""
    from odin_ns.data.demo_scene import generate_demo_scene

    return generate_demo_scene(tmp_path_factory.mktemp("tiny") / "scene", **TINY_SCENE_OPTIONS)


@pytest.fixture(scope="session")
def cup77() -> Path:
    """The real phone capture shared beside the repository; tests skip where it is absent."""
    if not (CUP77 / "sparse" / "0").exists():
        pytest.skip(f"real capture not found at {CUP77}")
    return CUP77
