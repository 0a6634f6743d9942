"""Logical partitioning of the RLG into K regions of views that overlap a lot inside and little across.

Spectral clustering (Ng-Jordan-Weiss): the top-K eigenvectors of the degree-normalised RLG embed each view so that
strongly linked views land close together, then k-means cuts the embedding into K regions. Degrees are
regularised by the mean degree (Qin & Rohe 2013), which keeps isolated views and tiny components from taking
whole eigenvectors of their own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg
from scipy.cluster.vq import ClusterError, kmeans2

from odin_ns.schedule.rlg import RelativeLocalityGraph

DEFAULT_NUM_REGIONS = 4
_KMEANS_RESTARTS = 8
_DENSE_EIGEN_LIMIT = 512
"""Below this many views a dense eigendecomposition is faster and exact."""
_EXHAUSTIVE_CYCLE_LIMIT = 8
"""Up to this many regions the best rotation order is found by trying all (K-1)! cycles."""


@dataclass(frozen=True)
class Partition:
    """Region of every view and how strongly the regions are coupled."""

    labels: np.ndarray
    """(views,) region index in [0, num_regions)."""
    coupling: np.ndarray
    """(K, K) RLG weight between regions, both edge directions summed; the diagonal is the weight inside."""

    @property
    def num_regions(self) -> int:
        return len(self.coupling)

    @property
    def intra_fraction(self) -> float:
        """Share of the total edge weight inside regions (1.0 for a graph without edges)."""
        total = float(self.coupling.sum())
        return float(np.trace(self.coupling)) / total if total > 0 else 1.0

    def region_sizes(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=self.num_regions)

    def rotation_order(self) -> np.ndarray:
        """Cyclic order of the regions with the least coupling between consecutive ones.

        Exhaustive for up to 8 regions, nearest-neighbour (weakest link first) beyond.
        """
        cross = self.coupling.copy()
        np.fill_diagonal(cross, np.inf)
        count = self.num_regions
        if count <= _EXHAUSTIVE_CYCLE_LIMIT:
            cycles = (np.array((0, *rest)) for rest in itertools.permutations(range(1, count)))
            return min(cycles, key=lambda cycle: cross[cycle, np.roll(cycle, -1)].sum() if count > 1 else 0.0)
        order = [0]
        unvisited = set(range(1, count))
        while unvisited:
            order.append(min(unvisited, key=lambda region: (cross[order[-1], region], region)))
            unvisited.remove(order[-1])
        return np.array(order)


def region_coupling(weights: sp.csr_matrix, labels: np.ndarray, num_regions: int) -> np.ndarray:
    """(K, K) sum of edge weights between (and, on the diagonal, inside) regions."""
    membership = sp.csr_matrix(
        (np.ones(len(labels)), (np.arange(len(labels)), labels)), shape=(len(labels), num_regions)
    )
    return np.asarray((membership.T @ weights @ membership).todense())


def spectral_embedding(weights: sp.csr_matrix, dims: int, seed: int = 0) -> np.ndarray:
    """(views, dims) rows of the top eigenvectors of the regularised normalised adjacency, unit length per row."""
    degrees = np.asarray(weights.sum(axis=1)).reshape(-1)
    regularised = degrees + max(float(degrees.mean()), 1e-12)
    scale = sp.diags(1.0 / np.sqrt(regularised))
    normalised = (scale @ weights.astype(np.float64) @ scale).tocsr()
    num_views = weights.shape[0]
    if num_views <= max(_DENSE_EIGEN_LIMIT, dims + 1):
        _, vectors = scipy.linalg.eigh(normalised.toarray(), subset_by_index=(num_views - dims, num_views - 1))
    else:
        start = np.random.default_rng(seed).standard_normal(num_views)
        # k-means needs the embedding to a few digits only; tighter tolerances cost seconds at 50k views.
        _, vectors = scipy.sparse.linalg.eigsh(normalised, k=dims, which="LA", v0=start, tol=1e-4)
    # Eigenvector signs are arbitrary; fixing them makes the embedding (and thus the regions) reproducible.
    signs = np.sign(vectors[np.abs(vectors).argmax(axis=0), np.arange(dims)])
    vectors = vectors * np.where(signs == 0, 1.0, signs)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _kmeans(points: np.ndarray, num_clusters: int, seed: int) -> np.ndarray:
    """Best of several seeded k-means++ runs that leave no cluster empty."""
    rng = np.random.default_rng(seed)
    best_labels, best_inertia = None, np.inf
    for _ in range(_KMEANS_RESTARTS):
        try:
            centroids, labels = kmeans2(points, num_clusters, iter=50, minit="++", missing="raise", rng=rng)
        except ClusterError:
            continue
        inertia = float(((points - centroids[labels]) ** 2).sum())
        if inertia < best_inertia:
            best_labels, best_inertia = labels, inertia
    if best_labels is None:
        raise ValueError(
            f"could not split the views into {num_clusters} non-empty regions: too few distinguishable views"
        )
    return best_labels


def _relabel_by_first_view(labels: np.ndarray) -> np.ndarray:
    """Number regions in order of their lowest view index, so equal partitions get equal labels."""
    _, first_view = np.unique(labels, return_index=True)
    new_label = np.empty(labels.max() + 1, dtype=np.int64)
    new_label[labels[np.sort(first_view)]] = np.arange(len(first_view))
    return new_label[labels]


def partition_views(graph: RelativeLocalityGraph, num_regions: int = DEFAULT_NUM_REGIONS, seed: int = 0) -> Partition:
    """Split the views into num_regions regions (deterministic for a seed)."""
    if num_regions < 1:
        raise ValueError(f"num_regions must be at least 1, got {num_regions}")
    if num_regions > graph.num_views:
        raise ValueError(f"cannot split {graph.num_views} views into {num_regions} regions: more regions than views")
    if num_regions == 1:
        labels = np.zeros(graph.num_views, dtype=np.int64)
    else:
        embedding = spectral_embedding(graph.weights, num_regions, seed)
        labels = _relabel_by_first_view(_kmeans(embedding, num_regions, seed))
    return Partition(labels, region_coupling(graph.weights, labels, num_regions))
