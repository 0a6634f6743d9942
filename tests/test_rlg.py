"""Relative Locality Graph: observations from tracks and fallbacks, Jaccard weights, cap, top-k, partition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from odin_ns.schedule.partition import partition_views
from odin_ns.schedule.rlg import RelativeLocalityGraph, build_rlg
from odin_ns.schedule.tracks import (
    CAMERA_FRUSTA,
    SEED_POINTS,
    SFM_TRACKS,
    Observations,
    ViewCameras,
    collect_observations,
    incidence_matrix,
    sfm_observations,
    view_names,
)

# Hand-made reconstruction: view -> observed point ids. Point 7 is seen by 4 views (a "long" track for a cap of 3).
HAND_MADE = {
    0: [0, 1, 2, 3, 7],
    1: [2, 3, 4, 7],
    2: [4, 5, 7],
    3: [6, 7],
    4: [4, 5, 8],
}


def hand_made_observations() -> Observations:
    views = np.concatenate([[view] * len(points) for view, points in HAND_MADE.items()])
    points = np.concatenate(list(HAND_MADE.values()))
    return Observations(incidence_matrix(views, points, len(HAND_MADE)), SFM_TRACKS)


def edge_weights(graph: RelativeLocalityGraph) -> dict[tuple[int, int], float]:
    coo = graph.weights.tocoo()
    return {(int(i), int(j)): float(w) for i, j, w in zip(coo.row, coo.col, coo.data) if i < j}


def test_jaccard_weights_with_track_cap():
    graph = build_rlg(hand_made_observations(), max_track_length=3, top_k=10)
    # Point 7 (4 views) is dropped: view 0 {0,1,2,3}, 1 {2,3,4}, 2 {4,5}, 3 {6}, 4 {4,5,8}.
    assert edge_weights(graph) == pytest.approx({(0, 1): 2 / 5, (1, 2): 1 / 4, (1, 4): 1 / 5, (2, 4): 2 / 3})
    assert graph.isolated_views().tolist() == [3]
    assert (graph.weights != graph.weights.T).nnz == 0


def test_long_tracks_count_without_cap():
    graph = build_rlg(hand_made_observations(), max_track_length=4, top_k=10)
    weights = edge_weights(graph)
    assert weights[(0, 1)] == pytest.approx(3 / 6)  # {2,3,7} of {0,1,2,3,4,7}
    assert weights[(0, 3)] == pytest.approx(1 / 6)  # {7} of {0,1,2,3,6,7}
    assert len(graph.isolated_views()) == 0


@pytest.mark.parametrize(
    ("top_k", "edges"),
    [(1, {(0, 1), (2, 4)}), (2, {(0, 1), (1, 2), (1, 4), (2, 4)})],
)
def test_top_k_keeps_each_views_strongest_edges(top_k, edges):
    graph = build_rlg(hand_made_observations(), max_track_length=3, top_k=top_k)
    assert set(edge_weights(graph)) == edges


def test_bad_cap_and_top_k_are_rejected():
    with pytest.raises(ValueError, match="max_track_length"):
        build_rlg(hand_made_observations(), max_track_length=1)
    with pytest.raises(ValueError, match="top_k"):
        build_rlg(hand_made_observations(), top_k=0)


def write_text_model(model_dir: Path, names_by_image_id: dict[int, str], points_by_name: dict[str, list[int]]) -> None:
    """A COLMAP text model whose image ids deliberately disagree with the name order."""
    model_dir.mkdir(parents=True)
    (model_dir / "cameras.txt").write_text("1 PINHOLE 100 100 50 50 50 50\n")
    image_lines, tracks = [], {}
    for image_id, name in names_by_image_id.items():
        point_ids = points_by_name[name]
        image_lines.append(f"{image_id} 1 0 0 0 0 0 0 1 {name}")
        image_lines.append(" ".join(f"{10 + k} {20 + k} {point_id}" for k, point_id in enumerate(point_ids)))
        for k, point_id in enumerate(point_ids):
            tracks.setdefault(point_id, []).append(f"{image_id} {k}")
    (model_dir / "images.txt").write_text("\n".join(image_lines) + "\n")
    (model_dir / "points3D.txt").write_text(
        "".join(f"{point_id} 0 0 1 128 128 128 0.5 {' '.join(track)}\n" for point_id, track in sorted(tracks.items()))
    )


def test_sfm_views_are_dataset_indices_matched_by_name(tmp_path):
    names = [f"img_{view}.jpg" for view in HAND_MADE]
    point_ids = {f"img_{view}.jpg": [100 + p for p in points] for view, points in HAND_MADE.items()}
    write_text_model(tmp_path / "sparse" / "0", {50 - i: name for i, name in enumerate(names)}, point_ids)
    # Dataset order differs from both the COLMAP ids and the name order, and images live in images_4/.
    dataset_order = [3, 0, 4, 1, 2]
    paths = [tmp_path / "images_4" / names[view] for view in dataset_order]
    observations = sfm_observations(tmp_path / "sparse" / "0", paths)
    graph = build_rlg(observations, max_track_length=3, top_k=10)
    dataset_index = {view: index for index, view in enumerate(dataset_order)}
    weights = graph.weights.toarray()
    assert weights[dataset_index[0], dataset_index[1]] == pytest.approx(2 / 5)
    assert weights[dataset_index[2], dataset_index[4]] == pytest.approx(2 / 3)
    assert graph.isolated_views().tolist() == [dataset_index[3]]


def test_training_view_missing_from_reconstruction_is_an_error(tmp_path):
    write_text_model(tmp_path / "model", {1: "a.jpg", 2: "b.jpg"}, {"a.jpg": [1, 2], "b.jpg": [2, 3]})
    with pytest.raises(ValueError, match="c.jpg has no image of that name"):
        sfm_observations(tmp_path / "model", [tmp_path / "images" / "a.jpg", tmp_path / "images" / "c.jpg"])
    with pytest.raises(FileNotFoundError, match="no COLMAP model"):
        sfm_observations(tmp_path / "nothing", [tmp_path / "images" / "a.jpg"])


def test_view_names_are_relative_to_the_image_folder():
    assert view_names(["/d/images/a/1.jpg", "/d/images/b/1.jpg"]) == ["a/1.jpg", "b/1.jpg"]
    assert view_names(["/d/images_4/1.jpg", "/d/images_4/2.jpg"]) == ["1.jpg", "2.jpg"]


def ring_cameras(count: int = 12, radius: float = 3.0) -> ViewCameras:
    """Cameras on a circle looking outward (90 degree field of view): neighbours on the ring share content."""
    angles = 2 * np.pi * np.arange(count) / count
    forward = np.stack([np.cos(angles), np.sin(angles), np.zeros(count)], axis=1)
    up = np.tile([0.0, 0.0, 1.0], (count, 1))
    right = np.cross(forward, up)
    camera_to_world = np.stack([right, up, -forward, radius * forward], axis=2)
    full = np.full(count, 50.0)
    return ViewCameras(camera_to_world, fx=full, fy=full, cx=full, cy=full, width=2 * full, height=2 * full)


def assert_ring_neighbours(graph: RelativeLocalityGraph, count: int) -> None:
    weights = graph.weights.toarray()
    assert weights.shape == (count, count)
    strongest = weights.argmax(axis=1)
    ring_distance = np.minimum((strongest - np.arange(count)) % count, (np.arange(count) - strongest) % count)
    assert (ring_distance == 1).all()
    assert (weights[np.arange(count), (np.arange(count) + count // 2) % count] == 0).all()  # opposite views


def test_seed_point_fallback_links_neighbouring_cameras(caplog):
    cameras = ring_cameras()
    angles = np.linspace(0, 2 * np.pi, 720, endpoint=False)
    heights = np.tile([-1.0, 0.0, 1.0], 240)
    points = np.stack([8 * np.cos(angles), 8 * np.sin(angles), heights], axis=1)
    paths = [f"images/{view}.png" for view in range(len(cameras))]
    with caplog.at_level("INFO", logger="odin_ns.schedule.tracks"):
        observations = collect_observations(paths, cameras, recon_dir=None, seed_points=points)
    assert observations.source == SEED_POINTS
    assert "seed-points" in caplog.text
    assert_ring_neighbours(build_rlg(observations, max_track_length=32, top_k=4), len(cameras))


def test_frustum_fallback_links_neighbouring_cameras():
    cameras = ring_cameras()
    observations = collect_observations([f"{view}.png" for view in range(len(cameras))], cameras)
    assert observations.source == CAMERA_FRUSTA
    assert_ring_neighbours(build_rlg(observations, max_track_length=32, top_k=4), len(cameras))


def two_communities() -> RelativeLocalityGraph:
    """Views 0-4 and 5-9 observe two disjoint point sets, plus one point shared across (views 4 and 5)."""
    views, points = [], []
    for view in range(10):
        community = view // 5
        own = [community * 100 + p for p in range(20)]
        views += [view] * len(own)
        points += own
    views += [4, 5]
    points += [999, 999]
    return build_rlg(Observations(incidence_matrix(np.array(views), np.array(points), 10), SFM_TRACKS))


def test_partition_recovers_communities_and_reports_quality():
    partition = partition_views(two_communities(), num_regions=2, seed=0)
    assert partition.labels.tolist() == [0] * 5 + [1] * 5
    assert 0.98 < partition.intra_fraction < 1.0
    assert partition.region_sizes().tolist() == [5, 5]
    again = partition_views(two_communities(), num_regions=2, seed=0)
    assert (again.labels == partition.labels).all()


def test_more_regions_than_views_is_an_error():
    with pytest.raises(ValueError, match="10 views into 11 regions"):
        partition_views(two_communities(), num_regions=11)


def test_cup77_partition_is_local(cup77):
    """Regions of the real capture hold most of the RLG weight (the readers are compared in test_colmap_reader)."""
    paths = sorted((cup77 / "images").glob("*.jpg"))
    incidence = sfm_observations(cup77 / "sparse" / "0", paths).incidence
    # 7,631 observations, of which 7,546 distinct (view, point) pairs: a track may hold an image twice.
    assert incidence.nnz == 7546
    partition = partition_views(build_rlg(Observations(incidence, SFM_TRACKS)), num_regions=4, seed=0)
    print(f"cup77 regions {partition.region_sizes().tolist()}, intra-region weight {partition.intra_fraction:.3f}")
    assert partition.intra_fraction > 0.8
