"""Build the castle-P30 COLMAP capture used by the docs (``data/castle_p30/``).

Source: Strecha et al., "On Benchmarking Camera Calibration and Multi-View
Stereo for High Resolution Imagery", CVPR 2008, as mirrored in the repository
github.com/openMVG/SfM_quality_evaluation at revision 348a981, path
``Benchmarking_Camera_Calibration_2008/castle-P30/`` (``images/NNNN.jpg``,
3072x2048, and ``gt_dense_cameras/NNNN.jpg.camera``). No licence is stated, so
neither the data nor its derivative is committed; this script rebuilds it.

Get a bare mirror of that repository::

    git clone --mirror https://github.com/openMVG/SfM_quality_evaluation castle_mirror.git

The poses are the benchmark's ground-truth ones (not re-estimated by SfM), so
results on this capture measure the renderer/trainer rather than pose
estimation noise. Only the 3D points are computed: SIFT features matched
exhaustively and triangulated against the fixed poses with pycolmap.

Strecha camera files hold K (3 rows), radial distortion (1 row, zeros here),
R (3 rows), t (1 row) and "width height". R's columns are the camera axes in
world coordinates and t is the camera centre C, so x_cam = R^T (X - C).

Usage::

    python docs/data/castle_p30.py \
        --mirror castle_mirror.git \
        --out data/castle_p30
"""

import argparse
import io
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pycolmap
from PIL import Image

COMMIT = "348a981"
SOURCE = "Benchmarking_Camera_Calibration_2008/castle-P30"
NUM_VIEWS = 30
SCALE = 3.2  # 3072x2048 -> 960x640
MIN_POINTS = 1000  # far fewer means the pose convention is wrong
SEED = 0  # fixed RANSAC/triangulation seeds: reruns give the same points


def git_show(mirror: Path, path: str) -> bytes:
    """Read one file of the pinned commit, so the output never drifts with the mirror."""
    proc = subprocess.run(["git", "--git-dir", str(mirror), "show", f"{COMMIT}:{SOURCE}/{path}"],
                          capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"cannot read {COMMIT}:{SOURCE}/{path} from {mirror}: "
                         f"{proc.stderr.decode().strip().splitlines()[-1]}")
    return proc.stdout


def parse_camera(text: str, name: str):
    """Parse a Strecha .camera file into (K, R, C, (width, height))."""
    rows = [line.split() for line in text.strip().splitlines()]
    if len(rows) != 9:
        raise SystemExit(f"{name}: expected 9 rows in the camera file, got {len(rows)}")
    k = np.array(rows[0:3], float)
    if np.any(np.array(rows[3], float) != 0):
        raise SystemExit(f"{name}: non-zero radial distortion; a PINHOLE model would be wrong")
    r = np.array(rows[4:7], float)
    c = np.array(rows[7], float)
    width, height = (int(v) for v in rows[8])
    return k, r, c, (width, height)


def write_images(mirror: Path, image_dir: Path) -> list:
    """Downscale the views into image_dir; return (name, K, R, C, size) with K and size scaled."""
    image_dir.mkdir(parents=True, exist_ok=True)
    views = []
    for i in range(NUM_VIEWS):
        name = f"{i:04d}.jpg"
        k, r, c, size = parse_camera(git_show(mirror, f"gt_dense_cameras/{name}.camera").decode(), name)
        image = Image.open(io.BytesIO(git_show(mirror, f"images/{name}")))
        if image.size != size:
            raise SystemExit(f"{name}: image is {image.size}, camera file says {size}")
        new_size = (round(size[0] / SCALE), round(size[1] / SCALE))
        image.convert("RGB").resize(new_size, Image.LANCZOS).save(image_dir / name, quality=95)
        k_scaled = k.copy()
        k_scaled[:2] /= SCALE
        views.append((name, k_scaled, r, c, new_size))
    return views


def shared_camera(views: list) -> pycolmap.Camera:
    """One PINHOLE camera for all views: the benchmark calibrated a single K for every image."""
    k, size = views[0][1], views[0][4]
    if any(not np.allclose(v[1], k) or v[4] != size for v in views):
        raise SystemExit("views have different intrinsics; a shared camera would be wrong")
    if abs(k[0, 1]) > 1e-9:
        raise SystemExit("K has skew; PINHOLE cannot represent it")
    return pycolmap.Camera(model="PINHOLE", width=size[0], height=size[1], camera_id=1,
                           params=[k[0, 0], k[1, 1], k[0, 2], k[1, 2]])


