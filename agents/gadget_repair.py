"""The repair of a rounded try of GADGET's Algorithm 2 that overfills a resource (our choice; the paper has none).

Algorithm 2's randomized rounding (gadget.md §V, lines 7–9) draws one mapping per job independently; a try may
overfill the GPUs of a server (eq. 18) or a server or rack uplink direction (eq. 19). Theorem 8 allows such
overruns; a real cluster does not. With ``rounding_repair=True`` :class:`~clustergym.agents.gadget.GADGET` keeps
such a try after :func:`repair_overfill` and gives the removed jobs the capacity left with
:func:`reoffer_support` (the options and their measured effect: the module docstring of
:mod:`clustergym.agents.gadget`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["repair_overfill", "reoffer_support"]


def repair_overfill(loads: np.ndarray, limit: np.ndarray, weight: np.ndarray, log_pi: np.ndarray) -> np.ndarray:
    """Make one rounded try capacity-respecting by removing jobs that use an overfilled resource.

    Args:
        loads: (D, n) resource loads (GPUs per server, Gbps per server / rack uplink) of the
            mapping each of n chosen jobs drew.
        limit: (D,) capacity left on each resource.
        weight: (n,) the increment each job brings in the objective Algorithm 2 maximises
            (π_iκi, or its floored rescaling in the last lexicographic round).
        log_pi: (n,) the true log π_iκi, which breaks ties of ``weight`` (the floored round gives
            many jobs the same weight).
    Returns:
        keep: (n,) bool.

    While some resource is overfilled, the job with the smallest (weight, log π) among the jobs
    whose mapping puts load on an overfilled resource is removed (exact ties: the newest, i.e. the
    highest index). A job that uses no overfilled resource is never removed; each removal lowers
    the load of some overfilled resource, so at most n removals.
    """
    n = loads.shape[1]
    keep = np.ones(n, dtype=bool)
    total = loads.sum(axis=1)
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((-np.arange(n), log_pi, weight))] = np.arange(n)  # 0 = removed first
    while True:
        over = total > limit
        if not over.any():
            return keep
        users = keep & (loads[over] > 0).any(axis=0)
        cand = np.flatnonzero(users)
        if cand.size == 0:  # an "overfilled" resource nobody in the try uses (limit < 0 by rounding)
            return keep
        j = cand[np.argmin(rank[cand])]
        keep[j] = False
        total = total - loads[:, j]


def reoffer_support(pick: np.ndarray, dropped: np.ndarray, support: list, loads: np.ndarray, load: np.ndarray,
                    limit: np.ndarray, log_pi: np.ndarray) -> None:
    """Re-offer jobs removed by :func:`repair_overfill` the capacity left (in place on ``pick``).

    Dropped jobs, in decreasing true increment log π, take the first mapping of their own M_i (the
    mappings with φ_i^k > 0, in decreasing φ) that fits what is left. The result is still one
    mapping of M_i or none per job, i.e. an outcome Algorithm 2's rounding (line 8) can draw;
    mappings outside M_i (φ = 0) are never offered.
    """
    for t in dropped[np.argsort(-log_pi[dropped], kind="stable")]:
        for col in support[t]:
            if (load + loads[:, col] <= limit).all():
                pick[t] = col
                load += loads[:, col]
                break
