"""Exact per-slot optimum of problem (10) by MILP (HiGHS through ``scipy.optimize.milp``).

Problem (10) at slot t: maximise Σ_i μ_i(ζ_i (z_i,t−1 + Σ_s y_is)) subject to eqs. 2, 4–9 and 11.
Only the number of workers κ_i = Σ_s y_is enters the objective, so with one-hot ring sizes
χ_iκ (as in problem (12)) the objective is linear: Σ_i Σ_κ π_iκ χ_iκ with the increments
π_iκ = μ_i(ζ_i(z + κ)) − μ_i(ζ_i z) (the constant Σ_i μ_i(ζ_i z) is dropped).

The ring constraints (7–9) are written exactly for the tree (``topology``): binary x_is (server
used), m_i (job spans servers), v_ir (rack used), M_i (job spans racks); continuous link-use
variables ℓ_is ≥ x_is + m_i − 1 and ℓ'_ir ≥ v_ir + M_i − 1 carry b_i on each link direction:

    Σ_s y_is = Σ_κ κ χ_iκ,  Σ_κ χ_iκ ≤ 1                         (ring size, eqs. 2, 11 via κ ≤ cap_i)
    x_is ≤ y_is ≤ min(cap_i, C_s) x_is                             (eq. 5)
    Σ_s x_is ≤ 1 + (S − 1) m_i,  x_is ≤ v_i,rack(s),  Σ_r v_ir ≤ 1 + (R − 1) M_i
    Σ_i y_is ≤ C_s                                                 (eq. 4)
    Σ_i b_i ℓ_is ≤ cap(server s uplink, each direction)             (eq. 19, server–ToR)
    Σ_i b_i ℓ'_ir ≤ cap(rack r uplink, each direction)              (eq. 19, ToR–core)

An integer solution is exactly a placement whose cheapest ring fits (``topology`` module).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import coo_matrix

from clustergym.envs.ringallreduce.dynamics import BLOCK, JOB_FIELDS, arrival_block, job_generators, settle
from clustergym.envs.ringallreduce.scenario import sigmoid_utility

__all__ = ["admission_bound", "admission_relaxation", "ring_increments", "run_upper_bound", "solve_slot"]


def ring_increments(cap, zeta, z, lam1, lam2, lam3) -> np.ndarray:
    """(n, K+1) π_iκ = μ_i(ζ_i(z_i + κ)) − μ_i(ζ_i z_i) for κ = 0..K (K = max cap); −inf beyond cap_i."""
    cap = np.asarray(cap, dtype=np.int64)
    K = int(cap.max()) if cap.size else 0
    k = np.arange(K + 1)[None, :]
    zeta, z = np.asarray(zeta, float)[:, None], np.asarray(z, float)[:, None]
    l1, l2, l3 = (np.asarray(v, float)[:, None] for v in (lam1, lam2, lam3))
    pi = sigmoid_utility(zeta * (z + k), l1, l2, l3) - sigmoid_utility(zeta * z, l1, l2, l3)
    return np.where(k <= cap[:, None], pi, -np.inf)


def solve_slot(topo, cap, zeta, z, lam1, lam2, lam3, bw, *, time_limit: float = 60.0,
               free_gpu=None) -> tuple[float, np.ndarray]:
    """Optimal value and y (n, S) of problem (10) for n jobs with worker caps ``cap`` = min(N_i, budget left)."""
    cap = np.asarray(cap, dtype=np.int64)
    n, S, R = cap.shape[0], topo.num_servers, topo.num_racks
    y_out = np.zeros((n, S), dtype=np.int64)
    jobs = np.flatnonzero(cap > 0)
    if jobs.size == 0:
        return 0.0, y_out
    pi = ring_increments(cap, zeta, z, lam1, lam2, lam3)
    gpus = np.asarray(topo.gpus if free_gpu is None else free_gpu, dtype=np.int64)
    rack_of = np.asarray(topo.rack_of)
    bw = np.asarray(bw, dtype=np.float64)
    off, c, lo, hi, integ = _columns(jobs, cap, pi, gpus, S, R)
    rows = _Rows()
    for j in jobs:
        _job_rows(rows, off[j], int(cap[j]), np.minimum(int(cap[j]), gpus), rack_of, S, R)
    _capacity_rows(rows, jobs, off, bw, gpus, topo)
    x = _solve_milp(c, rows.matrix(c.size), rows.lo, rows.hi, integ, lo, hi, time_limit)
    for j in jobs:
        y_out[j] = np.rint(x[off[j]:off[j] + S]).astype(np.int64)
    value = float(sum(pi[j, y_out[j].sum()] for j in jobs))
    return value, y_out


def _blocks(o: int, S: int, R: int) -> tuple[int, ...]:
    """The first column of each variable block of the job whose columns start at ``o``: y (S), x (S), ℓ (S),
    v (R), ℓ' (R), m, M, χ (cap_i)."""
    return (o, o + S, o + 2 * S, o + 3 * S, o + 3 * S + R, o + 3 * S + 2 * R, o + 3 * S + 2 * R + 1,
            o + 3 * S + 2 * R + 2)


