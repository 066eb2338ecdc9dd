"""Random per-slot instances of the ring problem, for tests and benchmarks of the per-slot MILP and GADGET's step."""

from __future__ import annotations

import numpy as np

from clustergym.envs.ringallreduce.topology import Topology

__all__ = ["random_ring_slot"]


def random_ring_slot(rng: np.random.Generator, S: int, n: int, cap_max: int = 3, tight: bool = True):
    """A random per-slot instance of the ring problem (P3's per-slot MILP, gadget.md §V): a topology of ``S``
    servers on 1-3 racks and ``n`` jobs with caps up to ``cap_max``; ``tight`` bandwidths make placement bind.
    Returns ``(topology, jobs)`` with ``jobs`` the arrays ``cap, zeta, z, lam1, lam2, lam3, bw`` (each ``(n,)``):
    the inputs of ``clustergym.envs.ringallreduce.oracle.solve_slot`` and of GADGET's per-slot step."""
    R = int(rng.integers(1, min(3, S) + 1))
    rack_of = np.sort(np.concatenate([np.arange(R), rng.integers(0, R, S - R)]))
    gpus = rng.integers(1, 3, S)
    sbw = rng.uniform(1.0, 4.0, S) if tight else rng.uniform(10, 100, S)
    rbw = rng.uniform(1.0, 5.0, R) if tight else rng.uniform(200, 3200, R)
    topo = Topology(rack_of=rack_of, gpus=gpus, server_bw=np.repeat(sbw[:, None], 2, 1),
                    rack_bw=np.repeat(rbw[:, None], 2, 1))
    cap = rng.integers(1, cap_max + 1, n)
    zeta = rng.integers(50, 500, n).astype(float)
    z = rng.integers(0, 10, n).astype(float)
    # λ3 inside reach so that the increments are not negligible
    lam3 = zeta * (z + rng.uniform(0.5, cap + 0.5))
    jobs = dict(cap=cap, zeta=zeta, z=z, lam1=rng.uniform(1, 100, n), lam2=rng.uniform(0.002, 0.05, n), lam3=lam3,
                bw=rng.uniform(0.5, 3.0, n) if tight else rng.uniform(0.1, 5.0, n))
    return topo, jobs
