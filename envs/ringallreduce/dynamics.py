"""Greedy ring placement: the heuristic the paper's baselines use (gadget.md §VI.2).

"We place workers based on the simple heuristic that greedily allocates workers to servers where a
cycle can be attained." Our reading, for one job of kappa workers and ring bandwidth b:

1. **One server** (no network, Fig. 2(a)): the server with the fewest free GPUs that still holds
   kappa (best fit; ties: lowest index).
2. **One rack**: among servers with a free GPU whose uplink has b free in both directions, per
   rack in descending free GPUs (ties: index); the rack that needs the fewest servers (ties: lowest
   rack); its servers are filled in that order, the last one partly.
3. **Across racks**: the same over the servers of racks whose uplink also has b free both ways.
4. Otherwise the job is not placed this slot (0 workers).

Bandwidth is committed with the cheapest-ring accounting of :mod:`topology` (b on each used
server uplink when the job spans servers, b on each used rack uplink when it spans racks), so a
placement returned here is always feasible (eqs. 2–9). Jobs are placed one after another in the
caller's order against the remaining capacity. Compiled with numba (one call per slot).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["place_jobs", "place_one"]

_EPS = 1e-9


@numba.njit(cache=True, nogil=True)
def _place_one(k, b, free_gpu, free_srv, free_rack, rack_of, num_racks, row):  # pragma: no cover - compiled
    S = free_gpu.shape[0]
    for s in range(S):
        row[s] = 0
    if k <= 0:
        return True
    # 1. one server, best fit
    best = -1
    for s in range(S):
        if free_gpu[s] >= k and (best < 0 or free_gpu[s] < free_gpu[best]):
            best = s
    if best >= 0:
        row[best] = k
        free_gpu[best] -= k
        return True
    # servers usable by a multi-server ring: a free GPU and b free both ways on the uplink
    elig = np.zeros(S, dtype=np.bool_)
    for s in range(S):
        elig[s] = free_gpu[s] >= 1 and free_srv[s, 0] + _EPS >= b and free_srv[s, 1] + _EPS >= b
    idx = np.flatnonzero(elig)
    if idx.size == 0:
        return False
    order = idx[np.argsort(-free_gpu[idx], kind="mergesort")]  # descending free, ties by index
    # 2. one rack: fewest servers needed
    best_r, best_n = -1, S + 1
    for r in range(num_racks):
        tot, n = 0, 0
        for s in order:
            if rack_of[s] == r:
                tot += free_gpu[s]
                n += 1
                if tot >= k:
                    break
        if tot >= k and n < best_n:
            best_r, best_n = r, n
    chosen_rack = best_r
    if best_r < 0:
        # 3. across racks whose uplink has b free both ways
        tot = 0
        for s in order:
            r = rack_of[s]
            if free_rack[r, 0] + _EPS >= b and free_rack[r, 1] + _EPS >= b:
                tot += free_gpu[s]
        if tot < k:
            return False
    left = k
    for s in order:
        if left == 0:
            break
        r = rack_of[s]
        if chosen_rack >= 0:
            if r != chosen_rack:
                continue
        elif not (free_rack[r, 0] + _EPS >= b and free_rack[r, 1] + _EPS >= b):
            continue
        take = min(left, free_gpu[s])
        row[s] = take
        left -= take
    # commit GPUs and the ring's bandwidth (b each way on every used server uplink; on every used
    # rack uplink when the ring spans racks)
    used_rack = np.zeros(num_racks, dtype=np.bool_)
    for s in range(S):
        if row[s] > 0:
            free_gpu[s] -= row[s]
            free_srv[s, 0] -= b
            free_srv[s, 1] -= b
            used_rack[rack_of[s]] = True
    if chosen_rack < 0:
        for r in range(num_racks):
            if used_rack[r]:
                free_rack[r, 0] -= b
                free_rack[r, 1] -= b
    return True


@numba.njit(cache=True, nogil=True)
def _place_jobs(order, kappa, b, free_gpu, free_srv, free_rack, rack_of, num_racks, y):  # pragma: no cover
    placed = np.zeros(kappa.shape[0], dtype=np.bool_)
    for j in order:
        placed[j] = _place_one(kappa[j], b[j], free_gpu, free_srv, free_rack, rack_of, num_racks, y[j])
    return placed


def place_jobs(order, kappa, b, free_gpu, free_srv, free_rack, rack_of, num_racks: int):
    """Place jobs ``order`` (indices into ``kappa``/``b``) one by one; returns (y (J, S), placed (J,)).

    ``free_gpu`` (S,) int, ``free_srv`` (S, 2) and ``free_rack`` (R, 2) Gbps are updated in place.
    A job whose kappa workers cannot form a feasible ring gets no workers (``placed`` False).
    """
    kappa = np.asarray(kappa, dtype=np.int64)
    y = np.zeros((kappa.shape[0], free_gpu.shape[0]), dtype=np.int64)
    placed = _place_jobs(np.asarray(order, dtype=np.int64), kappa, np.asarray(b, dtype=np.float64),
                         free_gpu, free_srv, free_rack, rack_of, int(num_racks), y)
    return y, placed


def place_one(k, b, free_gpu, free_srv, free_rack, rack_of, num_racks: int):
    """One job; returns (y (S,), placed). Capacities are updated in place on success."""
    y, placed = place_jobs(np.array([0]), np.array([k]), np.array([b]), free_gpu, free_srv, free_rack, rack_of,
                           num_racks)
    return y[0], bool(placed[0])
