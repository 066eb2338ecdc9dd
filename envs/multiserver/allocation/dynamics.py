"""P2 dynamics (OGASched paper, ogasched.md §2): one object, :class:`AllocationDynamics`, that the
single env, the native vector env and the PettingZoo env all use (STYLE.md, "copied dynamics").

:class:`AllocationDynamics` owns, for one problem:

* the **plan** (:class:`SlotPlan`, a NamedTuple): the static entry lists the fused kernel walks
  (:func:`build_plan`) and its constants (c + tol, β, the utilisation weights);
* the **scratch buffers** of one slot (``sums`` (R, K) = Σ_{l∈L_r} y, per-port gain and per-type sums);
* the **arrival draws**: x_l(t) ~ Bernoulli(ρ_l) (eq. 1) in blocks of :data:`ARRIVAL_BLOCK` slots
  from the caller's generator (:meth:`AllocationDynamics.draw_arrivals`);
* **one slot** (:meth:`AllocationDynamics.step` -> :class:`SlotResult`): the check of eqs. 3–4, the
  repair by the exact Euclidean projection Π_Y (eqs. 11–13) or the ValueError of
  ``infeasible="raise"`` (:meth:`AllocationDynamics.infeasible_message`), and eq. 5 with eq. 7;
  :meth:`AllocationDynamics.step_batch` does the same for N sub-envs in one parallel kernel;
* eq. 5 on whole arrays for any y (:meth:`AllocationDynamics.parts`, what rendering, the reward
  split of the PettingZoo env and the experiments read) and the eq. 27 utilities per entry
  (:meth:`AllocationDynamics.utilities`).

The numba kernels below do the work; the dynamics of one slot are written once, as one per-env
kernel that the single env calls directly and the native vector env calls for every sub-env inside
one ``prange`` kernel (:func:`step_batch`), so the two cannot drift:

* :func:`slot_step` — the feasibility check of eqs. 3–4 (non-finite entries, entries outside
  [0, a] beyond the tolerance, per-server sums Σ_{l∈L_r} y compared with c_r^k) and eq. 5 with
  eq. 7 for the ports with a job (per-port gain Σ_k Σ_{r∈R_l} f_r^k(y) of eq. 27, per-port per-type
  sums Σ_{r∈R_l} y, the dominant overhead max_k β_k Σ y, the devices used by ports with a job), in
  one call: a branch-free pass over the contiguous allocation for the checks, then one pass over
  the *live* entries (a > 0 and c_r^k > 0), grouped by port and utility family so the utility
  loops have no family branch. Entries that are structurally zero (a = 0 or c_r^k = 0) are only
  read by the check pass; the rare non-zero ones (within the tolerance, or infeasible) are then
  added after the live ones. Ports without a job get their server sums only.
* :func:`build_plan` — the static entry lists of one problem that :func:`slot_step` walks.
* :func:`reward_sums` — eq. 5's per-port sums for any y in edge/device order (:meth:`~AllocationDynamics.parts`).

The summation order of every sum is fixed by the kernel (documented in :func:`slot_step`); it
differs from that of :func:`reward_sums` and of the numpy reference in ``tests/envs/multiserver/allocation/test_allocation_env.py``,
which agree to rounding (``rtol=1e-12`` in the test). The kernel accepts float32 or float64
allocations (numba compiles one version per dtype; float32 values widen exactly to float64, so the
results equal those of the float64 copy of the action).

Known remaining copies (kept because removing them changes numbers): :meth:`~AllocationDynamics.parts`
sums in edge/device order (:func:`reward_sums`) rather than through :func:`slot_step`, whose family-grouped
order would move the PettingZoo per-server rewards by up to ~1e-13; and the numpy eq. 27
(``scenario.utility_value``, used by :meth:`~AllocationDynamics.utilities` and the hindsight oracle) is
kept beside the compiled one, because numpy's vectorised log1p and numba's differ in the last bit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from clustergym.envs.multiserver.allocation.scenario import utility_value
from clustergym.envs.multiserver.projection import AllocationLayout, max_degree, project_into

__all__ = ["ARRIVAL_BLOCK", "TOL", "AllocationDynamics", "BatchResult", "SlotPlan", "SlotResult", "build_plan",
           "reward_sums", "slot_step", "step_batch"]

ARRIVAL_BLOCK = 256  # slots of arrivals drawn at once (same values as drawing slot by slot)
TOL = 1e-6  # feasibility tolerance (device units) on eqs. 3–4 before "repair"/"raise" acts


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
    for each other). All sums then add the dead entries that are non-zero, in edge/device order. Utilities are evaluated for every live entry of a port with a job, zeros included
    (f(0) = ±0 and x + ±0 = x for the sums here, which start at +0, so this equals skipping them);
    the reciprocal family uses the precomputed 1/α (the same division, so the same bits).

    An action with a non-zero dead entry or an entry outside [0, a] (what a sampled action looks
    like; a feasible-by-construction one has exact zeros there) first gets the server sums alone,
    in the same order, so an infeasible one returns without evaluating eq. 5 (reward parts 0,
    ``port_reward`` and ``used`` zeroed); the counts and ``sums`` are those of the full pass.
    """
    K = per_type.shape[1]
    L = x.shape[0]
    nonfinite = 0
    bad = 0
    stray = 0
    for j in range(y.shape[0]):  # vectorisable: no branches
        v = np.float64(y[j])
        finite = abs(v) <= 1.7976931348623157e308  # False for NaN and ±inf
        nonfinite += not finite
        bad += finite & ((v < -tol) | (v > box_hi[j]))
        stray += dead_mask[j] & (v != 0.0)
    if nonfinite:
        return nonfinite, bad, 0, 0.0, 0.0, 0.0
    if stray or bad:  # not built to be feasible (e.g. sampled): check eq. 4 before evaluating eq. 5
        sums[:] = 0.0
        for j in range(live.shape[0]):  # the order of the main pass below: live entries, then dead
            sums[live_srv[j]] += np.float64(y[live[j]])
        for j in range(dead.shape[0]):
            v = np.float64(y[dead[j]])
            if v != 0.0:
                sums[dead_srv[j]] += v
        over = 0
        for s in range(sums.shape[0]):
            if sums[s] > cap_tol[s]:
                over += 1
        if bad or over:  # infeasible: the reward parts are not needed (callers repair or raise)
            port_reward[:] = 0.0
            used[:] = 0.0
            return nonfinite, bad, over, 0.0, 0.0, 0.0
    sums[:] = 0.0
    per_type[:, :] = 0.0
    port_reward[:] = 0.0
    used[:] = 0.0
    for l in range(L):
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
    if stray:  # rare: values within tol (or beyond) on dead entries
        for j in range(dead.shape[0]):
            v = np.float64(y[dead[j]])
            if v != 0.0:
                sums[dead_srv[j]] += v
                l = dead_port[j]
                if x[l]:
                    per_type[l, dead_k[j]] += v
                    gain[l] += utility(v, dead_a[j], dead_code[j])
    over = 0
    for s in range(sums.shape[0]):
        if sums[s] > cap_tol[s]:
            over += 1
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
    return nonfinite, bad, over, g_sum, o_sum, util

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


