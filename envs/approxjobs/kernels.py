"""Array kernels of the ApproxJobs agents and of the envs' deal (opm.md §III–V): the capped-simplex
projection and the unbiased rounding of eq. 72, the budget prefix, the machine deal, and the UCB rate
estimates (eqs. 12–14, 66–67). Rows are machines, columns are window slots (jobs), every machine at once.
:mod:`clustergym.envs.approxjobs.dynamics` re-exports them beside the envs' slot step."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["project_capped_simplex", "round_rows", "budget_prefix", "deal_machines", "deal_kernel",
           "confidence_radius", "ucb_rates", "TOL"]

TOL = 1e-9  # budget tolerance of the deal, the check and the live test (as budget_prefix)


def project_capped_simplex(Y: np.ndarray) -> np.ndarray:
    """Row-wise Euclidean projection onto {z >= 0, Σ_j z_j <= 1} (program P4, eqs. 70–71).

    For one row y: if Σ_j max(y_j, 0) <= 1 the projection is max(y, 0); otherwise the sum
    constraint is tight and z = max(y − τ, 0) with τ > 0 from the sorted KKT conditions (the
    classic simplex projection, O(J log J) per row). ``Y`` is (M, J) float64 or float32; returns
    a new array of the same dtype.
    """
    Z = np.maximum(Y, 0.0)
    over = Z.sum(axis=1) > 1.0
    n_over = int(over.sum())
    if n_over == 0:
        return Z
    sub = n_over < Y.shape[0] // 2  # few rows to fix: sort only those
    Yo = Y[over] if sub else Y
    U = np.sort(Yo, axis=1)[:, ::-1]  # (m, J) descending
    css = np.cumsum(U, axis=1)
    css -= 1.0
    k = np.arange(1, Y.shape[1] + 1, dtype=Y.dtype)
    rho = (U * k > css).sum(axis=1)  # the KKT condition u_k > (Σ_{l<=k} u_l − 1)/k holds on a prefix
    tau = np.take_along_axis(css, (rho - 1)[:, None], axis=1)[:, 0] / rho
    if sub:
        Z[over] = np.maximum(Yo - tau[:, None], 0.0)
        return Z
    tau = np.where(over, tau, 0.0)  # rows with Σ max(y, 0) <= 1 keep max(y, 0)
    Z = Y - tau[:, None]
    np.maximum(Z, 0.0, out=Z)
    return Z


def round_rows(Z: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Randomised rounding (eq. 72): machine i runs job j with probability Z[i, j], idle otherwise.

    ``u`` (M,) uniforms in [0, 1). Returns (M,) ints: 0 = idle, k = column k−1 (1-based), so that
    E[1{a_i = j+1}] = Z[i, j] and each machine runs at most one task (eq. 3).
    """
    cum = np.cumsum(Z, axis=1)
    k = (cum <= u[:, None]).sum(axis=1)  # first column whose cumulative mass exceeds u
    return np.where(k < Z.shape[1], k + 1, 0)


def budget_prefix(slot: np.ndarray, cost: np.ndarray, remaining: np.ndarray) -> np.ndarray:
    """Algorithm 1 lines 7–12 for every job at once: bool keep-mask over tasks.

    Tasks are given in machine order (``slot`` 1-based window slot, ``cost`` their price); a job's
    tasks are kept while its cumulative price stays within ``remaining[slot − 1]``. Prices are
    positive, so this is the longest affordable prefix ("else exit").
    """
    keep = np.ones(slot.size, dtype=bool)
    if slot.size == 0:
        return keep
    order = np.argsort(slot, kind="stable")
    s = slot[order]
    cum = np.cumsum(cost[order])
    first = np.ones(s.size, dtype=bool)
    first[1:] = s[1:] != s[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(s.size), 0))
    job_cum = cum - np.where(start > 0, cum[start - 1], 0.0)
    keep[order] = job_cum <= remaining[s - 1] + 1e-9
    return keep


