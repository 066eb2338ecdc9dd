"""OPS: Online Primal-dual algorithm with Sampling for a Single job (opm.md §IV, Algorithm 1).

Per slot t: UCB estimates θ̂^t (eqs. 12–14); dual update λ(t) = max{0, λ(t−1) + 2μ g(x(t−1)) −
μ g(x(t−2))} (eq. 20) with g(x) = Σ_i p_i x^i − (1−ε)B/T (eq. 10); primal step
x(t) = Π_[0,1]^M (x(t−1) + α (θ̂ f'(W/(t−1)) − λ p)) (eqs. 17–19), where the gradient of
t·f(Σ_τ θ̂ x(τ)/t) is θ̂_i f'(·) and W = Σ_τ θ̂^τ·x(τ); independent rounding x̃^i ~ Bernoulli(x^i)
(eq. 21); budget check in machine order (lines 7–12).

Defaults are Theorem 2's: γ = ln(MT/δ), μ = √T/M, α = 1/(2√T), ε = 8/(ρ²T) with ρ = B/(MT),
capped at ``eps_max`` (0.5; for small T the theorem's ε exceeds 1). T is the job's lifetime
d − a (the horizon of §IV). OPS schedules the first visible job only (§IV has one job); other
visible jobs are left idle. As in OPM, f' is taken at max(W/(t−1), ``work_floor``).
"""

from __future__ import annotations

import math

import numpy as np

from clustergym.core.agent import BaseAgent
from clustergym.core.scenario import check_real
from clustergym.envs.approxjobs.kernels import budget_prefix, ucb_rates

__all__ = ["OPS"]


class OPS(BaseAgent):
    name = "ops"
    families = ("approxjobs",)

    def __init__(self, alpha: float | None = None, mu: float | None = None, gamma: float | None = None,
                 delta: float = 0.05, eps: float | None = None, eps_max: float = 0.5, work_floor: float = 1.0):
        self.alpha = None if alpha is None else check_real("alpha", alpha, 0.0, None, lo_open=True)
        self.mu = None if mu is None else check_real("mu", mu, 0.0, None)
        self.gamma = None if gamma is None else check_real("gamma", gamma, 0.0, None)
        self.delta = check_real("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True)
        self.eps = None if eps is None else check_real("eps", eps, 0.0, 1.0, hi_open=True)
        self.eps_max = check_real("eps_max", eps_max, 0.0, 1.0, hi_open=True)
        self.work_floor = check_real("work_floor", work_floor, 0.0, None, lo_open=True)

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        M = problem.num_machines
        self.price = np.asarray(problem.price, dtype=float)
        self.plays = np.zeros(M)
        self.work_sum = np.zeros(M)
        self.job = -1

    def _start(self, B: float, T: int) -> None:
        M = self.price.size
        self.T = T
        self.a_ = 1.0 / (2.0 * math.sqrt(T)) if self.alpha is None else self.alpha
        self.mu_ = math.sqrt(T) / M if self.mu is None else self.mu
        self.gamma_ = math.log(M * T / self.delta) if self.gamma is None else self.gamma
        rho = B / (M * T)
        self.eps_ = min(8.0 / (rho ** 2 * T), self.eps_max) if self.eps is None else self.eps
        self.target = (1.0 - self.eps_) * B / T  # eq. 10
        self.x = np.zeros(M)  # x(0) = 0
        self.lam = 0.0  # λ(0) = 0
        self.g1 = self.g2 = -self.target  # g(x(0)) = g(0)
        self.W = 0.0

    def act(self, obs, info):
        M = self.price.size
        action = np.zeros(M, dtype=np.int64)
        mask = np.asarray(obs["job_mask"]).astype(bool)
        if not mask.any():
            return action
        k = int(np.flatnonzero(mask)[0])
        jid, a, d, B, spent, v, beta, X = (float(z) for z in np.asarray(obs["jobs"])[k])
        if int(jid) != self.job:
            self.job = int(jid)
            self._start(B, max(int(d - a), 1))
        t = int(obs["t"][0]) + 1 - int(a)  # slot index within the job's life, 1..T
        self.lam = max(0.0, self.lam + 2.0 * self.mu_ * self.g1 - self.mu_ * self.g2)  # eq. 20
        th = ucb_rates(self.work_sum, self.plays, self.gamma_)  # eq. 12
        avg = max(self.W / max(t - 1, 1), self.work_floor)
        sigma = th * v * beta * avg ** (beta - 1.0)  # gradient of t f(Σ θ̂ x / t)
        self.x = np.clip(self.x + self.a_ * (sigma - self.lam * self.price), 0.0, 1.0)  # eqs. 18–19
        self.g2, self.g1 = self.g1, float(self.price @ self.x) - self.target
        self.W += float(th @ self.x)
        xt = self.rng.random(M) < self.x  # eq. 21
        mach = np.flatnonzero(xt)
        keep = budget_prefix(np.ones(mach.size, dtype=np.int64), self.price[mach], np.array([B - spent]))
        action[mach[keep]] = k + 1
        return action

    def update(self, obs, action, reward, next_obs, info) -> None:
        fb = info["feedback"]
        ran = np.asarray(fb["executed"], dtype=bool)  # machines that ran a task this slot
        self.plays[ran] += 1.0
        self.work_sum[ran] += np.asarray(fb["work"])[ran]