class SlotResult(NamedTuple):
    """What one slot of :meth:`AllocationDynamics.step` produced (y after any repair)."""

    allocation: np.ndarray  # (E, K) float, the executed y (the action itself when it was feasible)
    port_reward: np.ndarray  # (L,) x_l q_l of eq. 5
    used: np.ndarray  # (K,) device units allocated to ports with a job
    gain: float  # Σ_l x_l Σ_k Σ_{r∈R_l} f_r^k(y), eq. 5's gain part
    overhead: float  # Σ_l x_l max_k β_k Σ_{r∈R_l} y, eq. 5's overhead part
    utilisation: float  # Σ_k used_k w_k (mean over existing types of used / capacity)
    repaired: int  # violated constraints of the action as sent (entries outside [0, a] + (r, k) over c)


_tuple_new = tuple.__new__


class BatchResult(NamedTuple):
    """What :meth:`AllocationDynamics.step_batch` produced for N sub-envs (leading axis N)."""

    nonfinite: np.ndarray  # (N,) int64, non-finite entries of each action as sent
    bad_box: np.ndarray  # (N,) int64, finite entries outside [0, a] beyond the tolerance (eq. 3)
    bad_cap: np.ndarray  # (N,) int64, (r, k) pairs over capacity (eq. 4)
    port_reward: np.ndarray  # (N, L) x_l q_l of eq. 5
    gain: np.ndarray  # (N,)
    overhead: np.ndarray  # (N,)
    used: np.ndarray  # (N, K)
    utilisation: np.ndarray  # (N,)


