"""Relative Locality Graph (RLG): which training views touch the same part of the scene.

Nodes are training views; the weight of edge (i, j) is the Jaccard overlap |P_i & P_j| / |P_i | P_j| of the sets of
points the two views observe. Two views with a large weight render (and update) many of the same Gaussians, so
scheduling them back to back creates data hazards; views with no edge can run concurrently.

Everything is sparse: with A the binary (views, points) incidence matrix, the co-observation counts are A @ A.T,
whose cost is the sum over points of (track length)^2 -- which is why long tracks are capped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from odin_ns.schedule.tracks import Observations

logger = logging.getLogger(__name__)

DEFAULT_MAX_TRACK_LENGTH = 32
"""Points seen by more views than this are ignored. On cup77 (77 views, mean track 6.2, 99th percentile 27) this
drops 0.3% of points, the ones seen from almost half the orbit: they link nearly every pair of views, say nothing
about locality, and dominate the A @ A.T cost (a point seen by L views adds L^2 entries)."""

DEFAULT_TOP_K = 8
"""Neighbours kept per view (union over both endpoints). On cup77 a view shares points with 45 of the 66 other
training views on average, but its 8 strongest edges carry most of its overlap mass (docs/schedule.md); the long
tail of tiny overlaps only blurs the partition."""


@dataclass(frozen=True)
class RelativeLocalityGraph:
    """Symmetric sparse view graph weighted by Jaccard overlap of observed points."""

    weights: sp.csr_matrix
    """(views, views) symmetric, zero diagonal, weights in (0, 1]."""
    source: str
    """Where the observations came from (see odin_ns.schedule.tracks)."""

    @property
    def num_views(self) -> int:
        return self.weights.shape[0]

    def isolated_views(self) -> np.ndarray:
        """Views with no edge: they conflict with nothing and may be scheduled anywhere."""
        return np.flatnonzero(self.weights.getnnz(axis=1) == 0)


def cap_track_length(incidence: sp.csr_matrix, max_track_length: int) -> sp.csr_matrix:
    """Drop the points observed by more than max_track_length views."""
    if max_track_length < 2:
        raise ValueError(f"max_track_length must be at least 2 (a point seen once links no views), got {max_track_length}")
    track_lengths = np.bincount(incidence.indices, minlength=incidence.shape[1])
    kept = incidence.copy()
    kept.data = kept.data * (track_lengths <= max_track_length)[kept.indices]
    kept.eliminate_zeros()
    return kept


def jaccard_weights(incidence: sp.csr_matrix) -> sp.csr_matrix:
    """Jaccard overlap of the point sets of every pair of views that share a point (diagonal excluded)."""
    shared = incidence @ incidence.T
    num_views = shared.shape[0]
    rows = np.repeat(np.arange(num_views), np.diff(shared.indptr))
    off_diagonal = shared.indices != rows
    rows, cols = rows[off_diagonal], shared.indices[off_diagonal]
    counts = shared.data[off_diagonal].astype(np.float64)
    observed = incidence.getnnz(axis=1)
    jaccard = (counts / (observed[rows] + observed[cols] - counts)).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=num_views))])
    return sp.csr_matrix((jaccard, cols, indptr), shape=shared.shape)


def keep_top_k(weights: sp.csr_matrix, top_k: int) -> sp.csr_matrix:
    """Keep each view's top_k strongest edges; an edge survives if either endpoint keeps it (symmetric)."""
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    rows = np.repeat(np.arange(weights.shape[0]), np.diff(weights.indptr))
    order = np.lexsort((weights.indices, -weights.data, rows))
    rank_in_row = np.empty(len(order), dtype=np.int64)
    rank_in_row[order] = np.arange(len(order)) - weights.indptr[rows[order]]
    kept = rank_in_row < top_k
    strongest = sp.csr_matrix(
        (weights.data[kept], (rows[kept], weights.indices[kept])), shape=weights.shape, dtype=weights.dtype
    )
    return strongest.maximum(strongest.T).tocsr()


def build_rlg(
    observations: Observations,
    max_track_length: int = DEFAULT_MAX_TRACK_LENGTH,
    top_k: int = DEFAULT_TOP_K,
) -> RelativeLocalityGraph:
    """Cap long tracks, weight view pairs by Jaccard overlap, keep the top_k neighbours of each view."""
    capped = cap_track_length(observations.incidence, max_track_length)
    graph = RelativeLocalityGraph(keep_top_k(jaccard_weights(capped), top_k), observations.source)
    isolated = graph.isolated_views()
    if len(isolated):
        logger.warning(
            "%d of %d views share no point with any other view (after the track-length cap %d); they get no RLG "
            "edges, so the schedule treats them as conflict-free",
            len(isolated),
            graph.num_views,
            max_track_length,
        )
    return graph