def _columns(jobs, cap, pi, gpus, S: int, R: int):
    """The columns of the MILP, job after job (:func:`_blocks`): each job's first column, the objective (−π_iκ on
    χ_iκ), the bounds (y_is ≤ min(cap_i, C_s), every other column in [0, 1]) and the integrality (ℓ, ℓ'
    continuous)."""
    off, cols = {}, 0
    for j in jobs:
        off[j] = cols
        cols += 3 * S + 2 * R + 2 + int(cap[j])
    c = np.zeros(cols)
    lo, hi = np.zeros(cols), np.ones(cols)
    integ = np.ones(cols, dtype=np.int8)
    for j in jobs:
        Y, _, L, _, LR, _, _, CH = _blocks(off[j], S, R)
        K = int(cap[j])
        hi[Y:Y + S] = np.minimum(K, gpus)
        integ[L:L + S] = 0
        integ[LR:LR + R] = 0
        c[CH:CH + K] = -pi[j, 1:K + 1]
    return off, c, lo, hi, integ


class _Rows:
    """The constraint rows lo ≤ A z ≤ hi of the MILP, in the order they are added."""

    def __init__(self):
        self.rows, self.cols, self.vals, self.lo, self.hi = [], [], [], [], []

    def add(self, cs, vs, lo, hi) -> None:
        self.rows.extend([len(self.lo)] * len(cs))
        self.cols.extend(cs)
        self.vals.extend(vs)
        self.lo.append(lo)
        self.hi.append(hi)

    def matrix(self, cols: int):
        return coo_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.lo), cols)).tocsr()


def _job_rows(rows: _Rows, o: int, K: int, ub, rack_of, S: int, R: int) -> None:
    """One job's rows (module docstring): its ring size Σ_s y_is = Σ_κ κ χ_iκ with Σ_κ χ_iκ ≤ 1 (eqs. 2, 11 via
    κ ≤ cap_i = K), eq. 5 with ``ub`` = min(cap_i, C_s), and the indicators m_i, v_ir, M_i with the link-use
    variables ℓ_is, ℓ'_ir."""
    Y, X, L, V, LR, m, M, CH = _blocks(o, S, R)
    rows.add(list(range(Y, Y + S)) + list(range(CH, CH + K)), [1.0] * S + [-float(k) for k in range(1, K + 1)],
             0, 0)
    rows.add(list(range(CH, CH + K)), [1.0] * K, -np.inf, 1)
    for s in range(S):
        rows.add([Y + s, X + s], [1.0, -float(ub[s])], -np.inf, 0)
        rows.add([X + s, Y + s], [1.0, -1.0], -np.inf, 0)
        rows.add([L + s, X + s, m], [1.0, -1.0, -1.0], -1, np.inf)
        rows.add([X + s, V + int(rack_of[s])], [1.0, -1.0], -np.inf, 0)
    rows.add(list(range(X, X + S)) + [m], [1.0] * S + [-(S - 1.0)], -np.inf, 1)
    rows.add(list(range(V, V + R)) + [M], [1.0] * R + [-(R - 1.0)], -np.inf, 1)
    for q in range(R):
        rows.add([LR + q, V + q, M], [1.0, -1.0, -1.0], -1, np.inf)


