"""OPM: Online Primal-dual algorithm with sampling for Multiple jobs (opm.md §V, Theorem 3).

Per slot t (Algorithm 1 extended to many jobs, §V-A), for every visible job j and machine i:

1. UCB estimate θ̂_i^t = min{1, θ̄_i^t + 2 rad(θ̄_i^t, n_i + 1)} (eqs. 66–67, 14) from the work
   observed on machine i (semi-bandit feedback, all jobs pooled).
2. Dual update λ_j(t) = max{0, λ_j(t−1) + 2μ g_j(x_j(t−1)) − μ g_j(x_j(t−2))} (eq. 73) with
   g_j(x) = Σ_i p_i x_j^i − (1−ε) β_j, β_j = B_j / (d_j − a_j) (eq. 64).
3. Gradient step y_j(t) = x_j(t−1) + α ∇_{x_j} L_{t−1}(x(t−1), λ(t)) (eq. 69), with
   ∂L/∂x_j^i = θ̂_i f_j'(W_j / (t−1−a_j)) − λ_j p_i from eq. 68, where W_j = Σ_{τ<t} Σ_i θ̂_i^τ x_j^i(τ)
   is the *estimated* work of the fractional iterates (eq. 68; ``progress="observed"`` uses the
   work really observed instead).
4. Projection of every machine's row onto {z >= 0, Σ_j z_j <= 1} (P4, eqs. 70–71), all machines at
   once (``kernels.project_capped_simplex``).
5. Randomised rounding with E[x̃_j^i] = x_j^i and at most one task per machine (eq. 72). The
   paper draws it afresh every slot (``rounding="per_slot"``, the default); ``rounding="coupled"``
   draws each machine's uniform once per episode and reuses it, so the rounding is still unbiased
   in every slot (the uniform is uniform) but a machine whose fractional row barely moves keeps
   its job instead of migrating (docs/opm.md reports both).
6. Budget (Algorithm 1 lines 7–12, and §VI "we do not violate the budget constraint"): per job,
   tasks in machine order while the remaining budget lasts.

Defaults are Theorem 3's: γ = ln(MT/δ) (δ = 0.05), μ = √T / M, α = 1 / (2√T), ε = 0, with T the
env horizon. Every one is an option.

Ambiguities, resolved here (documented and tested):

* f_j'(X) = v_j β_j X^(β_j−1) is infinite at X = 0 (β < 1), so the derivative is taken at
  max(W_j/(t−1−a_j), ``work_floor``) (default 1 unit of work per slot) and a job's age is at least 1.
* The gradient uses the freshest estimate θ̂^t for every machine.
* A job that enters the window starts from x_j = 0, λ_j = 0, W_j = 0 (g_j(x(t−1)) = g_j(0)).
* The fractional iterate x (M × J) is stored in float32 by default (``dtype``) to halve the
  memory traffic of the per-machine projection at M=1000; duals, budgets and W are float64.
* ``opm-noest`` (§VI "OPM without machine estimations"): θ̂_i ≡ ``theta_const`` (default 1, the
  value eq. 66 gives an untried machine), never updated.
"""

from __future__ import annotations

import math

import numpy as np

from clustergym.core.agent import BaseAgent
from clustergym.core.scenario import check_choice, check_real
from clustergym.envs.approxjobs.kernels import budget_prefix, project_capped_simplex, round_rows, ucb_rates

__all__ = ["OPM", "OPMNoEstimation", "theorem3_parameters"]


def theorem3_parameters(num_machines: int, horizon: int, delta: float = 0.05) -> dict:
    """γ = ln(MT/δ), μ = √T/M, α = 1/(2√T), ε = 0 (Theorem 3)."""
    M, T = int(num_machines), int(horizon)
    return {"gamma": math.log(M * T / delta), "mu": math.sqrt(T) / M, "alpha": 1.0 / (2.0 * math.sqrt(T)), "eps": 0.0}