def deal_machines(order: np.ndarray, price: np.ndarray, remaining: np.ndarray, live: np.ndarray,
                  cap: np.ndarray | None = None) -> np.ndarray:
    """Fair's water-filling deal of the machines to the live jobs (``baselines.approxjobs.Fair``), with optional caps.

    Machines in ``order`` are dealt round-robin to the jobs ``live`` (window-slot indices, 0-based, in
    ascending order); each job keeps the affordable prefix of what it was dealt (Algorithm 1 lines 7–12,
    ``remaining`` (J,) budgets); the machines a job cannot pay for are dealt again, round-robin, among the
    jobs that could pay for every machine they were dealt (those with the fewest machines first), until
    no machine is left over or no job can take one. With ``cap`` ((J,) ints), job k takes at most
    ``cap[k]`` machines: the round-robin skips a job once it holds its cap (level by level: first one
    machine to every job below its cap, then a second to those with room for two, ...); machines no
    job can take stay idle. Without caps (or with every cap >= M) the deal is Fair's. Returns the (M,)
    action: 0 = idle, k = window slot k (1-based). At most one round per job, each vectorised.
    """
    action = np.zeros(price.size, dtype=np.int64)
    if live.size == 0:
        return action
    rem = remaining.copy()
    pool, jobs = order, live
    count = np.zeros(rem.size, dtype=np.int64)
    while pool.size and jobs.size:
        if jobs.size > 1:
            jobs = jobs[np.argsort(count[jobs], kind="stable")]  # fewest machines first: shares stay within 1
        if cap is None:
            slot = jobs[np.arange(pool.size) % jobs.size] + 1  # deal round-robin
            rest = pool[:0]
        else:  # round-robin among the jobs below their cap: level m serves the jobs with room for m machines
            room = cap[jobs] - count[jobs]  # (n,) >= 1
            levels = min(pool.size, int(room.max()))
            seq = np.broadcast_to(jobs, (levels, jobs.size))[np.arange(levels)[:, None] < room[None, :]]
            slot = seq[:pool.size] + 1
            pool, rest = pool[:slot.size], pool[slot.size:]  # rest: no job has room for them this round
        keep = budget_prefix(slot, price[pool], rem)  # each job: affordable prefix of its deal
        if keep.all():  # every job paid for its deal: no job is short, the dealt machines are all taken
            action[pool] = slot
            if not rest.size:
                break
            rem -= np.bincount(slot - 1, weights=price[pool], minlength=rem.size)
            count += np.bincount(slot - 1, minlength=rem.size)
            pool = rest
        else:
            action[pool[keep]] = slot[keep]
            rem -= np.bincount(slot[keep] - 1, weights=price[pool[keep]], minlength=rem.size)
            count += np.bincount(slot[keep] - 1, minlength=rem.size)
            short = np.unique(slot[~keep] - 1)  # jobs that could not pay for all they were dealt
            pool = np.concatenate([pool[~keep], rest]) if rest.size else pool[~keep]  # machine order kept
            jobs = jobs[~np.isin(jobs, short)]
        if cap is not None:
            jobs = jobs[count[jobs] < cap[jobs]]
    return action


@numba.njit(cache=True, nogil=True)
def deal_kernel(order, price, remaining, live, cap, action):  # pragma: no cover - compiled
    """:func:`deal_machines` with caps, compiled (the env's "job" mode): writes the (M,) action into
    ``action`` (zeros on entry). The same rounds and the same float arithmetic as the numpy version —
    the budget prefix sums prices over the tasks grouped by window slot in ascending order, in machine
    order within a slot, as one running sum (``budget_prefix``), and the budgets drop by each job's
    kept prices summed from 0 (``np.bincount``) — so both give the same action (tested)."""
    J = remaining.shape[0]
    M = order.shape[0]
    rem = remaining.copy()
    count = np.zeros(J, np.int64)
    pool = order.copy()
    P = M
    jobs = live.copy()
    n = jobs.shape[0]
    slot = np.empty(M, np.int64)  # 0-based job of each dealt machine, in pool order
    keep = np.empty(M, np.bool_)
    has = np.zeros(J, np.bool_)
    short = np.zeros(J, np.bool_)
    spent = np.zeros(J)
    while P > 0 and n > 0:
        for a in range(1, n):  # stable sort by machines held: fewest first
            v = jobs[a]
            b = a - 1
            while b >= 0 and count[jobs[b]] > count[v]:
                jobs[b + 1] = jobs[b]
                b -= 1
            jobs[b + 1] = v
        levels = 0
        for a in range(n):
            levels = max(levels, cap[jobs[a]] - count[jobs[a]])
        levels = min(levels, P)
        m = 0
        for lev in range(1, levels + 1):  # level by level, jobs with room for lev machines
            for a in range(n):
                if m < P and cap[jobs[a]] - count[jobs[a]] >= lev:
                    slot[m] = jobs[a]
                    m += 1
        has[:] = False
        for t in range(m):
            has[slot[t]] = True
        g = 0.0
        for jj in range(J):  # budget_prefix: window slots ascending, machine order inside
            if not has[jj]:
                continue
            base = g
            for t in range(m):
                if slot[t] == jj:
                    g += price[pool[t]]
                    keep[t] = g - base <= rem[jj] + 1e-9
        short[:] = False
        spent[:] = 0.0
        for t in range(m):
            jj = slot[t]
            if keep[t]:
                action[pool[t]] = jj + 1
                spent[jj] += price[pool[t]]
                count[jj] += 1
            else:
                short[jj] = True
        for jj in range(J):
            rem[jj] -= spent[jj]
        q = 0
        for t in range(P):  # the machines not kept, then those not dealt, in pool order
            if t >= m or not keep[t]:
                pool[q] = pool[t]
                q += 1
        P = q
        q = 0
        for a in range(n):
            jj = jobs[a]
            if not short[jj] and count[jj] < cap[jj]:
                jobs[q] = jj
                q += 1
        n = q
    return action


def confidence_radius(nu: np.ndarray, P: np.ndarray, gamma: float) -> np.ndarray:
    """rad(ν, P) = sqrt(γ ν / P) + γ / P (eq. 14)."""
    return np.sqrt(gamma * nu / P) + gamma / P


def ucb_rates(work_sum: np.ndarray, plays: np.ndarray, gamma: float) -> np.ndarray:
    """θ̂_i = min{1, θ̄_i + 2 rad(θ̄_i, n_i + 1)} with θ̄_i = Σ r / (n_i + 1) (eqs. 66–67, 12–13)."""
    P = plays + 1.0
    bar = work_sum / P
    return np.minimum(1.0, bar + 2.0 * confidence_radius(bar, P, gamma))