def _capacity_rows(rows: _Rows, jobs, off: dict, bw, gpus, topo) -> None:
    """The shared rows, summed over the jobs: eq. 4 and eq. 19 on each server uplink, then eq. 19 on each rack uplink
    (the smaller direction of each link)."""
    S, R = topo.num_servers, topo.num_racks
    blocks = [_blocks(off[j], S, R) for j in jobs]  # (y, x, ℓ, v, ℓ', m, M, χ) of each job
    for s in range(S):
        rows.add([b[0] + s for b in blocks], [1.0] * len(jobs), -np.inf, float(gpus[s]))
        rows.add([b[2] + s for b in blocks], [bw[j] for j in jobs], -np.inf, float(np.min(topo.server_bw[s])))
    for q in range(R):
        rows.add([b[4] + q for b in blocks], [bw[j] for j in jobs], -np.inf, float(np.min(topo.rack_bw[q])))


def _solve_milp(c, A, rlo, rhi, integ, lo, hi, time_limit: float) -> np.ndarray:
    """The MILP's optimal columns by HiGHS, the objective rescaled; RuntimeError unless solved to optimality."""
    # at least 1e-290: increments all below it (a slot of jobs far from λ3) would make 1e3 / scale overflow
    scale = max(float(np.max(np.abs(c))), 1e-290) if np.any(c) else 1.0
    # objective of size 1e3: HiGHS' absolute MIP gap (1e-6, not settable through scipy) is then
    # 1e-9 of the largest increment, below the relative gap asked for; tiny increments still count
    c = c * (1e3 / scale)
    res = milp(c, constraints=LinearConstraint(A, rlo, rhi), integrality=integ, bounds=Bounds(lo, hi),
               options={"time_limit": float(time_limit), "mip_rel_gap": 1e-9})
    if res.x is None:
        raise RuntimeError(f"MILP of problem (10) failed: {res.message}")
    if res.status != 0:
        raise RuntimeError(f"MILP of problem (10) not solved to optimality within {time_limit}s: {res.message}")
    return res.x


_C = {k: i for i, k in enumerate(JOB_FIELDS)}


def _arrivals(truth, horizon: int) -> np.ndarray:
    """Every job of the instance that arrives before ``horizon``, in arrival order (the env's stream)."""
    rngs = job_generators(truth)
    blocks, t0, next_id = [], 0, 0
    while t0 < horizon:
        b = arrival_block(rngs, truth, t0, next_id)
        blocks.append(b)
        next_id += b.shape[0]
        t0 += BLOCK
    jobs = np.concatenate(blocks) if blocks else np.zeros((0, len(JOB_FIELDS)))
    return jobs[jobs[:, _C["arrival"]] < horizon]