class AllocationDynamics:
    """The dynamics of P2 for one problem: arrivals, the check and repair of eqs. 3–4, eq. 5 (eq. 7).

    Built once per env from the public problem and ρ (the only hidden quantity the dynamics read);
    the single env calls :meth:`step` every slot, the vector env :meth:`step_batch`, the PettingZoo
    env :meth:`parts` and :meth:`utilities` for its reward split. Attributes (read-only): ``problem``,
    ``plan`` (:class:`SlotPlan`), ``layout`` (the projection's :class:`AllocationLayout`), ``upper``
    (E, K) a of eq. 3, ``open`` ((E, K) 1/0: a_l^k > 0, or None when all are), ``alpha_e`` and ``code_e`` (E, K) α_r^k and
    the eq. 27 family of each entry,
    ``beta`` (K,), ``sums`` (R, K) Σ_{l∈L_r} y of the last :meth:`step` (scratch), ``space_desc``
    (the action space as error messages quote it).

    Args:
        problem: the public :class:`~clustergym.envs.multiserver.allocation.scenario.AllocationProblem`.
        rho: (L,) hidden arrival probabilities ρ_l of eq. 1 (only :meth:`draw_arrivals` reads them;
            None for a dynamics object that only evaluates allocations).
        tol: feasibility tolerance (device units) of eqs. 3–4.
    """

    def __init__(self, problem, rho: np.ndarray | None = None, tol: float = TOL):
        pb = self.problem = problem
        self.rho = None if rho is None else np.asarray(rho, dtype=np.float64)  # (L,)
        self.tol = tol
        E, L, K = pb.num_edges, pb.num_ports, pb.num_device_types
        self.upper = np.ascontiguousarray(pb.edge_demand, dtype=np.float64)  # (E, K) a of eq. 3
        # (E, K) 1.0 where a_l^k > 0, 0.0 where the port does not request type k (the "channel" action's
        # ignored entries, allocation/actions.py); None when every entry is requested
        self.open = None if (self.upper > 0).all() else (self.upper > 0).astype(np.float64)
        self.layout = AllocationLayout(pb.edge_port, pb.edge_server, self.upper, pb.capacity, pb.num_servers)
        self.edge_port = np.ascontiguousarray(pb.edge_port, dtype=np.int64)  # (E,)
        self.alpha_e = np.ascontiguousarray(pb.alpha[pb.edge_server])  # (E, K) α_r^k of eq. 27
        self.code_e = np.ascontiguousarray(pb.utility[pb.edge_server])  # (E, K) family code of eq. 27
        self.beta = np.asarray(pb.beta, dtype=np.float64)  # (K,)
        codes = np.unique(self.code_e)
        self.single_code = int(codes[0]) if codes.size == 1 else None  # the only family, if there is one
        flat = self.code_e.ravel()  # flat positions of each family, so each entry evaluates only its own f
        self._families = [(int(c), np.flatnonzero(flat == c), self.alpha_e.ravel()[flat == c]) for c in codes]
        cap = np.asarray(pb.capacity, dtype=np.float64)  # (R, K)
        cap_total = cap.sum(axis=0)  # (K,)
        types = cap_total > 0
        util_w = np.where(types, 1.0 / np.where(types, cap_total, 1.0), 0.0) / max(int(types.sum()), 1)
        self.cap_tol = cap + tol  # (R, K) c + tol
        self.plan = build_plan(self.upper, cap, np.ascontiguousarray(pb.edge_server, dtype=np.int64), self.edge_port,
                               self.alpha_e, self.code_e, L, tol, np.ascontiguousarray(self.cap_tol.reshape(-1)),
                               self.beta, util_w)
        self.space_desc = f"Box(0, a, shape=({E}, {K})) in device units"
        self.sums = np.zeros((pb.num_servers, K))  # (R, K) scratch: Σ_{l∈L_r} y of the last check
        self._sums_flat = self.sums.reshape(-1)  # (R·K,) view
        self._gain = np.zeros(L)  # (L,) scratch of eq. 5
        self._per_type = np.zeros((L, K))  # (L, K) scratch of eq. 5
        self._L, self._K = L, K

    # -- arrivals (eq. 1) -----------------------------------------------------------------------
    def draw_arrivals(self, rng: np.random.Generator) -> np.ndarray:
        """(ARRIVAL_BLOCK, L) bool: x_l(t) ~ Bernoulli(ρ_l) for the next block of slots, from ``rng``."""
        if self.rho is None:
            raise ValueError("this dynamics object was built without rho: it cannot draw arrivals")
        return rng.random((ARRIVAL_BLOCK, self.rho.shape[0])) < self.rho[None, :]

    # -- one slot -------------------------------------------------------------------------------
    def _evaluate(self, y: np.ndarray, x: np.ndarray, port_reward: np.ndarray, used: np.ndarray) -> tuple:
        """:func:`slot_step` on y (E, K) C-contiguous: fills ``sums``, ``port_reward`` (L,), ``used`` (K,)."""
        return slot_step(y.reshape(-1), x, *self.plan, self._sums_flat, self._gain, self._per_type, port_reward, used)

    def step(self, y: np.ndarray, x: np.ndarray, infeasible: str = "repair") -> SlotResult:
        """One slot: check y against eqs. 3–4, repair or raise, then eq. 5 (eq. 7) with arrivals x.

        Args:
            y: (E, K) float32 or float64, C-contiguous, the allocation as sent (shape already checked).
            x: (L,) bool, arrivals of the slot.
            infeasible: ``"repair"`` (y outside Y beyond ``tol`` is replaced by Π_Y(y), eqs. 11–13) or
                ``"raise"`` (ValueError naming the constraint, :meth:`infeasible_message`).

        Raises:
            ValueError: y has a NaN or inf entry, or is infeasible under ``"raise"``.
        """
        port_reward = np.empty(self._L)
        used = np.empty(self._K)
        nonfinite, bad_box, bad_cap, gain, overhead, util = slot_step(  # = self._evaluate, inlined (per-step path)
            y.reshape(-1), x, *self.plan, self._sums_flat, self._gain, self._per_type, port_reward, used)
        if nonfinite:
            raise ValueError(f"action contains NaN or inf, expected {self.space_desc}")
        repaired = bad_box + bad_cap
        if repaired:
            if infeasible == "raise":
                raise ValueError(self._message(y, bad_box))
            y = self.layout.project(y)  # exact Euclidean projection onto Y (eqs. 11–13), compiled
            _, _, _, gain, overhead, util = self._evaluate(y, x, port_reward, used)  # eq. 5 on the repaired y
        # = SlotResult(...), built without the Python-level __new__ of a NamedTuple (~0.1 µs of a ~12 µs step)
        return _tuple_new(SlotResult, (y, port_reward, used, gain, overhead, util, repaired))

    def infeasible_message(self, y: np.ndarray, x: np.ndarray) -> str:
        """The ValueError text of ``infeasible="raise"`` for an infeasible y (E, K) (arrivals x (L,))."""
        y = np.ascontiguousarray(y, dtype=np.float64)
        bad_box = self._evaluate(y, x, np.empty(x.shape[0]), np.empty(self.beta.shape[0]))[1]
        return self._message(y, bad_box)

    def _message(self, y: np.ndarray, bad_box: int) -> str:
        """The first entry outside [0, a] (eq. 3) if any, else the first (r, k) over capacity (eq. 4);
        ``self.sums`` holds the per-server sums of y."""
        pb, sums, tol = self.problem, self.sums, self.tol
        if bad_box:
            e, k = map(int, np.argwhere((y < -tol) | (y > self.upper + tol))[0])
            return (f"infeasible action: y[{e}, {k}] = {y[e, k]:.6g} on channel (port {int(pb.edge_port[e])}, "
                    f"server {int(pb.edge_server[e])}) is outside [0, a] = [0, {self.upper[e, k]:.6g}] (eq. 3)")
        r, k = map(int, np.argwhere(sums > self.cap_tol)[0])
        return (f"infeasible action: server {r} allocates {sums[r, k]:.6g} of device type {k} "
                f"({pb.device_names[k] if k < len(pb.device_names) else k}) > capacity "
                f"{pb.capacity[r, k]:.6g} (excess {sums[r, k] - pb.capacity[r, k]:.6g}, eq. 4)")

    def step_batch(self, y: np.ndarray, x: np.ndarray, stepping: np.ndarray, repair: bool,
                   out: np.ndarray) -> BatchResult:
        """:meth:`step` for N sub-envs in one parallel kernel (:func:`step_batch`); raises nothing.

        Args:
            y: (N, E, K) float32 or float64, C-contiguous; x: (N, L) bool; stepping: (N,) bool, the
                sub-envs that step (the others get zero rewards).
            repair: project the finite infeasible rows of the stepping sub-envs (eqs. 11–13) into
                ``out`` (N, E, K) float64 and evaluate eq. 5 there; other rows of ``out`` are untouched.
        """
        N, L, K = y.shape[0], x.shape[1], self.beta.shape[0]
        counts = np.empty((3, N), dtype=np.int64)
        res = BatchResult(counts[0], counts[1], counts[2], np.empty((N, L)), np.empty(N), np.empty(N),
                          np.empty((N, K)), np.empty(N))
        step_batch(y.reshape(N, -1), x, stepping, *self.plan, repair, out.reshape(N, -1), *self.layout.groups,
                   res.nonfinite, res.bad_box, res.bad_cap, res.port_reward, res.gain, res.overhead, res.used,
                   res.utilisation)
        return res

    # -- eq. 5 and eq. 27 on whole arrays ---------------------------------------------------------
    def utilities(self, y: np.ndarray) -> np.ndarray:
        """(E, K) f_r^k(y_(l,r)^k) of eq. 27."""
        if self.single_code is not None:
            return utility_value(y, self.alpha_e, self.single_code)
        yf = y.reshape(-1)
        out = np.empty(yf.shape[0])
        for code, idx, alpha in self._families:  # at most the four families of eq. 27
            out[idx] = utility_value(yf[idx], alpha, code)
        return out.reshape(y.shape)

    def parts(self, y: np.ndarray, with_sums: bool = False):
        """Per-port gain Σ_k Σ_{r∈R_l} f_r^k(y) and overhead max_k β_k Σ_{r∈R_l} y, both (L,), of eq. 5
        for any y (E, K) (before the factor x_l(t)); with ``with_sums`` also Σ_{r∈R_l} y (L, K)."""
        gain, per_type = reward_sums(y, self.alpha_e, self.code_e, self.edge_port,
                                     self.problem.num_ports)
        overhead = (per_type * self.beta).max(axis=1)  # eq. 5: the dominant weighted overhead
        return (gain, overhead, per_type) if with_sums else (gain, overhead)


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
    c = np.ascontiguousarray
    return SlotPlan(c(up_f + tol), c(~live.ravel()), c(lf), c(srv[ef[lf]] * K + kf[lf]), c(kf[lf]), c(a_f[lf]),
                    c(_inv(a_f[lf])), c(ptr), c(df), c(srv[ef[df]] * K + kf[df]), c(port[ef[df]]), c(kf[df]),
                    c(a_f[df]), c(code.ravel()[df]), cap_tol, tol, beta, util_w)


def _inv(a: np.ndarray) -> np.ndarray:
    """1/α (only read for the reciprocal family, whose α > 0)."""
    with np.errstate(divide="ignore"):
        return 1.0 / a