class OPM(BaseAgent):
    """OPM (§V). Options: ``alpha``, ``mu``, ``gamma``, ``delta``, ``eps`` (None = Theorem 3),
    ``work_floor``, ``progress`` ("estimate" | "observed"), ``estimate`` (False = noest),
    ``theta_const``, ``dtype``, ``rounding`` ("per_slot" | "coupled", eq. 72)."""

    name = "opm"
    families = ("approxjobs",)

    def __init__(self, alpha: float | None = None, mu: float | None = None, gamma: float | None = None,
                 delta: float = 0.05, eps: float | None = None, work_floor: float = 1.0,
                 progress: str = "estimate", estimate: bool = True, theta_const: float = 1.0,
                 dtype: str = "float32", rounding: str = "per_slot"):
        self.alpha = None if alpha is None else check_real("alpha", alpha, 0.0, None, lo_open=True)
        self.mu = None if mu is None else check_real("mu", mu, 0.0, None)
        self.gamma = None if gamma is None else check_real("gamma", gamma, 0.0, None)
        self.delta = check_real("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True)
        self.eps = None if eps is None else check_real("eps", eps, 0.0, 1.0, hi_open=True)
        self.work_floor = check_real("work_floor", work_floor, 0.0, None, lo_open=True)
        self.progress = check_choice("progress", progress, ("estimate", "observed"))
        if not isinstance(estimate, (bool, np.bool_)):
            raise ValueError(f"estimate={estimate!r} is invalid: expected true or false")
        self.estimate = bool(estimate)
        self.theta_const = check_real("theta_const", theta_const, 0.0, 1.0, lo_open=True)
        self.dtype = np.dtype(check_choice("dtype", dtype, ("float32", "float64")))
        self.rounding = check_choice("rounding", rounding, ("per_slot", "coupled"))

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        M, J = problem.num_machines, problem.max_jobs
        th = theorem3_parameters(M, problem.horizon, self.delta)
        self.a_ = th["alpha"] if self.alpha is None else self.alpha
        self.mu_ = th["mu"] if self.mu is None else self.mu
        self.gamma_ = th["gamma"] if self.gamma is None else self.gamma
        self.eps_ = th["eps"] if self.eps is None else self.eps
        self.price = np.asarray(problem.price, dtype=float)  # (M,)
        self.min_price = float(self.price.min())
        self.plays = np.zeros(M)  # (M,) Σ_τ Σ_j x̃_j^i(τ), executed tasks
        self.work_sum = np.zeros(M)  # (M,) Σ_τ Σ_j r_j^i(τ)
        self.x = np.zeros((M, J), dtype=self.dtype)  # (M, J) fractional x_j^i(t−1) per window slot
        self.lam = np.zeros(J)  # (J,) λ_j
        self.g1 = np.zeros(J)  # (J,) g_j(x_j(t−1))
        self.g2 = np.zeros(J)  # (J,) g_j(x_j(t−2))
        self.W = np.zeros(J)  # (J,) Σ_τ Σ_i θ̂_i^τ x_j^i(τ) (eq. 68)
        self.ids = np.full(J, -1, dtype=np.int64)  # job id held by each window slot
        # eq. 72 coupled across slots: one uniform per machine for the whole episode
        self.u = self.rng.random(M) if self.rounding == "coupled" else None  # (M,)

    def theta_hat(self) -> np.ndarray:
        """(M,) θ̂^t: UCB (eq. 66) or the constant of opm-noest."""
        if not self.estimate:
            return np.full(self.price.size, self.theta_const)
        return ucb_rates(self.work_sum, self.plays, self.gamma_)

    def act(self, obs, info):
        feats = np.asarray(obs["jobs"], dtype=float)  # (J, 8): job_id, a, d, B, spent, v, β, X
        mask = np.asarray(obs["job_mask"]).astype(bool)
        s = int(obs["t"][0]) + 1  # the slot being scheduled
        ids = np.where(mask, feats[:, 0].astype(np.int64), -1)
        a, d, B, spent, v, beta, X = (feats[:, k] for k in range(1, 8))
        target = np.where(mask, (1.0 - self.eps_) * B / np.maximum(d - a, 1.0), 0.0)  # (1−ε) β_j, eq. 64
        new = ids != self.ids
        if new.any():  # a job entered (or left) this window slot: fresh state, g(x(t−1)) = g(0)
            self.x[:, new] = 0.0
            self.lam[new] = 0.0
            self.W[new] = 0.0
            self.g1[new] = -target[new]
            self.g2[new] = -target[new]
            self.ids = ids
        rem = np.where(mask, B - spent, -1.0)
        A = np.flatnonzero(mask & (rem >= self.min_price - 1e-9))  # jobs that can still buy a slot
        M = self.price.size
        action = np.zeros(M, dtype=np.int64)
        if A.size == 0:
            self.x[:] = 0.0
            return action
        # eq. 73: dual update with the two previous fractional iterates
        self.lam[A] = np.maximum(0.0, self.lam[A] + 2.0 * self.mu_ * self.g1[A] - self.mu_ * self.g2[A])
        th = self.theta_hat()  # (M,)
        age = np.maximum(s - 1 - a[A], 1.0)
        prog = self.W[A] if self.progress == "estimate" else X[A]
        avg = np.maximum(prog / age, self.work_floor)
        fprime = v[A] * beta[A] * avg ** (beta[A] - 1.0)  # f_j'(·), eq. 68
        # eq. 69: y = x(t−1) + α (θ̂_i f_j' − λ_j p_i), a rank-2 update done as one BLAS product;
        # P4 projection per machine (eqs. 70–71)
        full = A.size == self.x.shape[1]
        Y = self.x.copy() if full else self.x[:, A]
        Y += (np.stack([self.a_ * th, -self.a_ * self.price], axis=1) @ np.stack([fprime, self.lam[A]])).astype(Y.dtype)
        Z = project_capped_simplex(Y)  # (M, |A|)
        if full:
            self.x = Z
        else:
            self.x[:] = 0.0
            self.x[:, A] = Z
        Z64 = Z.astype(np.float64)
        g = self.price @ Z64 - target[A]  # g_j(x_j(t)), eq. 64
        self.g2[A] = self.g1[A]
        self.g1[A] = g
        self.W[A] += th @ Z64  # eq. 68: estimated work of the fractional iterate
        k = round_rows(Z, self.rng.random(M) if self.u is None else self.u)  # eq. 72
        action = np.where(k > 0, A[k - 1] + 1, 0)
        mach = np.flatnonzero(action)
        keep = budget_prefix(action[mach], self.price[mach], rem)  # Algorithm 1 lines 7–12
        action[mach[~keep]] = 0
        return action

    def update(self, obs, action, reward, next_obs, info) -> None:
        if not self.estimate:
            return
        fb = info["feedback"]
        ran = np.asarray(fb["executed"], dtype=bool)  # machines that ran a task this slot
        self.plays[ran] += 1.0
        self.work_sum[ran] += np.asarray(fb["work"])[ran]


class OPMNoEstimation(OPM):
    """OPM without machine estimations (§VI baseline): every θ̂_i equals ``theta_const``."""

    name = "opm-noest"

    def __init__(self, theta_const: float = 1.0, **kwargs):
        if "estimate" in kwargs:
            raise ValueError("opm-noest has estimation disabled; use opm for estimate=true")
        super().__init__(estimate=False, theta_const=theta_const, **kwargs)
