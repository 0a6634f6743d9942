"""Relative Locality Graph (RLG): which training views touch the same part of the scene.

Nodes are training views; the weight of edge (i, j) is the Jaccard overlap |P_i & P_j| / |P_i | P_j| of the sets of
points the two views observe. Two views with a large weight render (and update) many of the same Gaussians, so
scheduling them back to back creates data hazards; views with no edge can run concurrently.

Everything is sparse: with A the binary (views, points) incidence matrix, the co-observation counts are A @ A.T,
whose cost is the sum over points of (track length)^2 -- which is why long tracks are capped.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.sparse as sp

from odin_ns.schedule.tracks import Observations

logger = logging.getLogger(__name__)

_MIN_VIEWS_PER_BLOCK = 256
"""Views weighted per task: smaller graphs run in one block, where threads would only add overhead."""

DEFAULT_MAX_TRACK_LENGTH = 32
"""Points seen by more views than this are ignored. On cup77 (77 views, mean track 6.2, 99th percentile 27) this
drops 0.3% of the points, those seen from almost half the orbit: they link nearly every pair of views, say nothing
about locality, and dominate the A @ A.T cost (a point seen by L views adds L^2 entries). Caps from 16 to 64 give
cup77 equally good regions (docs/schedule.md); the cap matters for the cost on large scenes."""

DEFAULT_TOP_K = 8
"""Neighbours kept per view (union over both endpoints). On cup77 a view shares points with 58 of the 66 other
training views; its 8 strongest edges carry 56% of its overlap mass. k = 4 gives unbalanced regions, k >= 8 regions
as good as the full graph's at a quarter of its edges (docs/schedule.md)."""


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
        raise ValueError(f"max_track_length must be at least 2 (shorter tracks link no views), got {max_track_length}")
    track_lengths = np.bincount(incidence.indices, minlength=incidence.shape[1])
    kept = incidence.copy()
    kept.data = kept.data * (track_lengths <= max_track_length)[kept.indices]
    kept.eliminate_zeros()
    return kept


def jaccard_weights(
    incidence: sp.csr_matrix, views: Optional[slice] = None, transposed: Optional[sp.csr_matrix] = None
) -> sp.csr_matrix:
    """Jaccard overlap of each of ``views`` (default: all) with every view it shares a point with (itself excluded).

    Returns the rows of ``views`` only, so blocks of views can be weighted independently (and in parallel);
    ``transposed`` is incidence.T in CSR form, computed once by callers that weight many blocks.
    """
    transposed = incidence.T.tocsr() if transposed is None else transposed
    first, end, _ = (views or slice(None)).indices(incidence.shape[0])
    shared = incidence[first:end] @ transposed
    rows = np.repeat(np.arange(end - first), np.diff(shared.indptr))
    off_diagonal = shared.indices != rows + first
    rows, cols = rows[off_diagonal], shared.indices[off_diagonal]
    counts = shared.data[off_diagonal].astype(np.float64)
    observed = np.diff(incidence.indptr)
    jaccard = (counts / (observed[rows + first] + observed[cols] - counts)).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=end - first))])
    return sp.csr_matrix((jaccard, cols, indptr), shape=shared.shape)


def strongest_per_row(weights: sp.csr_matrix, top_k: int) -> sp.csr_matrix:
    """Each row's top_k largest entries (ties: lower column first); the rest dropped."""
    rows = np.repeat(np.arange(weights.shape[0]), np.diff(weights.indptr))
    order = np.lexsort((weights.indices, -weights.data, rows))
    rank_in_row = np.empty(len(order), dtype=np.int64)
    rank_in_row[order] = np.arange(len(order)) - weights.indptr[rows[order]]
    kept = rank_in_row < top_k
    return sp.csr_matrix(
        (weights.data[kept], (rows[kept], weights.indices[kept])), shape=weights.shape, dtype=weights.dtype
    )


def _worker_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def build_rlg(
    observations: Observations,
    max_track_length: int = DEFAULT_MAX_TRACK_LENGTH,
    top_k: int = DEFAULT_TOP_K,
) -> RelativeLocalityGraph:
    """Cap long tracks, weight view pairs by Jaccard overlap, keep the top_k neighbours of each view.

    An edge survives if either endpoint keeps it, so the graph is symmetric and a view may have more than top_k
    edges. Views are weighted in blocks on all cores (scipy's sparse product releases the GIL), which also bounds
    memory: the full co-observation matrix A @ A.T never exists at once.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    capped = cap_track_length(observations.incidence, max_track_length)
    transposed = capped.T.tocsr()
    workers = _worker_count()
    block = max(_MIN_VIEWS_PER_BLOCK, -(-capped.shape[0] // (4 * workers)))
    blocks = [slice(first, first + block) for first in range(0, capped.shape[0], block)]
    with ThreadPoolExecutor(workers) as pool:
        strongest = sp.vstack(
            list(pool.map(lambda views: strongest_per_row(jaccard_weights(capped, views, transposed), top_k), blocks)),
            format="csr",
        )
    graph = RelativeLocalityGraph(strongest.maximum(strongest.T).tocsr(), observations.source)
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
