"""P4 as a PettingZoo ParallelEnv: ApproxJobs with machines as agents (opm.md §III)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from clustergym.core.parallel import ClusterParallelEnv
from clustergym.envs.approxjobs.env import ApproxJobsEnv

__all__ = ["ApproxJobsParallelEnv", "parallel_env"]


class ApproxJobsParallelEnv(ClusterParallelEnv):
    """ApproxJobs-v0 with one agent per machine; drives one :class:`ApproxJobsEnv`.

    ## Description
    The single env's model (opm.md §III), decided by the machines. The single env's action is
    already one choice per machine (``MultiDiscrete([J_max + 1] * M)``, eq. 3: a machine runs at
    most one task per slot), so the decomposition is exact: agent ``machine_i`` picks entry i —
    idle, or a task of the job in window slot k. The M choices are joined into the single env's
    action and the single env steps once (service rates, the job window, the budget repair of
    Algorithm 1 lines 7–12 and the reward are all the single env's).

    ## Action Space
    ``machine_i``: ``Discrete(J_max + 1)``: 0 = idle, k = window slot k. The mask (J_max + 1,) —
    idle always, slot k when it holds a job whose remaining budget covers p_i — is in the
    observation as ``action_mask`` (int8, PettingZoo's convention, used by ``parallel_api_test``
    to sample valid actions) and in ``infos[machine_i]["action_mask"]`` (int8 as well).
    Budgets are per job and shared by all machines: several machines may each pass the mask yet
    together exceed a job's budget; the single env then drops the excess tasks in machine order
    (``infeasible="repair"``) or raises (``"raise"``).

    ## Observation Space (per agent: the public job window plus what machine i knows of itself)
    | key         | space                              | meaning                                   |
    |-------------|------------------------------------|-------------------------------------------|
    | jobs        | Box(0, inf, (J_max, 8), float64)   | the single env's job window (public)      |
    | job_mask    | MultiBinary(J_max)                 | window slot occupied                      |
    | t           | Box(0, T, (1,), float32)           | slots elapsed                              |
    | price       | Box(0, inf, (1,), float64)         | p_i, machine i's price (public)           |
    | action_mask | MultiBinary(J_max + 1)             | allowed actions of machine i              |
    | machine_rate, machine_share, last_work | Box(0, 1, (1,), float32) | machine i's entries of the single env's statistics and last feedback |
    | last_executed | MultiBinary(1)                   | machine i ran a task last slot            |
    Never the machine's hidden service rate θ_i^t, its speed or future jobs (only its realised work, the
    feedback). ``state()``: float64 (J_max·8 + J_max + 1,) = [jobs, job_mask, t] of the single env's
    observation, flattened.

    ## Rewards
    The single env's reward is Σ_j Δ_j with Δ_j = f_j(X_j(t)) − f_j(X_j(t−1)), and job j's work this
    slot is ΔX_j = Σ_{i→j} r_j^i(t) (eq. 1). Machine i, having run a task of job j, gets
        r_i(t) = Δ_j · r_j^i(t) / ΔX_j   (Δ_j split equally among j's machines if ΔX_j = 0, then Δ_j = 0),
    and 0 when idle or when its task was dropped by the budget repair. Σ_i r_i(t) = Σ_j Δ_j, the single
    env's reward, up to float rounding (the tests use |Σ_i r_i − r| <= 1e-9 max(1, |r|)). Δ_j is read
    from the single env's own utilities (``job_records()["utility"]``), not recomputed here.

    ## Info (per agent)
    ``feedback`` (semi-bandit, §III): ``slot`` (executed window slot, 0 = idle or dropped), ``job_id``
    (−1 if none), ``work`` r_j^i(t) (0 if none), ``cost`` (p_i if it ran, else 0); ``action_mask``;
    ``t``; ``metrics``: the single env's evaluation-only metrics.

    ## Episode End
    All agents are truncated together at ``horizon``, or terminated together when every job has
    left (as the single env).

    ## Arguments
    Exactly the single env's kwargs (``instances`` included: the spaces do not vary by instance;
    ``action_mode`` only ``"machine"``);
    ``reset(options={"scenario_seed": k})`` switches instance as the single env; ``render`` draws the
    single env.
    """

    metadata = {**ClusterParallelEnv.metadata, "name": "approxjobs_parallel_v0"}

    single_env: ApproxJobsEnv

    def __init__(self, scenario: Any = "paper", **kwargs: Any):
        if kwargs.get("action_mode", "machine") != "machine":
            raise ValueError(f"action_mode={kwargs['action_mode']!r} is invalid here: each machine chooses its own "
                             "job, the \"machine\" action (the \"job\" mode is a single-env action)")
        env = ApproxJobsEnv(scenario, **kwargs)
        pb = env.problem
        M, J, T = pb.num_machines, pb.max_jobs, float(env.horizon)
        jobs_space = env.observation_space["jobs"]  # type: ignore[index]  # a Dict space
        F = jobs_space.shape[1]  # the single env's job features
        agents = [f"machine_{i}" for i in range(M)]
        obs_spaces = {a: spaces.Dict({
            "jobs": spaces.Box(0.0, np.inf, shape=(J, F), dtype=np.float64),
            "job_mask": spaces.MultiBinary(J),
            "t": spaces.Box(0.0, T, shape=(1,), dtype=np.float32),
            "price": spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float64),
            "action_mask": spaces.MultiBinary(J + 1),
            # the single env's statistics and last feedback of this machine (approxjobs/learner_stats.py)
            "machine_rate": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
            "machine_share": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
            "last_executed": spaces.MultiBinary(1),
            "last_work": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
        }) for a in agents}
        act_spaces = {a: spaces.Discrete(J + 1) for a in agents}
        state_space = spaces.Box(0.0, np.inf, shape=(J * F + J + 1,), dtype=np.float64)
        super().__init__(env, agents, obs_spaces, act_spaces, state_space)
        self._M, self._J = M, J
        self._price = np.asarray(pb.price, dtype=np.float64)  # (M,) p_i

    def _on_instance(self) -> None:
        """Another instance (same machines and window, so the same spaces): its prices."""
        self.problem = pb = self.single_env.problem
        self._price = np.asarray(pb.price, dtype=np.float64)

    # -- joint action ---------------------------------------------------------------------------
    def _join(self, vals: list[np.ndarray]) -> np.ndarray:
        return np.stack(vals)  # (M,) entry i = machine i's choice; the single env validates values

    def _split(self, joint: np.ndarray) -> dict[str, np.ndarray]:
        return {a: joint[i].copy() for i, a in enumerate(self.possible_agents)}

    # -- observations ---------------------------------------------------------------------------
    def _on_reset(self, obs: dict, info: dict) -> None:
        self._util = self.single_env.job_records()["utility"]  # (n,) f_j(X_j) of the jobs arrived so far

    def _observe(self, obs: dict, info: dict) -> dict[str, dict]:
        masks = info["action_mask"].reshape(self._M, self._J + 1).astype(np.int8)  # (M, J+1)
        own = ("machine_rate", "machine_share", "last_executed", "last_work")
        return {a: {"jobs": obs["jobs"].copy(), "job_mask": obs["job_mask"].copy(), "t": obs["t"].copy(),
                    "price": self._price[i:i + 1].copy(), "action_mask": masks[i],
                    **{k: obs[k][i:i + 1].copy() for k in own}}
                for i, a in enumerate(self.possible_agents)}

    def _state(self, obs: dict) -> np.ndarray:
        return np.concatenate([obs["jobs"].ravel(), obs["job_mask"].astype(np.float64),
                               obs["t"].astype(np.float64)])

    # -- reward and infos -----------------------------------------------------------------------
    def _split_reward(self, reward: float, info: dict) -> dict[str, float]:
        fb = info["feedback"]
        util = self.single_env.job_records()["utility"]  # (n',) after the slot, n' >= n
        mach = np.flatnonzero(fb["executed"])  # used machines, ascending
        jid, work = fb["job_id"][mach], fb["work"][mach]
        r = np.zeros(self._M)
        if mach.size:
            prev = np.zeros(util.size)
            prev[:self._util.size] = self._util
            delta = util[jid] - prev[jid]  # (n_used,) Δ_j of each used machine's job
            tot = np.zeros(util.size)
            np.add.at(tot, jid, work)  # ΔX_j = Σ_{i→j} r_j^i
            cnt = np.bincount(jid, minlength=util.size)  # machines per job
            share = np.where(tot[jid] > 0, work / np.where(tot[jid] > 0, tot[jid], 1.0), 1.0 / cnt[jid])
            r[mach] = delta * share
        self._util = util
        self._fb = fb
        return {a: float(r[i]) for i, a in enumerate(self.possible_agents)}

    def _infos(self, info: dict, rewards: dict | None) -> dict[str, dict]:
        masks = info["action_mask"].reshape(self._M, self._J + 1)
        if rewards is not None:
            fb = self._fb
            slot, job, work, cost = fb["slot"], fb["job_id"], fb["work"], fb["cost"]
        out = {}
        for i, a in enumerate(self.possible_agents):
            d = {"action_mask": masks[i].astype(np.int8), "t": info["t"]}
            if rewards is not None:
                d["feedback"] = {"slot": int(slot[i]), "job_id": int(job[i]), "work": float(work[i]),
                                 "cost": float(cost[i])}
                d["metrics"] = info["metrics"]
            out[a] = d
        return out


def parallel_env(**kwargs: Any) -> ApproxJobsParallelEnv:
    """PettingZoo ParallelEnv of ApproxJobs-v0 (machines as agents); kwargs as the single env."""
    return ApproxJobsParallelEnv(**kwargs)
