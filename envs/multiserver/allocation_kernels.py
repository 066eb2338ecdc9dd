"""Fused per-step kernels for P2 (numba when installed; the numpy code in ``allocation_env`` is the
reference and the fallback, and ``tests/test_allocation_env.py`` checks that both agree).

The dynamics of one slot are written once, as per-env kernels that the single env calls directly
and the native vector env (``allocation_vector``) calls for every sub-env inside one ``prange``
kernel (``step_batch``), so the two cannot drift (STYLE.md, "copied dynamics"):

* :func:`check_slot` — one pass over the (E, K) allocation for the feasibility check of eqs. 3–4
  (non-finite entries, entries outside [0, a] beyond the tolerance, per-server sums Σ_{l∈L_r} y
  compared with c_r^k);
* :func:`slot_reward` — eq. 5 with eq. 7 for the ports with a job: per-port gain Σ_k Σ_{r∈R_l}
  f_r^k(y) (eq. 27), per-port per-type sums Σ_{r∈R_l} y, the dominant overhead max_k β_k Σ y, and
  the devices used by ports with a job. Utilities are evaluated only where they count: ports with
  a job and entries y ≠ 0 (f(0) = ±0 for every family of eq. 27 and adding ±0 to a sum that starts
  at +0 is exact, so skipping them changes no bit).

Both accept float32 or float64 allocations (numba compiles one version per dtype; float32 values
widen exactly to float64, so the results equal those of the float64 copy of the action).
:func:`reward_sums` serves :class:`~clustergym.envs.multiserver.allocation_env.RewardModel`.
"""

from __future__ import annotations

import math

import numpy as np

try:
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "reward_sums", "check_slot", "slot_reward", "step_batch"]

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

else:  # pragma: no cover
    reward_sums = None


if HAVE_NUMBA:

    @numba.njit(cache=True, nogil=True)
    def utility(v, a, c):  # pragma: no cover - compiled
        """f_r^k(v) of eq. 27 for family code c (0 linear, 1 log, 2 reciprocal, 3 poly) and α = a."""
        if c == 0:
            return a * v
        if c == 1:
            return a * math.log1p(v)
        if c == 2:
            return 1.0 / a - 1.0 / (v + a)
        return a * math.sqrt(v + 1.0) - a

    @numba.njit(cache=True, nogil=True)
    def check_slot(y, upper, edge_server, cap_tol, tol, sums):  # pragma: no cover - compiled
        """Feasibility of y (E, K) for eqs. 3–4: (non-finite entries, entries outside [0, a] beyond ``tol``,
        (r, k) pairs with Σ_{l∈L_r} y > c_r^k + tol). ``sums`` (R, K) receives Σ_{l∈L_r} y (non-finite
        entries left out)."""
        E, K = y.shape
        sums[:, :] = 0.0
        bad = 0
        nonfinite = 0
        for e in range(E):
            r = edge_server[e]
            for k in range(K):
                v = np.float64(y[e, k])
                if not math.isfinite(v):
                    nonfinite += 1
                    continue
                if v < -tol or v > upper[e, k] + tol:
                    bad += 1
                sums[r, k] += v
        over = 0
        for r in range(sums.shape[0]):
            for k in range(K):
                if sums[r, k] > cap_tol[r, k]:
                    over += 1
        return nonfinite, bad, over

    @numba.njit(cache=True, nogil=True)
    def slot_reward(y, x, alpha, code, edge_port, beta, util_w, gain, per_type, port_reward, used):  # pragma: no cover
        """Eq. 5 (nice setup, eq. 7) for one slot and one env, over the ports with a job (x_l = 1).

        Writes x_l q_l into ``port_reward`` (L,) and the devices allocated to ports with a job into
        ``used`` (K,); ``gain`` (L,) and ``per_type`` (L, K) are scratch. Returns (Σ_l x_l gain_l,
        Σ_l x_l overhead_l, utilisation Σ_k used_k w_k). Sums run in edge order, then device order, as
        in :func:`reward_sums`; the utilisation is a plain loop (not a BLAS dot, whose summation order
        depends on the BLAS build), so the single and the vector env agree on every machine.
        """
        E, K = y.shape
        L = x.shape[0]
        gain[:] = 0.0
        per_type[:, :] = 0.0
        port_reward[:] = 0.0
        used[:] = 0.0
        for e in range(E):
            l = edge_port[e]
            if not x[l]:
                continue  # idle port: its utilities never count
            for k in range(K):
                v = np.float64(y[e, k])
                if v == 0.0:
                    continue  # f(0) = ±0: skipping is exact (module docstring)
                gain[l] += utility(v, alpha[e, k], code[e, k])
                per_type[l, k] += v
        g_sum = 0.0
        o_sum = 0.0
        for l in range(L):
            if not x[l]:
                continue
            o = -np.inf
            for k in range(K):
                o = max(o, beta[k] * per_type[l, k])  # max_k β_k Σ_{r∈R_l} y
                used[k] += per_type[l, k]
            port_reward[l] = gain[l] - o
            g_sum += gain[l]
            o_sum += o
        util = 0.0
        for k in range(K):
            util += used[k] * util_w[k]
        return g_sum, o_sum, util

    @numba.njit(cache=True, parallel=True)
    def step_batch(y, x, stepping, upper, edge_server, cap_tol, tol, alpha, code, edge_port, beta, util_w,
                   nonfinite, bad_box, bad_cap, port_reward, gain, overhead, used, util):  # pragma: no cover
        """:func:`check_slot` then, for feasible sub-envs that step, :func:`slot_reward`, for N envs at once.

        y (N, E, K) float32/float64; x (N, L) bool arrivals; stepping (N,) bool. Outputs, all with a
        leading N axis: nonfinite, bad_box, bad_cap (counts), port_reward (N, L), gain, overhead, util
        (N,), used (N, K). Sub-envs that do not step or are infeasible get zero rewards here.
        """
        N, E, K = y.shape
        L = x.shape[1]
        R = cap_tol.shape[0]
        for i in numba.prange(N):
            sums = np.empty((R, K))
            nf, bb, bc = check_slot(y[i], upper, edge_server, cap_tol, tol, sums)
            nonfinite[i] = nf
            bad_box[i] = bb
            bad_cap[i] = bc
            if stepping[i] and nf == 0 and bb == 0 and bc == 0:
                g_l = np.empty(L)
                per_type = np.empty((L, K))
                g, o, u = slot_reward(y[i], x[i], alpha, code, edge_port, beta, util_w, g_l, per_type,
                                      port_reward[i], used[i])
                gain[i] = g
                overhead[i] = o
                util[i] = u
            else:
                port_reward[i, :] = 0.0
                used[i, :] = 0.0
                gain[i] = 0.0
                overhead[i] = 0.0
                util[i] = 0.0

else:  # pragma: no cover
    utility = check_slot = slot_reward = step_batch = None