def run_upper_bound(truth, horizon: int, window: int | None = None) -> float:
    """A bound on the total reward of any policy over a ``horizon``-slot episode of an instance (its ``truth``).

    ``window=None``: every job gets min(N_i, budget left) workers in every slot from its arrival, as if GPUs
    (eq. 4), links (eq. 19) and the visible window were unlimited.

    The episode's reward telescopes to Σ_i μ_i(ζ_i z_i,T) − μ_i(0) over the jobs that arrived (§IV, the
    objective of problem (10) summed over slots), and μ_i increases in z, so each job's term is largest when its
    attained service z_i,T is: at most min(B_i, N_i (T − a_i)) worker-slots (eqs. 2 and 11), which this
    allocation reaches. A policy that gives every active job its cap in every slot scores exactly this; one that
    scores it is optimal over the episode. Uses the instance's future arrivals: for metrics and studies only.

    ``window=J`` (the env's ``max_jobs``): the same with the env's visible window kept, GPUs and links still
    unlimited. Only the J oldest active jobs can get workers, and a job leaves only when its budget is used up
    (``dynamics.settle``). Giving every visible job its cap in every slot is then optimal over the episode:
    by induction in arrival order, each older job finishes no later than under any other policy, so each
    job enters the window no later and, running at its cap N_i from there, has at least the attained service
    of any policy at every slot. This bound is tighter than ``window=None`` and still holds for every policy
    of the env; a policy below it loses to the GPUs or links of the cluster, not to the window. The window is
    kept by the env's own bookkeeping: arrivals join the end of the active jobs at their slot, and
    ``dynamics.settle`` adds the workers and removes the jobs whose budget is used up.
    """
    jobs = _arrivals(truth, horizon)
    budget, workers, arrival = (jobs[:, _C[k]] for k in ("budget", "workers", "arrival"))
    if window is None:
        z = np.minimum(budget, workers * (horizon - arrival))
    else:
        z = np.zeros(jobs.shape[0])  # jobs[k] has id k (ids count the arrivals from 0)
        A, admitted = jobs[:0].copy(), 0
        for t in range(horizon):
            upto = int(np.searchsorted(arrival, t, side="right"))
            A, admitted = np.concatenate([A, jobs[admitted:upto]]), upto
            n = min(window, A.shape[0])
            w = np.minimum(A[:n, _C["workers"]], A[:n, _C["budget"]] - A[:n, _C["z"]]).astype(np.int64)
            z[A[:n, _C["id"]].astype(np.int64)] += w
            A = A[:settle(A, A.shape[0], n, w)]
    zeta, l1, l2, l3 = (jobs[:, _C[k]] for k in ("zeta", "lam1", "lam2", "lam3"))
    return float(np.sum(sigmoid_utility(zeta * z, l1, l2, l3) - sigmoid_utility(np.zeros_like(zeta), l1, l2, l3)))


def _admission_slots(arrival, budget, workers, gpus: int, window: int) -> np.ndarray:
    """(n,) for jobs in arrival order (id order), a lower bound on the first slot each can be in the visible window.

    Job k (0-based) is visible at slot t only if at most ``window`` − 1 older jobs are still active, i.e. at least
    k − window + 1 of jobs 0..k−1 used up their budgets by the end of slot t − 1. Job j can do so only if
    a_j + ⌈B_j / N_j⌉ ≤ t (at most N_j workers a slot, eq. 2), and the jobs that do need Σ B_j worker-slots of the
    cluster's at most ``gpus`` · t (eq. 4 summed over servers): so the cheapest k − window + 1 of the jobs that can
    finish by t must fit in ``gpus`` · t. The slot is nondecreasing in k, so one forward sweep finds it."""
    if gpus < 1 or window < 1:
        raise ValueError(f"gpus={gpus!r}, window={window!r} are invalid: expected integers >= 1")
    n = arrival.shape[0]
    first = arrival.astype(np.int64).copy()
    done = arrival.astype(np.int64) + np.ceil(budget / np.maximum(workers, 1)).astype(np.int64)
    t = 0
    for k in range(window, n):  # jobs 0..window-1 are visible from their arrival
        need = k - window + 1
        t = max(t, int(arrival[k]))
        while True:
            cand = budget[:k][done[:k] <= t]
            if cand.size >= need and np.partition(cand, need - 1)[:need].sum() <= gpus * t:
                break
            t += 1
        first[k] = t
    return first


def _envelope(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slopes, intercepts) of the upper concave envelope of the points (z, u[z]), z = 0..len(u) − 1 (monotone
    chain); the envelope is the minimum of these lines on [0, len(u) − 1]."""
    hull: list[int] = []
    for z in range(u.shape[0]):
        while len(hull) >= 2:
            z1, z2 = hull[-2], hull[-1]
            if (u[z2] - u[z1]) * (z - z1) <= (u[z] - u[z1]) * (z2 - z1):
                hull.pop()
            else:
                break
        hull.append(z)
    h = np.asarray(hull)
    slope = np.diff(u[h]) / np.diff(h)
    return slope, u[h[:-1]] - slope * h[:-1]


def admission_bound(truth, horizon: int, gpus: int, window: int) -> float:
    """A bound on the total reward of any policy over a ``horizon``-slot episode that counts the cluster's GPUs and
    the visible window together: the smaller of :func:`run_upper_bound` (``window``) and the value of the linear
    relaxation of :func:`admission_relaxation`. Uses the instance's future arrivals: for metrics and studies only."""
    value, _ = admission_relaxation(truth, horizon, gpus, window)
    return float(min(value, run_upper_bound(truth, horizon, window=window)))


