"""Fat-tree substrate and the exact ring bandwidth accounting (gadget.md eqs. 7–9).

The substrate is a two-level tree: every server s hangs below the top-of-rack switch of its rack
``rack_of[s]`` through a full-duplex link (bandwidth per direction ``server_bw[s, d]``, d = 0 up
(server -> ToR), d = 1 down), and every ToR hangs below the core through a full-duplex link
(``rack_bw[r, d]``). Links are indexed 0..S-1 (server uplinks) then S..S+R-1 (rack uplinks).

**Ring accounting (eqs. 7–9).** The workers of job i on one server talk through the server itself
(Fig. 2(a)): no network bandwidth. When they sit on several servers, eq. 9 asks each used server
to have degree exactly two on one cycle through all used servers. In a tree, every used server
must send to and receive from some other used server, so its uplink carries at least b_i each way;
and when the job spans several racks, every used rack must be left and entered at least once, so
its uplink carries at least b_i each way. The ring that visits the used servers grouped by rack
(:func:`ring_order`: racks ascending, servers ascending within a rack) meets both lower bounds on
every link at once, so it is the cheapest ring on *every* link simultaneously, and a placement
admits a feasible ring iff these loads fit every link (eq. 19, per link; eq. 8 is the
per-path bottleneck form). This is exactly what the env validates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["Topology", "ring_order", "ring_hops_loads", "placement_loads", "ring_stats", "ring_stats_into"]


@dataclass(frozen=True, eq=False)
class Topology:
    """A fat-tree GPU cluster (public)."""

    rack_of: np.ndarray  # (S,) int, rack of each server
    gpus: np.ndarray  # (S,) int, C_s GPUs per server (eq. 4)
    server_bw: np.ndarray  # (S, 2) float Gbps, server uplink capacity per direction (0 up, 1 down)
    rack_bw: np.ndarray  # (R, 2) float Gbps, ToR-core link capacity per direction

    @property
    def num_servers(self) -> int:
        return int(self.rack_of.shape[0])

    @property
    def num_racks(self) -> int:
        return int(self.rack_bw.shape[0])

    @property
    def num_links(self) -> int:
        return self.num_servers + self.num_racks

    @property
    def link_capacity(self) -> np.ndarray:
        """(S+R, 2) capacity per link and direction (server uplinks first)."""
        return np.concatenate([self.server_bw, self.rack_bw], axis=0)


def ring_order(servers, rack_of: np.ndarray) -> tuple[int, ...]:
    """The cheapest ring over ``servers``: grouped by rack (racks ascending), servers ascending."""
    s = np.asarray(sorted(int(v) for v in servers), dtype=np.int64)
    order = s[np.lexsort((s, rack_of[s]))] if s.size else s
    return tuple(int(v) for v in order)


def ring_hops_loads(ring: tuple[int, ...], b: float, topo: Topology) -> np.ndarray:
    """(S+R, 2) link loads of a ring, computed hop by hop along its tree paths (summed per link as in eq. 19).

    Hop s -> s' (cyclic, s != s'): up the uplink of s, down the uplink of s'; if the racks differ,
    also up the uplink of rack(s) and down the uplink of rack(s'). A one-server ring uses nothing.
    Reference implementation (a loop); the env uses :func:`placement_loads`, which equals it for
    :func:`ring_order` rings (tested).
    """
    S = topo.num_servers
    load = np.zeros((topo.num_links, 2))
    if len(ring) < 2:
        return load
    for a, c in zip(ring, ring[1:] + ring[:1]):
        load[a, 0] += b
        load[c, 1] += b
        ra, rc = int(topo.rack_of[a]), int(topo.rack_of[c])
        if ra != rc:
            load[S + ra, 0] += b
            load[S + rc, 1] += b
    return load


def placement_loads(y: np.ndarray, b: np.ndarray, rack_of: np.ndarray, num_racks: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-link loads (same both directions) of the cheapest rings of many jobs at once.

    Args:
        y: (J, S) int workers per job per server.
        b: (J,) Gbps bandwidth demand per job.
    Returns:
        server_load (S,) and rack_load (R,) in Gbps, each to be compared with both directions.
    """
    used = y > 0  # (J, S) x_is
    multi = used.sum(axis=1) > 1  # (J,) spans several servers
    server_load = (used & multi[:, None]).T.astype(np.float64) @ b  # eq. 19 on server uplinks
    racks = np.zeros((y.shape[0], num_racks), dtype=bool)
    jj, ss = np.nonzero(used)
    racks[jj, rack_of[ss]] = True
    multirack = racks.sum(axis=1) > 1
    rack_load = (racks & multirack[:, None]).T.astype(np.float64) @ b
    return server_load, rack_load


def _ring_stats_into_py(y, bw, ring_seq, rack_of, num_racks, rings, srv, rack):  # pragma: no cover - compiled
    """:func:`ring_stats` writing into ``rings`` (J, S), ``srv`` (S,) and ``rack`` (num_racks,); compiled, and
    callable from other kernels (the ring-size step of ``dynamics`` runs it for every env)."""
    J, S = y.shape
    for j in range(J):
        for s in range(S):
            rings[j, s] = -1
    for s in range(S):
        srv[s] = 0.0
    for r in range(num_racks):
        rack[r] = 0.0
    used_rack = np.zeros(num_racks, dtype=np.bool_)
    for j in range(J):
        m = 0
        for s in ring_seq:
            if y[j, s] > 0:
                rings[j, m] = s
                m += 1
        if m < 2:
            continue
        used_rack[:] = False
        nr = 0
        for t in range(m):
            s = rings[j, t]
            srv[s] += bw[j]
            if not used_rack[rack_of[s]]:
                used_rack[rack_of[s]] = True
                nr += 1
        if nr > 1:
            for r in range(num_racks):
                if used_rack[r]:
                    rack[r] += bw[j]


ring_stats_into = numba.njit(cache=True, nogil=True)(_ring_stats_into_py)


def ring_stats(y: np.ndarray, bw: np.ndarray, ring_seq: np.ndarray, rack_of: np.ndarray, num_racks: int):
    """Rings and loads of many jobs in one compiled pass.

    Args:
        y: (J, S) int workers; bw: (J,) Gbps; ring_seq: (S,) servers in ring order
            (``np.lexsort((arange(S), rack_of))``).
    Returns:
        rings (J, S) servers of each job's ring in :func:`ring_order`, padded with −1; server_load
        (S,) and rack_load (R,) as :func:`placement_loads` (tested equal).
    """
    y = np.ascontiguousarray(y, dtype=np.int64)
    J, S = y.shape
    rings = np.empty((J, S), dtype=np.int64)
    srv, rack = np.empty(S), np.empty(int(num_racks))
    ring_stats_into(y, np.asarray(bw, dtype=np.float64), ring_seq, np.asarray(rack_of, dtype=np.int64),
                    int(num_racks), rings, srv, rack)
    return rings, srv, rack
