"""Array kernels shared by the ApproxJobs env and its agents (opm.md §IV–V).

All work on every machine at once: rows are machines, columns are window slots (jobs).
"""

from __future__ import annotations

import numpy as np

__all__ = ["project_capped_simplex", "round_rows", "budget_prefix", "confidence_radius", "ucb_rates"]


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


def confidence_radius(nu: np.ndarray, P: np.ndarray, gamma: float) -> np.ndarray:
    """rad(ν, P) = sqrt(γ ν / P) + γ / P (eq. 14)."""
    return np.sqrt(gamma * nu / P) + gamma / P


def ucb_rates(work_sum: np.ndarray, plays: np.ndarray, gamma: float) -> np.ndarray:
    """θ̂_i = min{1, θ̄_i + 2 rad(θ̄_i, n_i + 1)} with θ̄_i = Σ r / (n_i + 1) (eqs. 66–67, 12–13)."""
    P = plays + 1.0
    bar = work_sum / P
    return np.minimum(1.0, bar + 2.0 * confidence_radius(bar, P, gamma))
