"""The compiled kernels of one P2 slot (OGASched paper, ogasched.md §2: eqs. 3–5, 7 and 27), run by
:class:`~clustergym.envs.multiserver.allocation.dynamics.AllocationDynamics`.

The dynamics of one slot are written once, as one per-env kernel that the single env calls directly
and the native vector env calls for every sub-env inside one ``prange`` kernel (:func:`step_batch`),
so the two cannot drift:

* :func:`slot_step` — the feasibility check of eqs. 3–4 (non-finite entries, entries outside
  [0, a] beyond the tolerance, per-server sums Σ_{l∈L_r} y compared with c_r^k) and eq. 5 with
  eq. 7 for the ports with a job (per-port gain Σ_k Σ_{r∈R_l} f_r^k(y) of eq. 27, per-port per-type
  sums Σ_{r∈R_l} y, the dominant overhead max_k β_k Σ y, the devices used by ports with a job), in
  one call: a branch-free pass over the contiguous allocation for the checks, then one pass over
  the *live* entries (a > 0 and c_r^k > 0), grouped by port and utility family so the utility
  loops have no family branch. Entries that are structurally zero (a = 0 or c_r^k = 0) are only
  read by the check pass; the rare non-zero ones (within the tolerance, or infeasible) are then
  added after the live ones. Ports without a job get their server sums only.
* :func:`build_plan` — the static entry lists of one problem that :func:`slot_step` walks (:class:`SlotPlan`).
* :func:`reward_sums` — eq. 5's per-port sums for any y in edge/device order
  (:meth:`~clustergym.envs.multiserver.allocation.dynamics.AllocationDynamics.parts`).

The summation order of every sum is fixed by the kernel (documented in :func:`slot_step`); it
differs from that of :func:`reward_sums` and of the numpy reference in ``tests/envs/multiserver/allocation/test_allocation_env.py``,
which agree to rounding (``rtol=1e-12`` in the test). The kernel accepts float32 or float64
allocations (numba compiles one version per dtype; float32 values widen exactly to float64, so the
results equal those of the float64 copy of the action).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from clustergym.envs.multiserver.projection import max_degree, project_into

__all__ = ["SlotPlan", "build_plan", "reward_sums", "slot_step", "step_batch"]


@numba.njit(cache=True, nogil=True, inline="always")
def _family_utility(v, a, ia, c):  # pragma: no cover - compiled
    """f_r^k(v) of eq. 27 for family code c (0 linear, 1 log, 2 reciprocal, 3 poly), α = a, 1/α = ia."""
    if c == 0:
        return a * v
    if c == 1:
        return a * math.log1p(v)
    if c == 2:
        return ia - 1.0 / (v + a)
    return a * math.sqrt(v + 1.0) - a

@numba.njit(cache=True, nogil=True)
def utility(v, a, c):  # pragma: no cover - compiled
    """f_r^k(v) of eq. 27 for family code c and α = a."""
    return _family_utility(v, a, 1.0 / a if c == 2 else 0.0, c)  # α may be 0 outside the reciprocal family

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
            gain[l] += utility(v, a, code[e, k])
            per_type[l, k] += v
    return gain, per_type


@numba.njit(cache=True, nogil=True, inline="always")
def _family_block(y, live, live_srv, live_k, live_a, live_ia, j, hi, l, c, sums,
                  per_type):  # pragma: no cover - compiled
    """Σ f(y) over the live entries j..hi-1 of port l, all of family c (see :func:`slot_step`).

    Adds each value to its server sum and to ``per_type[l]``; returns g_even + g_odd.
    """
    g0 = 0.0
    g1 = 0.0
    while j + 1 < hi:
        v = np.float64(y[live[j]])
        v1 = np.float64(y[live[j + 1]])
        sums[live_srv[j]] += v
        sums[live_srv[j + 1]] += v1
        per_type[l, live_k[j]] += v
        per_type[l, live_k[j + 1]] += v1
        g0 += _family_utility(v, live_a[j], live_ia[j], c)
        g1 += _family_utility(v1, live_a[j + 1], live_ia[j + 1], c)
        j += 2
    if j < hi:
        v = np.float64(y[live[j]])
        sums[live_srv[j]] += v
        per_type[l, live_k[j]] += v
        g0 += _family_utility(v, live_a[j], live_ia[j], c)
    return g0 + g1

@numba.njit(cache=True, nogil=True, inline="always")  # inlined into step_batch: no per-env call
def slot_step(y, x, box_hi, dead_mask, live, live_srv, live_k, live_a, live_ia, ptr, dead, dead_srv, dead_port,
              dead_k, dead_a, dead_code, cap_tol, tol, beta, util_w, sums, gain, per_type, port_reward,
              used):  # pragma: no cover - compiled
    """One slot of one env: the feasibility check of eqs. 3–4 and eq. 5 (eq. 7), fused.

    y is the flat (E·K,) allocation (float32 or float64), x (L,) the arrivals, the entry lists come
    from :func:`build_plan` (``box_hi`` = a + tol flat) and ``cap_tol`` is the flat (R·K,) c + tol.
    Scratch: ``sums`` (R·K,) receives Σ_{l∈L_r} y, ``gain`` (L,) and ``per_type`` (L, K). Writes
    x_l q_l into ``port_reward`` (L,) and the devices allocated to ports with a job into ``used``
    (K,). Returns (non-finite entries, finite entries outside [0, a] beyond ``tol``, (r, k) pairs
    with Σ y > c + tol, Σ_l x_l gain_l, Σ_l x_l overhead_l, utilisation Σ_k used_k w_k); with a
    non-finite entry only the first count is set, and the reward parts are meaningful only for a
    feasible y (callers repair and call again otherwise).

    A branch-free pass over the contiguous y counts the non-finite and out-of-box entries and
    whether any dead entry is non-zero. A second pass visits the live entries port by port, family
    by family, in edge/device order inside a block: server sums and per-type sums add in that
    order; a port's gain adds, block after block, g_even + g_odd, the sums of the utilities at even
    and odd positions of the block (two accumulators, so that consecutive additions do not wait
    for each other). All sums then add the dead entries that are non-zero, in edge/device order.
    Utilities are evaluated for every live entry of a port with a job, zeros included
    (f(0) = ±0 and x + ±0 = x for the sums here, which start at +0, so this equals skipping them);
    the reciprocal family uses the precomputed 1/α (the same division, so the same bits).

    An action with a non-zero dead entry or an entry outside [0, a] (what a sampled action looks
    like; a feasible-by-construction one has exact zeros there) first gets the server sums alone,
    in the same order, so an infeasible one returns without evaluating eq. 5 (reward parts 0,
    ``port_reward`` and ``used`` zeroed); the counts and ``sums`` are those of the full pass.
    """
    nonfinite, bad, stray = _check_entries(y, box_hi, dead_mask, tol)
    if nonfinite:
        return nonfinite, bad, 0, 0.0, 0.0, 0.0
    if stray or bad:  # not built to be feasible (e.g. sampled): check eq. 4 before evaluating eq. 5
        _server_sums(y, live, live_srv, dead, dead_srv, sums)
        over = _count_over(sums, cap_tol)
        if bad or over:  # infeasible: the reward parts are not needed (callers repair or raise)
            port_reward[:] = 0.0
            used[:] = 0.0
            return nonfinite, bad, over, 0.0, 0.0, 0.0
    sums[:] = 0.0
    per_type[:, :] = 0.0
    port_reward[:] = 0.0
    used[:] = 0.0
    _live_pass(y, x, live, live_srv, live_k, live_a, live_ia, ptr, sums, gain, per_type)
    if stray:  # rare: values within tol (or beyond) on dead entries
        _dead_pass(y, x, dead, dead_srv, dead_port, dead_k, dead_a, dead_code, sums, gain, per_type)
    over = _count_over(sums, cap_tol)
    g_sum, o_sum, util = _reward_parts(x, beta, util_w, gain, per_type, port_reward, used)
    return nonfinite, bad, over, g_sum, o_sum, util


@numba.njit(cache=True, nogil=True, inline="always")
def _check_entries(y, box_hi, dead_mask, tol):  # pragma: no cover - compiled
    """The branch-free pass of :func:`slot_step` over the contiguous y: (non-finite entries, finite entries
    outside [0, a] beyond ``tol`` (eq. 3), non-zero dead entries)."""
    nonfinite = 0
    bad = 0
    stray = 0
    for j in range(y.shape[0]):  # vectorisable: no branches
        v = np.float64(y[j])
        finite = abs(v) <= 1.7976931348623157e308  # False for NaN and ±inf
        nonfinite += not finite
        bad += finite & ((v < -tol) | (v > box_hi[j]))
        stray += dead_mask[j] & (v != 0.0)
    return nonfinite, bad, stray


@numba.njit(cache=True, nogil=True, inline="always")
def _server_sums(y, live, live_srv, dead, dead_srv, sums):  # pragma: no cover - compiled
    """Σ_{l∈L_r} y alone into ``sums`` (R·K,), in the order of the main pass of :func:`slot_step`: the live
    entries, then the dead ones that are non-zero."""
    sums[:] = 0.0
    for j in range(live.shape[0]):
        sums[live_srv[j]] += np.float64(y[live[j]])
    for j in range(dead.shape[0]):
        v = np.float64(y[dead[j]])
        if v != 0.0:
            sums[dead_srv[j]] += v


@numba.njit(cache=True, nogil=True, inline="always")
def _count_over(sums, cap_tol):  # pragma: no cover - compiled
    """The (r, k) pairs with Σ_{l∈L_r} y > c_r^k + tol (eq. 4)."""
    over = 0
    for s in range(sums.shape[0]):
        if sums[s] > cap_tol[s]:
            over += 1
    return over


@numba.njit(cache=True, nogil=True, inline="always")
def _live_pass(y, x, live, live_srv, live_k, live_a, live_ia, ptr, sums, gain, per_type):  # pragma: no cover
    """The main pass of :func:`slot_step` over the live entries, port by port: server sums only for a port
    without a job (gain 0); for a port with a job its family blocks (:func:`_family_block`) in plan order."""
    for l in range(x.shape[0]):
        if not x[l]:  # idle port: server sums only
            for j in range(ptr[l, 0], ptr[l, 4]):
                sums[live_srv[j]] += np.float64(y[live[j]])
            gain[l] = 0.0
            continue
        g = 0.0
        for c in range(4):  # utility families in plan order: linear, log, reciprocal, poly
            g += _family_block(y, live, live_srv, live_k, live_a, live_ia, ptr[l, c], ptr[l, c + 1], l, c,
                               sums, per_type)
        gain[l] = g


@numba.njit(cache=True, nogil=True, inline="always")
def _dead_pass(y, x, dead, dead_srv, dead_port, dead_k, dead_a, dead_code, sums, gain,
               per_type):  # pragma: no cover - compiled
    """The dead entries that are non-zero, in edge/device order, added to the server sums and, for a port with a
    job, to its per-type sums and gain (eq. 27)."""
    for j in range(dead.shape[0]):
        v = np.float64(y[dead[j]])
        if v != 0.0:
            sums[dead_srv[j]] += v
            l = dead_port[j]
            if x[l]:
                per_type[l, dead_k[j]] += v
                gain[l] += utility(v, dead_a[j], dead_code[j])


@numba.njit(cache=True, nogil=True, inline="always")
def _reward_parts(x, beta, util_w, gain, per_type, port_reward, used):  # pragma: no cover - compiled
    """Eq. 5 with eq. 7 from the per-port sums: x_l q_l into ``port_reward`` (L,), the devices of ports with a
    job into ``used`` (K,); returns (Σ_l x_l gain_l, Σ_l x_l overhead_l, utilisation Σ_k used_k w_k)."""
    K = per_type.shape[1]
    g_sum = 0.0
    o_sum = 0.0
    for l in range(x.shape[0]):
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
def step_batch(y, x, stepping, box_hi, dead_mask, live, live_srv, live_k, live_a, live_ia, ptr, dead, dead_srv,
               dead_port, dead_k, dead_a, dead_code, cap_tol, tol, beta, util_w,
               repair, out, srv_ptr, srv_edge, p_group, p_upper, p_cap,
               nonfinite, bad_box, bad_cap, port_reward, gain, overhead, used, util):  # pragma: no cover
    """:func:`slot_step` for N envs at once (``prange`` over chunks of sub-envs, scratch per chunk).

    y (N, E·K) float32/float64; x (N, L) bool arrivals; stepping (N,) bool. Outputs, all with a
    leading N axis: nonfinite, bad_box, bad_cap (counts of the action as sent), port_reward (N, L),
    gain, overhead, util (N,), used (N, K). With ``repair`` True, a stepping sub-env whose action
    is finite but outside Y is projected onto Y by ``projection.project_into`` (the kernel the
    single env and OGASched call; args ``srv_ptr, srv_edge, p_group, p_upper, p_cap`` of
    ``AllocationLayout.groups``) into ``out[i]`` (N, E·K) float64, and eq. 5 is
    evaluated on that projection; rows of ``out`` that are not repaired are left untouched.
    Sub-envs that do not step, are non-finite or are infeasible without ``repair`` get zero
    rewards here.
    """
    N = y.shape[0]
    L = x.shape[1]
    K = used.shape[1]
    RK = cap_tol.shape[0]
    chunk = 16
    for c in numba.prange((N + chunk - 1) // chunk):
        sums = np.empty(RK)
        g_l = np.empty(L)
        per_type = np.empty((L, K))
        buf = np.empty(2 * max_degree(srv_ptr))
        for i in range(c * chunk, min(N, (c + 1) * chunk)):
            nf, bb, bc, g, o, u = slot_step(y[i], x[i], box_hi, dead_mask, live, live_srv, live_k, live_a, live_ia,
                                            ptr, dead, dead_srv, dead_port, dead_k, dead_a, dead_code,
                                            cap_tol, tol, beta, util_w, sums, g_l, per_type, port_reward[i],
                                            used[i])
            nonfinite[i] = nf
            bad_box[i] = bb
            bad_cap[i] = bc
            feasible = nf == 0 and bb == 0 and bc == 0
            if repair and stepping[i] and nf == 0 and not feasible:  # Π_Y (eqs. 11–13), then eq. 5 on it
                project_into(y[i], out[i], srv_ptr, srv_edge, p_group, p_upper, p_cap, sums, buf)
                _, _, _, g, o, u = slot_step(out[i], x[i], box_hi, dead_mask, live, live_srv, live_k, live_a,
                                             live_ia, ptr, dead, dead_srv, dead_port, dead_k, dead_a, dead_code,
                                             cap_tol, tol, beta, util_w, sums, g_l, per_type, port_reward[i],
                                             used[i])
                feasible = True
            if stepping[i] and feasible:
                gain[i] = g
                overhead[i] = o
                util[i] = u
            else:
                port_reward[i, :] = 0.0
                used[i, :] = 0.0
                gain[i] = 0.0
                overhead[i] = 0.0
                util[i] = 0.0


class SlotPlan(NamedTuple):
    """The static inputs of :func:`slot_step` for one problem, in the kernel's argument order."""

    box_hi: np.ndarray  # (E·K,) a + tol, flat
    dead_mask: np.ndarray  # (E·K,) bool, entry is structurally zero (a = 0 or c_r^k = 0)
    live: np.ndarray  # (n_live,) int64 flat indices e·K + k, by port, family, edge/device
    live_srv: np.ndarray  # (n_live,) int64 server slot r·K + k
    live_k: np.ndarray  # (n_live,) int64 device type k
    live_a: np.ndarray  # (n_live,) α_r^k of eq. 27
    live_ia: np.ndarray  # (n_live,) 1/α_r^k (read by the reciprocal family only)
    ptr: np.ndarray  # (L, 5) int64, live[ptr[l, c]:ptr[l, c + 1]] = port l, family c
    dead: np.ndarray  # (n_dead,) int64 flat indices of the dead entries, edge/device order
    dead_srv: np.ndarray  # (n_dead,) int64 server slot r·K + k
    dead_port: np.ndarray  # (n_dead,) int64 port l
    dead_k: np.ndarray  # (n_dead,) int64 device type k
    dead_a: np.ndarray  # (n_dead,) α_r^k
    dead_code: np.ndarray  # (n_dead,) int64 family code of eq. 27
    cap_tol: np.ndarray  # (R·K,) c_r^k + tol, flat
    tol: float  # feasibility tolerance (device units)
    beta: np.ndarray  # (K,) β_k of eq. 5
    util_w: np.ndarray  # (K,) utilisation weight: 1 / (Σ_r c_r^k · #types that exist), 0 where none


