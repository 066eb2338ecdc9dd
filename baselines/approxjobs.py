"""The OPM paper's baselines for ApproxJobs (opm.md §VI "Baseline Algorithms") and a random agent.

None of them estimates machine speeds. Machines are taken in one random order drawn at reset
(the agent's own generator; fixed, so assignments only change when the set of jobs does), then each job's tasks pass the same budget rule as OPM (Algorithm 1
lines 7–12, in machine order): no baseline ever exceeds a budget. Only jobs whose remaining budget
covers the cheapest price are considered ("whenever the budget has not run out").
"""

from __future__ import annotations

import numpy as np

from clustergym.core.agent import BaseAgent
from clustergym.envs.approxjobs.kernels import budget_prefix, deal_machines

__all__ = ["Fair", "EDF", "RandomApprox"]


class _ApproxBaseline(BaseAgent):
    families = ("approxjobs",)

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        self.price = np.asarray(problem.price, dtype=float)
        self.min_price = float(self.price.min())
        self.order = self.rng.permutation(self.price.size)  # fixed machine order, drawn once

    def _jobs(self, obs):
        feats = np.asarray(obs["jobs"], dtype=float)
        mask = np.asarray(obs["job_mask"]).astype(bool)
        rem = np.where(mask, feats[:, 3] - feats[:, 4], -1.0)  # B_j − spent_j
        live = np.flatnonzero(mask & (rem >= self.min_price - 1e-9))
        return feats, rem, live

    def _within_budget(self, action, rem):
        mach = np.flatnonzero(action)
        keep = budget_prefix(action[mach], self.price[mach], rem)
        action[mach[~keep]] = 0
        return action


class Fair(_ApproxBaseline):
    """Fair scheduler (§VI: "the cluster resource is shared equally among all ongoing jobs whenever
    the budget has not run out").

    Reading (documented choice): machines, in the fixed random order, are dealt round-robin to the
    live jobs, so each gets ⌊M/n⌋ or ⌈M/n⌉. A job keeps its dealt machines in that order while its
    remaining budget pays for them (Algorithm 1 lines 7–12); the machines a job cannot pay for are
    **not left idle**: they are dealt again, round-robin, among the jobs that could pay for every
    machine they were dealt (those with the fewest machines first), and so on until no machine is left over or every job is out of
    budget for this slot (water-filling: a job's share is min(what it can pay for, the equal
    share of what the others leave)). ``redistribute=False`` is the older reading that leaves
    them idle. At most one round per job, each vectorised.
    """

    name = "fair"

    def __init__(self, redistribute: bool = True):
        if not isinstance(redistribute, (bool, np.bool_)):
            raise ValueError(f"redistribute={redistribute!r} is invalid: expected true or false")
        self.redistribute = bool(redistribute)

    def act(self, obs, info):
        feats, rem, live = self._jobs(obs)
        M = self.price.size
        action = np.zeros(M, dtype=np.int64)
        if live.size == 0:
            return action
        if not self.redistribute:
            action[self.order] = live[np.arange(M) % live.size] + 1
            return self._within_budget(action, rem)
        return deal_machines(self.order, self.price, rem, live)  # the water-filling deal (the env's "job" mode too)


class EDF(_ApproxBaseline):
    """Deadline-aware scheduler: jobs by earliest deadline d_j (ties: arrival, window slot); each
    takes as many of the remaining machines (fixed random order) as its remaining budget pays for."""

    name = "edf"

    def act(self, obs, info):
        feats, rem, live = self._jobs(obs)
        M = self.price.size
        action = np.zeros(M, dtype=np.int64)
        if live.size == 0:
            return action
        pool = self.order
        order = live[np.lexsort((live, feats[live, 1], feats[live, 2]))]
        for k in order:
            if pool.size == 0:
                break
            n = int(np.searchsorted(np.cumsum(self.price[pool]), rem[k] + 1e-9, side="right"))
            action[pool[:n]] = k + 1
            pool = pool[n:]
        return action


class RandomApprox(_ApproxBaseline):
    """Feasible random: each machine picks idle or a live job uniformly; budgets then enforced."""

    name = "random"

    def act(self, obs, info):
        feats, rem, live = self._jobs(obs)
        M = self.price.size
        choice = self.rng.integers(0, live.size + 1, size=M)
        action = np.where(choice > 0, np.r_[0, live + 1][choice], 0).astype(np.int64)
        return self._within_budget(action, rem)
