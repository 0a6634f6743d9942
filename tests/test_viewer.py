"""Rank 0 serves nerfstudio's viewer during a 2-rank CPU torchrun run, and a real browser (headless Chromium) sees
the scene in it while the ranks keep training to the end."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from training import BIN, QUIET_TRAINING, torchrun

STEPS = 300
"""Long enough (tens of seconds on 2 CPU cores) for Chromium to load the viewer and receive a render mid-training."""
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--use-angle=swiftshader", "--enable-unsafe-swiftshader",  # WebGL without a GPU: the viewer draws with it
    "--window-size=1200,800", "--virtual-time-budget=8000",
)
MIN_SCENE_COVERAGE = 0.2
"""The rendered demo scene fills about 40% of the 3D canvas with colours unlike its background; an empty canvas, the
camera frustums alone (a few %) or Chromium's error page stay far below."""

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not on PATH (Debian: apt-get install chromium)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, training: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    """Return once ``url`` answers; fail with the training log if training exits or the wait times out first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            if training.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"viewer at {url} never answered (training rc {training.poll()}):\n{log.read_text()[-5000:]}"
                )
            time.sleep(0.5)


def chromium_screenshot(url: str, path: Path) -> None:
    """Open ``url`` in headless Chromium with a fresh profile and save a screenshot of the window."""
    profile = path.parent / "chromium-profile"
    subprocess.run(
        ["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={path}", url],
        capture_output=True, timeout=120, check=True,
    )


def scene_coverage(screenshot: Path) -> float:
    """Fraction of the viewer's 3D canvas (left of the control panel, below the title bar) whose colour differs
    clearly from the canvas's most common colour (its background)."""
    pixels = np.asarray(Image.open(screenshot).convert("RGB"), dtype=np.int16)
    height, width, _ = pixels.shape
    canvas = pixels[int(0.1 * height):, : int(0.7 * width)].reshape(-1, 3)
    colours, counts = np.unique(canvas, axis=0, return_counts=True)
    background = colours[counts.argmax()]
    return float((np.abs(canvas - background).max(axis=1) > 30).mean())


@pytest.mark.slow
def test_chromium_shows_rank0_viewer_during_two_rank_training(tiny_scene: Path, tmp_path: Path):
    port = free_port()
    url = f"http://localhost:{port}/"
    log = tmp_path / "train.log"
    command = [
        *torchrun(2), str(BIN / "ns-train"), "odin-splatfacto", "--data", str(tiny_scene),
        "--output-dir", str(tmp_path / "runs"), "--max-num-iterations", str(STEPS), *QUIET_TRAINING,
        "--vis", "viewer", "--viewer.websocket-port", str(port),  # the last --vis wins over QUIET_TRAINING's
    ]
    with open(log, "w") as output:
        training = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    screenshot = tmp_path / "viewer.png"
    coverage, shown_while_training = 0.0, False
    try:
        wait_for_http(url, training, log)
        while training.poll() is None and coverage <= MIN_SCENE_COVERAGE:  # the first render may come after a load
            chromium_screenshot(url, screenshot)
            coverage = scene_coverage(screenshot)
            shown_while_training = training.poll() is None
        returncode = training.wait(timeout=300)
    finally:
        if training.poll() is None:
            training.terminate()  # torchrun passes SIGTERM on to its ranks
            training.wait(timeout=60)

    assert returncode == 0, f"training exited {returncode}:\n{log.read_text()[-5000:]}"
    assert coverage > MIN_SCENE_COVERAGE, f"{screenshot}: the scene covers {coverage:.1%} of the canvas"
    assert shown_while_training, "training ended before Chromium's screenshot showed the scene: raise STEPS"