def admission_relaxation(truth, horizon: int, gpus: int, window: int) -> tuple[float, np.ndarray]:
    """(value, x) of a linear relaxation of the episode: x[i, t] is the worker-slots it gives job i (arrival order,
    i.e. job id i) in slot t. Uses the instance's future arrivals: for metrics and studies only.

    The relaxation: x_it ≥ 0 worker-slots of job i in slot t, at most N_i (eq. 2), Σ_t x_it ≤ B_i (eq. 11),
    Σ_i x_it ≤ ``gpus`` = Σ_s C_s (eq. 4 summed over servers; placement and links dropped), and x_it = 0 before
    :func:`_admission_slots`' lower bound on job i's first slot in the window; each job's term μ_i(ζ_i z_i) −
    μ_i(0) is replaced by the upper concave envelope of its values at z = 0, 1, .., its largest attainable service.
    Every policy's allocation is feasible for it and scores at most its value, so it bounds every policy; it is
    below the window bound where the window keeps jobs out that the GPUs could not have served."""
    jobs = _arrivals(truth, horizon)
    n = jobs.shape[0]
    if n == 0:
        return 0.0, np.zeros((0, horizon))
    arrival, workers, budget = (jobs[:, _C[k]] for k in ("arrival", "workers", "budget"))
    first = _admission_slots(arrival, budget, workers, int(gpus), int(window))
    zmax = np.minimum(budget, workers * np.maximum(horizon - first, 0)).astype(np.int64)
    span = np.maximum(horizon - first, 0)
    job = np.repeat(np.arange(n), span)  # variables: x (job, slot) for slots first..horizon-1, then u per job
    slot = np.concatenate([np.arange(f, horizon) for f in first]) if job.size else np.zeros(0, np.int64)
    nx = job.size
    rows, cols, vals, rhs = [slot, job + horizon], [np.arange(nx)] * 2, [np.ones(nx)] * 2, \
        [np.full(horizon, float(gpus)), budget.astype(np.float64)]
    r = horizon + n
    for i in range(n):  # u_i ≤ slope · Σ_t x_it + intercept for each line of the envelope
        z = np.arange(zmax[i] + 1, dtype=np.float64)
        lam = (jobs[i, _C["lam1"]], jobs[i, _C["lam2"]], jobs[i, _C["lam3"]])
        u = sigmoid_utility(jobs[i, _C["zeta"]] * z, *lam) - sigmoid_utility(0.0, *lam)
        slope, icpt = _envelope(u) if zmax[i] > 0 else (np.zeros(1), np.zeros(1))
        xs = np.flatnonzero(job == i)
        for b, c in zip(slope.tolist(), icpt.tolist()):
            rows += [np.full(xs.size + 1, r)]
            cols += [np.concatenate([xs, [nx + i]])]
            vals += [np.concatenate([np.full(xs.size, -b), [1.0]])]
            rhs += [np.array([c])]
            r += 1
    A = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nx + n)).tocsr()
    cost = np.concatenate([np.zeros(nx), -np.ones(n)])
    hi = np.concatenate([workers[job], np.full(n, np.inf)])
    res = linprog(cost, A_ub=A, b_ub=np.concatenate(rhs), bounds=np.column_stack([np.zeros(nx + n), hi]),
                  method="highs")
    if res.status != 0:
        raise RuntimeError(f"the admission relaxation did not solve: {res.message}")
    x = np.zeros((n, horizon))
    x[job, slot] = res.x[:nx]
    return float(-res.fun), x