def build_plan(upper, capacity, edge_server, edge_port, alpha_e, code_e, num_ports, tol, cap_tol, beta,
               util_w) -> SlotPlan:
    """The static entry lists of :func:`slot_step` for one problem, with its constants (:class:`SlotPlan`).

    ``box_hi`` (E·K,) = a + tol (the same addition the check would do) and ``dead_mask`` (E·K,).
    An entry (e, k) is *live* when its box a_e^k > 0 and its server has c_r^k > 0, else *dead*: a
    feasible y has |y| <= tol there, and in practice exactly 0. Live entries are listed port by
    port, then family by family (codes 0–3 of eq. 27), then in edge/device order, so the utility
    loops run without a family branch; ``ptr`` (L, 5) gives each (port, family) block; with their
    flat server slot r·K + k, device k, α and 1/α. Dead entries are listed in edge/device order
    (flat index, server slot, port, device, α, family code) and only looked at when one is non-zero.
    """
    upper = np.asarray(upper, dtype=np.float64)
    E, K = upper.shape
    srv = np.asarray(edge_server, dtype=np.int64)
    port = np.asarray(edge_port, dtype=np.int64)
    cap = np.asarray(capacity, dtype=np.float64)
    alpha = np.asarray(alpha_e, dtype=np.float64)
    code = np.asarray(code_e, dtype=np.int64)
    if code.min() < 0 or code.max() > 3:
        raise ValueError("utility codes must be 0..3 (eq. 27)")
    e_idx, k_idx = np.meshgrid(np.arange(E), np.arange(K), indexing="ij")
    live = (upper > 0) & (cap[srv[:, None], np.arange(K)[None, :]] > 0)
    lives, ptr = [], np.zeros((num_ports, 5), dtype=np.int64)
    n = 0
    for l in range(num_ports):
        for c in range(4):
            ptr[l, c] = n
            sel = np.flatnonzero((live & (port[:, None] == l) & (code == c)).ravel())  # edge, then device order
            lives.append(sel)
            n += sel.size
        ptr[l, 4] = n
    lf = np.concatenate(lives).astype(np.int64)
    df = np.flatnonzero(~live.ravel()).astype(np.int64)
    ef, kf = e_idx.ravel(), k_idx.ravel()
    a_f, up_f = alpha.ravel(), upper.ravel()
    cc = np.ascontiguousarray
    return SlotPlan(cc(up_f + tol), cc(~live.ravel()), cc(lf), cc(srv[ef[lf]] * K + kf[lf]), cc(kf[lf]), cc(a_f[lf]),
                    cc(_inv(a_f[lf])), cc(ptr), cc(df), cc(srv[ef[df]] * K + kf[df]), cc(port[ef[df]]), cc(kf[df]),
                    cc(a_f[df]), cc(code.ravel()[df]), cap_tol, tol, beta, util_w)


def _inv(a: np.ndarray) -> np.ndarray:
    """1/α (only read for the reciprocal family, whose α > 0)."""
    with np.errstate(divide="ignore"):
        return 1.0 / a
