"""P1 dynamics, written once for the single env and the native vector env (esdp.md §2).

The single env (``channel_env``) and the vector env (``channel_vector``) run the same code:

* :func:`draw_block` — the randomness of ``_BLOCK`` slots of one env, from its child generators
  (arrivals (B, L) and realised net utilities Z̃ (B, E)); the vector env calls it per sub-env, so
  sub-env i seeded with s_i draws exactly what a single env seeded with s_i draws.
* :func:`channel_slot` — one slot of one env after the action passed the form checks: the
  feasibility rules of eq. 4 (only channels of ports with a job) and eq. 2 (Σ_e a_k^e x_e <= c_k),
  with the deterministic repair, then the reward of eq. 5 and the expected reward ṽᵀx.
  :func:`channel_slot_batch` calls it for every sub-env inside one ``prange`` kernel.

Rewards are sums over the executed channels in edge order, computed by :func:`numpy_sum`, which
reproduces numpy's pairwise summation of a contiguous float64 array bit for bit (so the values equal
``z[executed].sum()``; ``tests/envs/test_vector_envs.py`` checks the two agree).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["BLOCK", "draw_block", "infeasible_message", "numpy_sum", "channel_slot", "channel_slot_batch",
           "OK", "IDLE_CHANNEL", "OVER_CAPACITY"]

BLOCK = 256  # slots of arrivals/utilities drawn at once (same values as drawing slot by slot)

OK, IDLE_CHANNEL, OVER_CAPACITY = 0, 1, 2  # status codes of channel_slot


def infeasible_message(problem, status: int, where: int, used: np.ndarray) -> str:
    """The ValueError text of ``infeasible="raise"`` for a :func:`channel_slot` status (single and vector env)."""
    pb = problem
    if status == IDLE_CHANNEL:
        return (f"infeasible action: channel {where} belongs to port {int(pb.edge_port[where])}, "
                f"which has no job this slot (eq. 4)")
    k = where
    return (f"infeasible action: device type {k} ({pb.device_names[k]}) uses {int(used[k])} > capacity "
            f"{int(pb.capacity[k])} (excess {int(used[k] - pb.capacity[k])}, eq. 2)")


def draw_block(rngs: dict, truth, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """The next ``block`` slots of one env: arrivals (B, L) bool and realised utilities Z̃ (B, E).

    Arrivals 1_l(t) ~ Bernoulli(ρ_l) from ``rngs["arrivals"]``; Z̃_e(t) ~ Beta(a_e, b_e) with mean
    exactly ṽ_e (``truth.beta_a``, ``truth.beta_b``; see ``channel_scenario``, "Noise law") from
    ``rngs["utilities"]``, one (B, E') draw over the E' non-deterministic channels (edge order), so
    the draw layout is fixed; a deterministic channel (a_e = 0) yields ṽ_e.
    """
    rho, v = truth.rho, truth.mean_utility
    arrivals = rngs["arrivals"].random((block, rho.shape[0])) < rho[None, :]
    live = truth.beta_a > 0  # (E,)
    if live.all():
        z = rngs["utilities"].beta(truth.beta_a, truth.beta_b, size=(block, v.shape[0]))
    else:
        z = np.repeat(v[None, :], block, axis=0)
        idx = np.flatnonzero(live)
        if idx.size:
            z[:, idx] = rngs["utilities"].beta(truth.beta_a[idx], truth.beta_b[idx], size=(block, idx.size))
    return arrivals, z


@numba.njit(cache=True, nogil=True)
def _pairwise_block(a, lo, n):  # pragma: no cover - compiled
    # numpy's pairwise_sum (numpy/_core/src/umath/loops_utils.h.src) for n <= 128 items.
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    m = n - (n % 8)
    i = 8
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@numba.njit(cache=True, nogil=True)
def numpy_sum(a, n):  # pragma: no cover - compiled
    """Σ a[:n] exactly as ``a[:n].sum()`` sums a contiguous float64 array (numpy's pairwise summation:
    blocks of <= 128 items, larger ranges split at half rounded down to a multiple of 8, left + right).
    The recursion runs on an explicit stack (numba cannot cache recursive functions)."""
    if n <= 128:
        return _pairwise_block(a, 0, n)
    lo_s = np.empty(64, dtype=np.int64)
    n_s = np.empty(64, dtype=np.int64)
    stage = np.empty(64, dtype=np.int64)  # 0: not split yet, 1: left half pending, 2: right half pending
    left = np.empty(64)
    sp = 0
    lo_s[0], n_s[0], stage[0] = 0, n, 0
    ret = 0.0
    have_ret = False
    while True:
        if have_ret:
            if sp < 0:
                return ret
            if stage[sp] == 1:  # left half done: keep it, evaluate the right half
                left[sp] = ret
                stage[sp] = 2
                h = n_s[sp] // 2
                h -= h % 8
                sp += 1
                lo_s[sp], n_s[sp], stage[sp] = lo_s[sp - 1] + h, n_s[sp - 1] - h, 0
                have_ret = False
            else:  # right half done
                ret = left[sp] + ret
                sp -= 1
            continue
        m = n_s[sp]
        if m <= 128:
            ret = _pairwise_block(a, lo_s[sp], m)
            sp -= 1
            have_ret = True
        else:
            stage[sp] = 1
            h = m // 2
            h -= h % 8
            sp += 1
            lo_s[sp], n_s[sp], stage[sp] = lo_s[sp - 1], h, 0


@numba.njit(cache=True, nogil=True)
def channel_slot(x, mask, demand, capacity, z, v, repair, x_out, used, buf):  # pragma: no cover - compiled
    """One slot of P1 for one env.

    Args:
        x: (E,) 0/1 action (any bool/int dtype; values already checked to be 0 or 1).
        mask: (E,) bool, channels of ports with a job (eq. 4).
        demand: (E, K) int a_k^e; capacity: (K,) int c_k (eq. 2).
        z: (E,) realised Z̃_e(t); v: (E,) hidden means ṽ_e.
        repair: True for ``infeasible="repair"``, False for ``"raise"``.
        x_out: (E,) bool, receives the executed channels; used: (K,) int, devices in use;
        buf: (E,) float scratch.

    Returns:
        (status, where, dropped, reward, expected): status OK, IDLE_CHANNEL (``where`` = the first
        channel of a port without a job; only when not repairing) or OVER_CAPACITY (``where`` = the
        device type of largest excess, ``used`` holds the demand; only when not repairing);
        ``dropped`` channels removed by the repair; reward Σ_e x_e Z̃_e (eq. 5); expected ṽᵀx.
    """
    E, K = demand.shape
    dropped = 0
    for e in range(E):  # eq. 4: channels of ports without a job cannot run
        sel = x[e] != 0
        if sel and not mask[e]:
            if not repair:
                return IDLE_CHANNEL, e, 0, 0.0, 0.0
            dropped += 1
            sel = False
        x_out[e] = sel
    used[:] = 0
    for e in range(E):
        if x_out[e]:
            for k in range(K):
                used[k] += demand[e, k]
    worst = -1
    worst_excess = 0
    for k in range(K):  # eq. 2; the first device type of largest excess
        if used[k] - capacity[k] > worst_excess:
            worst_excess = used[k] - capacity[k]
            worst = k
    if worst >= 0:
        if not repair:
            return OVER_CAPACITY, worst, dropped, 0.0, 0.0
        # Keep the longest prefix (edge order) of the selection that fits = drop from the end.
        used[:] = 0
        full = False
        for e in range(E):
            if not x_out[e]:
                continue
            if not full:
                for k in range(K):
                    if used[k] + demand[e, k] > capacity[k]:
                        full = True
                        break
            if full:
                x_out[e] = False
                dropped += 1
            else:
                for k in range(K):
                    used[k] += demand[e, k]
    n = 0
    for e in range(E):
        if x_out[e]:
            buf[n] = z[e]
            n += 1
    reward = numpy_sum(buf, n)  # eq. 5
    n = 0
    for e in range(E):
        if x_out[e]:
            buf[n] = v[e]
            n += 1
    expected = numpy_sum(buf, n)
    return 0, -1, dropped, reward, expected


@numba.njit(cache=True, parallel=True)
def channel_slot_batch(x, mask, demand, capacity, z_block, pos, v, repair, stepping,
                       x_out, used, status, where, dropped, reward, expected):  # pragma: no cover - compiled
    """:func:`channel_slot` for N envs: x, mask, x_out (N, E); z_block (N, B, E) with the current slot of
    env i at ``pos[i]``; demand (N, E, K), capacity (N, K), v (N, E): each sub-env's instance (padding
    channels of a padded env: demand 0, v 0, mask always False, so they are never executed); stepping
    (N,) bool (others are skipped: zero outputs); outputs with a leading N."""
    N, E = x.shape
    for i in numba.prange(N):
        if not stepping[i]:
            x_out[i, :] = False
            used[i, :] = 0
            status[i], where[i], dropped[i], reward[i], expected[i] = 0, -1, 0, 0.0, 0.0
            continue
        buf = np.empty(E)
        st, wh, dr, r, ex = channel_slot(x[i], mask[i], demand[i], capacity[i], z_block[i, pos[i]], v[i], repair,
                                         x_out[i], used[i], buf)
        status[i] = st
        where[i] = wh
        dropped[i] = dr
        reward[i] = r
        expected[i] = ex