def extract_and_match(database: Path, image_dir: Path, views: list, camera: pycolmap.Camera) -> None:
    """SIFT on CPU into one shared camera with the known intrinsics, then exhaustive matching.

    Extraction is single-threaded because parallel extractors hand out image ids
    in completion order; ids in name order keep matching (and so the points)
    reproducible and give nerfstudio, which orders views by id, the usual split.
    """
    reader = pycolmap.ImageReaderOptions(camera_model="PINHOLE",
                                         camera_params=",".join(f"{p:.6f}" for p in camera.params))
    pycolmap.extract_features(database, image_dir, image_names=[v[0] for v in views],
                              camera_mode=pycolmap.CameraMode.SINGLE, reader_options=reader,
                              extraction_options=pycolmap.FeatureExtractionOptions(num_threads=1),
                              device=pycolmap.Device.cpu)
    verification = pycolmap.TwoViewGeometryOptions()
    verification.ransac.random_seed = SEED
    pycolmap.match_exhaustive(database, verification_options=verification, device=pycolmap.Device.cpu)


def posed_reconstruction(database: Path, views: list, camera: pycolmap.Camera) -> pycolmap.Reconstruction:
    """Reconstruction with the ground-truth poses and the database's image ids (no points yet)."""
    db = pycolmap.Database.open(database)
    ids = {image.name: image.image_id for image in db.read_all_images()}
    db.close()
    if [ids.get(v[0]) for v in views] != list(range(1, len(views) + 1)):
        raise SystemExit("database image ids do not follow the file names")
    recon = pycolmap.Reconstruction()
    recon.add_camera_with_trivial_rig(camera)
    for name, _, r, c, _ in views:
        # x_cam = R^T (X - C): rotation R^T, translation -R^T C.
        cam_from_world = pycolmap.Rigid3d(pycolmap.Rotation3d(r.T), -r.T @ c)
        image = pycolmap.Image(name=name, camera_id=camera.camera_id, image_id=ids[name])
        recon.add_image_with_trivial_frame(image, cam_from_world)
    return recon


def triangulate(recon: pycolmap.Reconstruction, database: Path, image_dir: Path, work: Path):
    """Triangulate against the fixed poses and intrinsics (refine_intrinsics=False)."""
    work.mkdir(parents=True, exist_ok=True)
    options = pycolmap.IncrementalPipelineOptions(random_seed=SEED)
    recon = pycolmap.triangulate_points(recon, database, image_dir, work, options=options,
                                        refine_intrinsics=False)
    if recon.num_points3D() < MIN_POINTS:
        raise SystemExit(f"only {recon.num_points3D()} points triangulated; pose convention suspect")
    return recon


def print_stats(recon: pycolmap.Reconstruction) -> None:
    """Summary the docs quote: sizes, errors and how much of the cloud each view sees."""
    num_points = recon.num_points3D()
    seen = sorted(image.num_points3D / num_points for image in recon.images.values())
    print(f"images: {recon.num_reg_images()}")
    print(f"points: {num_points}")
    print(f"mean reprojection error: {recon.compute_mean_reprojection_error():.3f} px")
    print(f"mean track length: {recon.compute_mean_track_length():.2f}")
    print(f"per-view fraction of points seen: median {100 * np.median(seen):.1f}% "
          f"(min {100 * seen[0]:.1f}%, max {100 * seen[-1]:.1f}%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path,
                        default=Path("/work/.mirror/openMVG+SfM_quality_evaluation/repo"),
                        help="bare git mirror of openMVG/SfM_quality_evaluation")
    parser.add_argument("--out", type=Path, default=Path("data/castle_p30"), help="output capture")
    args = parser.parse_args()
    if not args.mirror.is_dir():
        raise SystemExit(f"mirror not found: {args.mirror} (fetch github:openMVG/SfM_quality_evaluation)")
    git_show(args.mirror, "images/0000.jpg")  # fail on a wrong mirror before writing anything
    start = time.time()
    image_dir, sparse = args.out / "images", args.out / "sparse" / "0"

    def stage(message: str) -> None:
        print(f"[{time.time() - start:6.1f}s] {message}", flush=True)

    stage(f"downscaling {NUM_VIEWS} views by {SCALE} into {image_dir}")
    views = write_images(args.mirror, image_dir)
    camera = shared_camera(views)
    with tempfile.TemporaryDirectory() as tmp:
        database = Path(tmp) / "database.db"
        stage("extracting SIFT features and matching exhaustively (CPU)")
        extract_and_match(database, image_dir, views, camera)
        stage("triangulating points against the ground-truth poses")
        recon = triangulate(posed_reconstruction(database, views, camera), database, image_dir,
                            Path(tmp) / "triangulated")
    sparse.mkdir(parents=True, exist_ok=True)
    recon.write_binary(sparse)
    stage(f"wrote {sparse}")
    print_stats(recon)


if __name__ == "__main__":
    main()
