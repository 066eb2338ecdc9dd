"""An upper bound on the total utility of ApproxJobs (opm.md P1, eqs. 1–5): the fluid program.

What it bounds
--------------
``fluid_bound(scenario, horizon)`` returns F̄ ≥ F*, where F* is the optimum of the *fluid program*

    max  Σ_j f_j(X_j)                                       f_j(X) = v_j X^β_j (§VI)
    s.t. X_j = Σ_e x_je,  x_je ≥ 0                          work of job j, epoch by epoch
         Σ_{j active in e} x_je ≤ L_e · Θ                   (capacity, eq. 3 summed over a machine's slots)
         X_j ≤ ρ · B_j                                       (budget, eq. 4)

with Θ = Σ_i θ_i (mean work the whole cluster delivers per slot), ρ = max_i θ_i / p_i (most work a
unit of budget buys in expectation), epochs e the maximal runs of slots 1..T with the same set of
jobs in their windows a_j+1..min(d_j, T) (eq. 2), L_e their lengths. It uses the hidden truth:
the whole job list and the mean rates θ_i.

**Claim.** For every policy whose machine choices are independent of the service-rate realisation
(Fair, EDF, random, OPM without estimation with progress="estimate": their inputs are arrivals,
budgets and spending, and spending is priced by p_i, not by the work done), E[Σ_j f_j(X_j)] ≤ F* ≤ F̄. With
``service="iid"`` (Assumption 1) the same holds for every non-anticipating policy (one that
chooses x(t) from what it saw before slot t), OPM included.

**Proof.** Let x̄_jit = E[x_j^i(t)] ∈ [0, 1]. (i) Work: X_j = Σ_t Σ_i θ_i^t x_j^i(t), and
E[θ_i^t x_j^i(t)] = θ_i x̄_jit because x_j^i(t) is independent of θ_i^t (blind policy; or, for
i.i.d. rates, θ_i^t is independent of the past that x_j^i(t) is a function of). So
E[X_j] = Σ_{t,i} θ_i x̄_jit. (ii) Capacity: Σ_j x_j^i(t) ≤ 1 on every path (eq. 3), so
Σ_j Σ_i θ_i x̄_jit ≤ Σ_i θ_i = Θ per slot; summing over the slots of an epoch gives the capacity
row. The J_max window and FIFO queue only restrict a policy further. (iii) Budget: Σ_{t,i} p_i
x_j^i(t) ≤ B_j on every path (eq. 4, enforced by the env), so E[X_j] = Σ θ_i x̄_jit ≤ ρ Σ p_i x̄_jit
≤ ρ B_j. Hence (E[X_j])_j is feasible for the fluid program, and by Jensen (f_j concave)
E[Σ_j f_j(X_j)] ≤ Σ_j f_j(E[X_j]) ≤ F*. Integrality (eq. 5) is relaxed as well. ∎

The program is *exact* (no relaxation beyond integrality and Jensen) when θ_i / p_i is the same
on every machine: ``price="paper"`` (p_i = 2θ_i, ρ = 1/2) — then every machine sells work at the
same price, so pooling the machines into one capacity Θ loses nothing. With ``price="uniform"``
pooling is a relaxation and the bound is looser.

What it does *not* bound: the utility of one episode (a realisation can exceed its expectation:
the reproduction reports the largest realised ratio R / F̄ over all runs); and, with
``service="gamma"`` (correlated AP/UP periods), a policy that tracks a machine's current state
could get more than θ_i per slot from it (at most the AP mean 0.85 s_i, so at most 0.85/0.7036 =
1.21 × the mean-rate work per unit of budget). OPM's UCB (eq. 66) pools all past slots and does
not track states; the reproduction reports its measured work per unit of budget beside Fair's.

How it is computed (certified)
------------------------------
1. An LP (HiGHS): each f_j is replaced by the minimum of tangents at K points, u_j ≤ f_j(z) +
   f_j'(z)(X_j − z). Tangents of a concave function lie above it, so the LP optimum is ≥ F*.
   Each further round adds the tangent at the LP's own X_j (cutting planes), so the LP tightens;
   it stops when the certified gap below is under ``tol`` (1e-4) or after ``rounds`` (12) LPs.
2. The *reported* bound is the Lagrangian dual value at the LP's capacity prices μ_e ≥ 0:

       D(μ) = Σ_e μ_e L_e Θ + Σ_j max_{0 ≤ X ≤ X̄_j} [f_j(X) − X · min_{e ∋ j} μ_e],

   (a job buys its work in the cheapest epoch of its window; X̄_j = min(ρB_j, Σ_{e ∋ j} L_e Θ) is
   implied by the constraints, so keeping it inside the maximisation changes nothing), in closed
   form. By weak duality
   D(μ) ≥ F* for *every* μ ≥ 0, whatever the LP solver's tolerances (the smallest D over the
   rounds is reported). ``details=True`` also
   returns the primal value Σ_j f_j(X_j) of the LP's allocation (feasible, so ≤ F*): the gap
   between the two certifies how tight the bound is.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["fluid_bound", "epochs"]


def epochs(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Epochs of the slot intervals [start_j, end_j] (inclusive, start_j <= end_j).

    Returns (bp, first, last): epoch e covers slots bp[e] .. bp[e+1]−1; job j is in epochs
    first[j] .. last[j] (inclusive).
    """
    bp = np.unique(np.concatenate([start, end + 1]))
    first = np.searchsorted(bp, start)
    last = np.searchsorted(bp, end + 1) - 1
    return bp, first, last


