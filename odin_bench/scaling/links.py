"""Latency-bandwidth (alpha-beta) cost of the collectives a training step issues, and the links the model knows.

A message of n bytes between two ranks costs ``latency + n / bandwidth`` (Hockney's model). The collectives follow
the textbook algorithms of Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations in
MPICH" (IJHPCA 19(1), 2005), with W ranks:

* ring reduce-scatter of an n-byte buffer: (W-1) steps of n/W bytes,
* ring all-gather of an n/W-byte piece per rank: (W-1) steps of n/W bytes,
* ring all-reduce = reduce-scatter + all-gather: 2(W-1) latency + 2(W-1)/W n / bandwidth,
* binomial-tree all-reduce (reduce, then broadcast): 2 ceil(log2 W) (latency + n / bandwidth): fewer steps, each
  carrying the whole buffer, so it wins for small buffers at large W; ``all_reduce`` takes the faster of the two, as
  NCCL's tuner picks between its ring and tree per call,
* pairwise all-to-all, each rank sending n bytes in all (n/W to each rank, itself included): (W-1) latency +
  (W-1)/W n / bandwidth.

One rank costs nothing (the runtime launches no collective). The reduction arithmetic is not charged: on GPUs it
runs at memory bandwidth, far above any link's. Every link is flat: all W ranks are on the same fabric, so a
preset is the bottleneck hop of the ring (docs/scaling.md says what that means for each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """A fabric as the alpha-beta model sees it."""

    name: str
    bandwidth: float
    """Bytes per second one rank sends, and receives, at once: the effective rate NCCL reaches, not the line rate."""
    latency: float
    """Seconds of start-up cost of each step (message) of a collective."""

    def __post_init__(self) -> None:
        if self.bandwidth <= 0 or self.latency < 0:
            raise ValueError(f"link {self.name}: bandwidth must be > 0 and latency >= 0, got {self.bandwidth}, "
                             f"{self.latency}")


def reduce_scatter(link: Link, nbytes: float, world_size: int) -> float:
    """Ring reduce-scatter of an ``nbytes`` buffer: each rank ends with the sum of its 1/W share."""
    steps = world_size - 1
    return steps * link.latency + steps / world_size * nbytes / link.bandwidth


def all_gather(link: Link, piece_bytes: float, world_size: int) -> float:
    """Ring all-gather of one ``piece_bytes`` piece from every rank: each rank ends with all W pieces."""
    steps = world_size - 1
    return steps * link.latency + steps * piece_bytes / link.bandwidth


def ring_all_reduce(link: Link, nbytes: float, world_size: int) -> float:
    """Ring all-reduce: reduce-scatter, then all-gather of the reduced shares."""
    return reduce_scatter(link, nbytes, world_size) + all_gather(link, nbytes / world_size, world_size)


def tree_all_reduce(link: Link, nbytes: float, world_size: int) -> float:
    """Binomial-tree reduce to one rank, then broadcast from it: 2 ceil(log2 W) steps of the whole buffer."""
    return 2 * math.ceil(math.log2(world_size)) * (link.latency + nbytes / link.bandwidth)


def all_reduce(link: Link, nbytes: float, world_size: int) -> float:
    """The faster of the ring and the tree for this buffer and world size."""
    return min(ring_all_reduce(link, nbytes, world_size), tree_all_reduce(link, nbytes, world_size))


def all_to_all(link: Link, nbytes: float, world_size: int) -> float:
    """Pairwise all-to-all where every rank sends ``nbytes`` in all, 1/W of it to each rank (its own share stays)."""
    steps = world_size - 1
    return steps * link.latency + steps / world_size * nbytes / link.bandwidth


NVSWITCH = Link("nvswitch", bandwidth=370e9, latency=2e-6)
"""H200-class GPUs on one NVSwitch (NVLink 4). 370 GB/s: NVLink 4 runs at 450 GB/s per direction per GPU (line
rate) and NCCL's protocols leave about 80% of it, 370 GB/s of bus bandwidth with its ring, according to NCCL's
developer (github.com/NVIDIA/nccl-tests/issues/212); NVLink SHARP all-reduces, which NCCL uses by default on
NVSwitch systems and which reach more, are not modelled. 2 us per step: an assumption (NCCL's small-message
latency inside a node is a few microseconds). Beyond 8 GPUs a node ends: past W = 8 this preset describes an
NVLink domain spanning nodes (NVL72-class), an idealisation. Cross-check: docs/results.md measured a 305 MB
all-reduce in 1.05 ms on 2 H200s; this preset gives 0.83 ms."""

PCIE = Link("pcie", bandwidth=20e9, latency=3e-6)
"""GPUs talking over PCIe 4.0 x16 (31.5 GB/s line rate per direction), the workstation class of an '8 PCIe GPUs'
setup. 20 GB/s: a ring of 8 such GPUs crosses the CPUs' root complexes, where nccl-tests reports about 20 GB/s of
bus bandwidth (github.com/NVIDIA/nccl-tests/issues/178: an A100 node's all-reduce fell to 20 GB/s once the ring
left NVLink for the PCIe/CPU path). 3 us per step: two PCIe GPUs all-reduce 8 bytes in 6.2 us with nccl-tests (a
published RTX 4070 Ti SUPER pair, pastebin.com/ne4ipn6K), and the ring formula charges 2 steps there."""

INFINIBAND = Link("infiniband", bandwidth=45e9, latency=5e-6)
"""Nodes joined by NDR InfiniBand, one 400 Gb/s (50 GB/s per direction) adapter per GPU as in NVIDIA's DGX H100/H200
systems, and the ring's bottleneck is the inter-node hop. 45 GB/s: an assumed 90% of the line rate. 5 us per
step: an assumption (the adapter's own latency is about 1 us; NCCL's network proxy adds to it). Hops inside a node
are taken as slow as the network hop, which is pessimistic for W <= 8."""

ETHERNET = Link("ethernet", bandwidth=10e9, latency=20e-6)
"""Nodes joined by 100 Gb/s Ethernet (12.5 GB/s line rate) with RoCE, one port per GPU. 10 GB/s and 20 us per step:
assumptions (80% of the line rate; switched Ethernet and NCCL's socket or RoCE transport cost tens of
microseconds per message)."""

PRESETS = {link.name: link for link in (NVSWITCH, PCIE, INFINIBAND, ETHERNET)}
"""The links ``odin-bench simulate --links`` knows, by name."""
