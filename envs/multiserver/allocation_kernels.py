"""Fused per-step kernels for P2 (numba when installed; the numpy code in ``allocation_env`` is the
reference and the fallback, and ``tests/test_allocation_env.py`` checks that both agree).

One pass over the (E, K) allocation computes what eq. 5 needs (per-port gain Σ f_r^k and per-port,
per-type sums Σ_{r∈R_l} y) and what the feasibility check of eqs. 3–4 needs (entries outside [0, a],
per-server sums Σ_{l∈L_r} y).
"""

from __future__ import annotations

import math

import numpy as np

try:
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "reward_sums", "check_sums"]

if HAVE_NUMBA:

    @numba.njit(cache=True, nogil=True)
    def reward_sums(y, alpha, code, edge_port, num_ports):  # pragma: no cover - compiled
        """(gain (L,), per_type (L, K)) for y (E, K): eq. 27 utilities summed per port, and Σ_{r∈R_l} y."""
        E, K = y.shape
        gain = np.zeros(num_ports)
        per_type = np.zeros((num_ports, K))
        for e in range(E):
            l = edge_port[e]
            for k in range(K):
                v = y[e, k]
                a = alpha[e, k]
                c = code[e, k]
                if c == 0:
                    f = a * v
                elif c == 1:
                    f = a * math.log1p(v)
                elif c == 2:
                    f = 1.0 / a - 1.0 / (v + a)
                else:
                    f = a * math.sqrt(v + 1.0) - a
                gain[l] += f
                per_type[l, k] += v
        return gain, per_type

    @numba.njit(cache=True, nogil=True)
    def check_sums(y, upper, edge_server, num_servers, tol):  # pragma: no cover - compiled
        """(non-finite entries, entries outside [0, a] beyond tol, per-server sums (R, K))."""
        E, K = y.shape
        sums = np.zeros((num_servers, K))
        bad = 0
        nonfinite = 0
        for e in range(E):
            r = edge_server[e]
            for k in range(K):
                v = y[e, k]
                if not math.isfinite(v):
                    nonfinite += 1
                    continue
                if v < -tol or v > upper[e, k] + tol:
                    bad += 1
                sums[r, k] += v
        return nonfinite, bad, sums
else:  # pragma: no cover
    reward_sums = None
    check_sums = None

if HAVE_NUMBA:

    @numba.njit(cache=True, nogil=True)
    def step_sums(y, alpha, code, edge_port, beta, x, num_ports):  # pragma: no cover - compiled
        """Eq. 5 for one slot: (x_l q_l (L,), Σ_l x_l gain_l, Σ_l x_l overhead_l, used (K,) by ports with a job)."""
        gain, per_type = reward_sums(y, alpha, code, edge_port, num_ports)
        K = y.shape[1]
        port_reward = np.zeros(num_ports)
        used = np.zeros(K)
        g_sum = 0.0
        o_sum = 0.0
        for l in range(num_ports):
            if not x[l]:
                continue
            o = -np.inf
            for k in range(K):
                o = max(o, beta[k] * per_type[l, k])  # max_k β_k Σ_{r∈R_l} y
                used[k] += per_type[l, k]
            port_reward[l] = gain[l] - o
            g_sum += gain[l]
            o_sum += o
        return port_reward, g_sum, o_sum, used
else:  # pragma: no cover
    step_sums = None