def _best_response(v, beta, cap, m):
    """argmax_{0 <= X <= cap} v X^β − m X and its value, elementwise (m >= 0)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lin = beta >= 1.0
        inner = np.where(m > 0, (v * beta / np.where(m > 0, m, 1.0)) ** (1.0 / np.where(lin, 1.0, 1.0 - beta)), np.inf)
        X = np.where(lin, np.where(v > m, cap, 0.0), np.minimum(inner, cap))
    X = np.clip(X, 0.0, cap)
    return X, v * np.power(X, beta) - m * X


class _FluidLP(NamedTuple):
    """The LP of step 1 (module docstring) before its tangent rows: variables x (P) | X (n) | u (n)."""

    v: np.ndarray  # (n,) value v_j of f_j
    beta: np.ndarray  # (n,) exponent β_j of f_j
    xmax: np.ndarray  # (n,) the most work job j can get: min(ρB_j, capacity of its window)
    C: np.ndarray  # (E,) work capacity L_e Θ of each epoch
    pe: np.ndarray  # (P,) epoch of each (job, epoch) pair
    seg: np.ndarray  # (n,) first pair of each job
    P: int  # number of (job, epoch) pairs
    c: np.ndarray  # (P + 2n,) costs: minimise −Σ u
    A_cap: object  # (E, P + 2n) sparse capacity rows Σ_{j active in e} x_je
    A_eq: object  # (n, P + 2n) sparse rows X_j − Σ_e x_je = 0
    bounds: np.ndarray  # (P + 2n, 2)


def _fluid_lp(v, beta, cap, start, end, Theta: float) -> _FluidLP:
    """The capacity, work and bound rows of the fluid program for jobs runnable in slots [start_j, end_j]."""
    from scipy import sparse

    bp, first, last = epochs(start, end)
    E = bp.size - 1
    C = np.diff(bp).astype(float) * Theta  # (E,) work capacity of each epoch
    n = v.size
    span = last - first + 1
    pj = np.repeat(np.arange(n), span)  # job of each (job, epoch) pair
    pe = np.concatenate([np.arange(f, l + 1) for f, l in zip(first, last)])  # epoch of each pair
    P = pj.size
    # the most work a job can get at all: min(ρB_j, capacity of its window)
    cum = np.r_[0.0, np.cumsum(C)]
    xmax = np.minimum(cap, cum[last + 1] - cum[first])
    # variables: x (P) | X (n) | u (n); minimise −Σ u
    nv = P + 2 * n
    c = np.zeros(nv)
    c[P + n:] = -1.0
    A_cap = sparse.csr_matrix((np.ones(P), (pe, np.arange(P))), shape=(E, nv))
    A_eq = sparse.csr_matrix((np.r_[np.ones(P), -np.ones(n)], (np.r_[pj, np.arange(n)], np.r_[np.arange(P), P + np.arange(n)])),
                             shape=(n, nv))
    bounds = np.zeros((nv, 2))
    bounds[:P, 1] = np.inf
    bounds[P:P + n, 1] = xmax
    bounds[P + n:, 0], bounds[P + n:, 1] = -np.inf, np.inf
    seg = np.r_[0, np.cumsum(span)[:-1]]
    return _FluidLP(v, beta, xmax, C, pe, seg, P, c, A_cap, A_eq, bounds)


def _tangent_rows(lp: _FluidLP, z: np.ndarray):
    """u_j − f'(z) X_j <= f(z) − f'(z) z, one row per (job, point) of z (n, K)."""
    from scipy import sparse

    n, nv, P = lp.v.size, lp.c.size, lp.P
    jj = np.repeat(np.arange(n), z.shape[1])
    zz = z.reshape(-1)
    vv, bb = lp.v[jj], lp.beta[jj]
    fz = vv * zz ** bb
    fp = vv * bb * zz ** (bb - 1.0)
    rows = np.arange(jj.size)
    A = sparse.csr_matrix((np.r_[np.ones(jj.size), -fp], (np.r_[rows, rows], np.r_[P + n + jj, P + jj])),
                          shape=(jj.size, nv))
    return A, fz - fp * zz


def _cutting_planes(lp: _FluidLP, tangents: int, rounds: int, tol: float) -> tuple[float, float, float]:
    """Steps 1–2 of the module docstring: (smallest D(μ), largest primal value, last LP value) over the rounds."""
    from scipy import sparse
    from scipy.optimize import linprog

    v, beta, xmax, C = lp.v, lp.beta, lp.xmax, lp.C
    n, E, P = v.size, C.size, lp.P
    frac = np.geomspace(1e-4, 1.0, tangents)
    pts = xmax[:, None] * frac[None, :]  # (n, K) tangent points
    pts = np.where(pts > 0, pts, 1e-12)
    A_t, b_t = _tangent_rows(lp, pts)
    best = (np.inf, 0.0, 0.0)  # (D, primal, lp)
    for _ in range(max(1, rounds)):
        A_ub = sparse.vstack([lp.A_cap, A_t]).tocsr()
        b_ub = np.r_[C, b_t]
        res = linprog(lp.c, A_ub=A_ub, b_ub=b_ub, A_eq=lp.A_eq, b_eq=np.zeros(n), bounds=lp.bounds, method="highs")
        if res.status != 0:
            raise RuntimeError(f"fluid bound LP failed: {res.message}")
        X = np.clip(res.x[P:P + n], 0.0, xmax)
        mu = np.maximum(-np.asarray(res.ineqlin.marginals[:E]), 0.0)  # capacity prices (>= 0)
        m = np.minimum.reduceat(mu[lp.pe], lp.seg)  # cheapest epoch of each job's window
        _, val = _best_response(v, beta, xmax, m)  # X <= xmax is implied by the capacity rows: kept inside
        D = float(np.dot(mu, C) + val.sum())  # D(μ): weak-duality bound, closed form
        primal = float(np.sum(v * np.power(X, beta)))  # the LP allocation's true utility (feasible)
        best = (min(best[0], D), max(best[1], primal), float(-res.fun))
        if best[0] - best[1] <= tol * best[0]:
            break
        A2, b2 = _tangent_rows(lp, np.where(X > 0, X, 1e-12)[:, None])  # cutting plane at the LP's X_j
        A_t, b_t = sparse.vstack([A_t, A2]).tocsr(), np.r_[b_t, b2]
    return best


def fluid_bound(scenario, horizon: int | None = None, *, tangents: int = 16, rounds: int = 12, tol: float = 1e-4,
                details: bool = False):
    """F̄ ≥ F*, the fluid program's optimum (module docstring), for the first ``horizon`` slots."""
    pb, tr = scenario.problem, scenario.truth
    T = int(pb.horizon if horizon is None else horizon)
    jb = tr.jobs
    theta = np.asarray(tr.mean_rate, dtype=float)
    price = np.asarray(pb.price, dtype=float)
    Theta = float(theta.sum())  # mean work per slot of the whole cluster
    rho = float(np.max(theta / price))  # most expected work per unit of budget
    start = np.asarray(jb.arrival, dtype=np.int64) + 1  # first runnable slot a_j + 1 (eq. 2)
    end = np.minimum(np.asarray(jb.deadline, dtype=np.int64), T)
    ok = start <= end
    out = {"bound": 0.0, "primal": 0.0, "lp": 0.0, "jobs": int(ok.sum()), "epochs": 0, "Theta": Theta, "rho": rho}
    if not ok.any():
        return out if details else 0.0
    v, beta = np.asarray(jb.value, float)[ok], np.asarray(jb.beta, float)[ok]
    cap = rho * np.asarray(jb.budget, float)[ok]  # X_j <= ρ B_j
    lp = _fluid_lp(v, beta, cap, start[ok], end[ok], Theta)
    D, primal, lp_value = _cutting_planes(lp, tangents, rounds, tol)
    out.update(bound=D, primal=primal, lp=lp_value, epochs=int(lp.C.size))
    return out if details else D
