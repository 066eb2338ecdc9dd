"""P4 environment: ApproxJobs-v0 (OPM paper, opm.md §III and §VI)."""

from __future__ import annotations

import dataclasses
import functools

from typing import Any

import numpy as np
from gymnasium import spaces

from clustergym.core import Scenario, check_choice, child_generators
from clustergym.env import ClusterEnv, InstanceSource
from clustergym.metrics import CUMULATIVE, EPISODE, SLOT, Metric
from clustergym.envs.approxjobs.dynamics import budget_prefix, deal_kernel
from clustergym.envs.approxjobs.stats import MachineStats, learner_spaces
from clustergym.envs.approxjobs.scenario import APPROX_SCENARIOS, PAPER_DEFAULTS, PAPER_SCALE, make_approx_scenario
from clustergym.envs.approxjobs.service import ServiceProcess

__all__ = ["ApproxJobsEnv", "JOB_FEATURES", "JOB_LEVELS"]

_BLOCK = 256  # slots of service rates drawn at once (fixed: the realisation depends on it)
JOB_FEATURES = ("job_id", "arrival", "deadline", "budget", "spent", "value", "beta", "work")
_F = {name: k for k, name in enumerate(JOB_FEATURES)}
JOB_LEVELS = 10  # S: "job" mode levels; level s caps a job at round(s·M/S) machines


class ApproxJobsEnv(ClusterEnv):
    r"""Approximation jobs with budgets and deadlines on machines of fluctuating, hidden speed.

    ## Description
    The OPM paper's model (opm.md §III). M machines; in slot t machine i delivers θ_i^t ∈ [0, 1]
    units of work to the task it runs (hidden; ``service.py``: alternating available/unavailable
    Gamma periods of §VI, or i.i.d.) and charges the price p_i (public). Job j arrives at the end
    of slot a_j, may run in slots a_j+1..d_j, has budget B_j and utility f_j(X_j) = v_j X_j^β_j of
    its total work X_j (eqs. 1–2). Each machine runs at most one task per slot (eq. 3); a job never
    spends more than B_j (eq. 4 is enforced, so Fit_T of eq. 8 is 0).

    Jobs wait in a FIFO queue until one of the J_max window slots is free; a job keeps its window
    slot until it leaves: at its deadline, or when its remaining budget is below the cheapest price
    (it can no longer buy any slot; §VI "the algorithm shall remove it from the scheduling list").

    ## Action Space
    ``action_mode="machine"`` (default; what OPM outputs): ``MultiDiscrete([J_max + 1] * M)``: entry i
    is 0 (machine i idle) or k (run a task of the job in window slot k). ``info["action_mask"]`` /
    ``action_masks()`` is the flat (M·(J_max+1),) mask sb3-contrib expects: per machine, idle is
    always allowed, job k when slot k is occupied and the job's remaining budget covers p_i.

    ``action_mode="job"`` (compact): ``MultiDiscrete([S + 1] * J_max)`` with S = ``JOB_LEVELS`` = 10:
    per window slot k a level s_k, which caps the job at n_k = round(s_k·M/S) machines (level S: all
    M). **Deal rule** (public information only: the job rows of the observation and the prices; never
    the service rates): the live jobs are the occupied slots whose remaining budget B_j − spent_j
    covers the cheapest price and whose cap is >= 1; the machines, in index order, are dealt
    round-robin to them (window-slot order, level by level: a job is skipped once it holds its cap);
    each job keeps the affordable prefix of its deal (Algorithm 1 lines 7–12); the machines a job
    cannot pay for are dealt again among the jobs that could pay for all they were dealt and are
    below their cap (fewest machines first), until no machine or no such job is left
    (``dynamics.deal_machines``; compiled: ``dynamics.deal_kernel``). With every level S this is the ``fair`` baseline's water-filling
    with the machines in index order (Fair draws its order at random), exactly. The result is within
    every budget: nothing is repaired. ``action_masks()`` / ``info["action_mask"]`` is the flat
    (J_max·(S+1),) mask: every level for a live job, level 0 only otherwise (a level of another slot
    is ignored). Levels outside 0..S: ValueError. ``problem.action_mode`` carries the mode.

    ## Observation Space
    | key      | space                                   | meaning                                    |
    |----------|-----------------------------------------|--------------------------------------------|
    | jobs     | Box(0, inf, (J_max, 8), float64)         | per window slot: job_id, a_j, d_j, B_j, spent, v_j, β_j, X_j (0 if empty) |
    | job_mask | MultiBinary(J_max)                       | window slot occupied                       |
    | t        | Box(0, T, (1,), float32)                 | slots elapsed (the next slot is t+1)       |
    | machine_rate  | Box(0, 1, (M,), float32)            | mean work per slot machine i ran (estimates θ_i, §III; 0 if unused) |
    | machine_share | Box(0, 1, (M,), float32)            | share of the slots machine i ran a task    |
    | last_executed | MultiBinary(M)                      | the machines that ran last slot (``feedback["executed"]``) |
    | last_work     | Box(0, 1, (M,), float32)            | their work r_j^i(t) (``feedback["work"]``; 0 elsewhere) |
    Besides the job window, the observation carries what a learner needs (``info`` is diagnostics, never
    required): the last slot's feedback and its per-machine statistics (updated from the feedback alone,
    ``approxjobs/stats.py``, shared with the PettingZoo env; 0 at t = 0). The prices p_i stay in
    ``problem.price`` (an instance fingerprint in the observation: see ``approxjobs/stats.py``).
    ``gymnasium.wrappers.FlattenObservation`` (or ``clustergym.wrappers.FlattenWithStats``) gives the flat
    vector a standard learner takes.

    ## Rewards
    $\sum_j [f_j(X_j(t)) - f_j(X_j(t-1))]$: the episode return is $\sum_j f_j(X_j)$, the objective of P1.

    ## Infeasible actions
    Budget (eq. 4), as Algorithm 1 lines 7–12: for each job, its tasks are taken in machine order
    and kept while the cumulative price stays within the remaining budget; the rest are dropped.
    Tasks for an empty window slot are dropped. ``infeasible="repair"`` (default) drops and counts
    them in ``info["metrics"]["repaired"]``; ``"raise"`` raises ValueError naming the job and the
    excess. Values outside 0..J_max, wrong shape, NaN: always ValueError. Eq. 3 holds by
    construction of the action space.

    ## Info
    ``feedback`` (semi-bandit, §III: r_j^i(t) is known at the end of slot t), one entry per machine
    (fixed shapes (M,), so Gymnasium's vector envs can stack it): ``executed`` (bool, the machine
    ran a task), ``slot`` (its window slot k, 1-based; 0 = idle), ``job_id`` (−1 = idle), ``work``
    (r_j^i(t), 0 when idle) and ``cost`` (p_i if it ran, else 0). ``metrics`` (evaluation only): ``utility`` (Σ_j f_j(X_j) so far),
    ``budget_spent`` (this slot), ``fit`` (Σ_j max(0, spent_j − B_j), eq. 8 positive part),
    ``migrations`` (machines whose task of a still-active job j stopped while j is still active:
    the task was moved or pre-empted, Fig. 3b), ``migration_rate`` (migrations / M), ``busy``,
    ``repaired``; at the last step ``episode_*`` summaries (utility, spent, fit, jobs, medians of
    the per-job cost-to-utility and budget-used ratios of Fig. 1, migrations, and with
    ``oracle=True`` ``episode_bound``).
    ``job_records()`` returns per-job arrays for CDFs.

    ## Starting State / Episode End
    ``reset(seed)`` seeds a child generator for the machine service rates; the job list is fixed by
    ``scenario_seed``. Every agent therefore sees the same rates and the same jobs for the same
    seed. Truncated after ``horizon`` slots; terminated early when every job has left (never for an
    instance without jobs); ``step`` then raises ``ResetNeeded`` (a ``RuntimeError``) until ``reset``.

    ## Instances
    ``reset(seed=s, options={"scenario_seed": k})`` switches to instance k (another job list and
    machine set of the same scenario): the episode equals that of ``gym.make(..., scenario_seed=k)``
    (same other kwargs) reset with ``seed=s``. ``instances=range(...)`` draws an instance at each
    reset without that option, from a generator derived from the reset seed (never from
    ``np_random``). The spaces do not vary by instance (M machines and the J-slot window are
    parameters): P4 needs no padding. Other option keys are a ValueError.

    ## Arguments
    ``scenario`` ("paper", "philly", "single" or a Scenario), ``scenario_seed`` (default 0),
    ``horizon`` (default: the scenario's, 2000; 50,000 with ``scale="paper"``), ``oracle`` (default
    False; True adds ``episode_bound`` to the last step's metrics: an upper bound on the expected
    episode utility, ``bound.py``; there is no per-slot oracle; ``clustergym run`` and
    ``runner.evaluate`` turn it on whenever they compute a score, unless ``oracle`` is given), ``infeasible``, ``render_mode``, and
    scenario parameters (``scenario.py``):
    ``num_machines``, ``max_jobs``, ``beta``, ``load``, ``scale``, ``arrival_rate``, ``life_min``,
    ``life_max``, ``budget_low``, ``budget_high``, ``value_low``, ``value_high``, ``speed_low``,
    ``service``, ``price``, ``price_low``, ``price_high``, ``arrivals``, ``trace_path``,
    ``trace_start``, ``slot_seconds``; ``instances`` (seeds drawn at each reset, default None);
    ``action_mode`` (``"machine"``, default, or ``"job"``; Action Space above).

    ## Version History
    * v0: initial version.
    * v0, later: ``info["feedback"]`` is per machine with fixed shapes (``executed``, ``slot``,
      ``job_id``, ``work``, ``cost``, each (M,)); it was the used machines only (``machines``,
      ``slots``, ``job_ids``, ``work``, ``cost``), whose length changed from slot to slot and broke
      ``gym.make_vec(..., vectorization_mode="sync")``.
    * v0, later: ``reset(options={"scenario_seed": k})`` and ``instances``; unknown reset options
      raise. Later: ``step`` after the end raises until ``reset``.
    * v0, later: ``action_mode="job"`` (per-job levels dealt to machines by the env).
    * v0, later: the observation carries the per-machine statistics and the last slot's feedback. The
      flat vector of earlier versions is ``clustergym.learning.pipeline``'s ``"legacy"``
      layout (same values).
    """

    family = "approxjobs"
    # info["metrics"] keys and their kind (clustergym/metrics.py).
    metrics_spec = {
        "utility": Metric(CUMULATIVE, "Σ_j f_j(X_j) so far (the running total of the reward)"),
        "budget_spent": Metric(SLOT, "price paid this slot"),
        "fit": Metric(CUMULATIVE, "Σ_j max(0, spent_j − B_j) so far (eq. 8 positive part)"),
        "migrations": Metric(SLOT, "machines whose task of a still-active job stopped (Fig. 3b)"),
        "migration_rate": Metric(SLOT, "migrations / M"),
        "busy": Metric(SLOT, "machines running a task"),
        "repaired": Metric(SLOT, "tasks dropped by the repair (budgets, empty window slots)", total=True),
        "episode_utility": Metric(EPISODE, "Σ_j f_j(X_j) over every job (Table I)"),
        "episode_budget_spent": Metric(EPISODE, "Σ_j spent_j"),
        "episode_fit": Metric(EPISODE, "Fit_T (eq. 8)"),
        "episode_jobs": Metric(EPISODE, "jobs in the job list"),
        "episode_jobs_served": Metric(EPISODE, "jobs that got some work"),
        "episode_cost_to_utility_median": Metric(EPISODE, "median per-job cost / utility (Fig. 1a)"),
        "episode_budget_used_median": Metric(EPISODE, "median per-job spent / budget (Fig. 1b)"),
        "episode_budget_used_mean": Metric(EPISODE, "mean per-job spent / budget (Fig. 1b)"),
        "episode_migrations": Metric(EPISODE, "Σ_t migrations (Fig. 3b)"),
        "episode_bound": Metric(EPISODE, "fluid upper bound on the episode's utility (oracle.py; oracle=True)"),
    }
    # The runner turns the bound on whenever it computes a score (clustergym run / evaluate, score=True):
    # one LP per env (≈0.2–0.5 s at both scales, measured), cached for the env's life.
    score_env_kwargs = {"oracle": True}
    action_modes = ("machine", "job")  # values of the action_mode kwarg, the default first

    def __init__(self, scenario: str | Scenario = "paper", *, scenario_seed: int = 0, horizon: int | None = None,
                 oracle: bool = False, infeasible: str = "repair", render_mode: str | None = None,
                 instances: Any = None, action_mode: str = "machine", **params: Any):
        self.action_mode = check_choice("action_mode", action_mode, self.action_modes)
        if horizon is None:  # default T: the Scenario's own, else that of the named scale
            if isinstance(scenario, Scenario):
                horizon = scenario.problem.horizon
            else:
                horizon = PAPER_SCALE["horizon"] if params.get("scale") == "paper" else PAPER_DEFAULTS["horizon"]
        super().__init__(horizon=horizon, infeasible=infeasible, render_mode=render_mode, oracle=oracle)

        # the job list is drawn for T = self.horizon (a partial, not a closure: the env pickles)
        factory = functools.partial(make_approx_scenario, horizon=self.horizon)

        self._source = InstanceSource(scenario, params, factory, APPROX_SCENARIOS, scenario_seed, instances)
        sc = self._source.first
        self._load(sc)
        self.action_space, self.observation_space = self._spaces(sc.problem, self.scenario_seed)
        self._rngs = None

    def _spaces(self, pb, k=None) -> tuple:
        """(action space, observation space) of problem ``pb`` (the same for every instance of a scenario:
        M machines and the J-slot window are parameters)."""
        M, J = pb.num_machines, pb.max_jobs
        if self.action_mode == "job":  # a level 0..S per window slot, completed by the env's deal
            act = spaces.MultiDiscrete(np.full(J, JOB_LEVELS + 1, dtype=np.int64))
        else:
            act = spaces.MultiDiscrete(np.full(M, J + 1, dtype=np.int64))
        obs = spaces.Dict({
            "jobs": spaces.Box(0.0, np.inf, shape=(J, len(JOB_FEATURES)), dtype=np.float64),
            "job_mask": spaces.MultiBinary(J),
            "t": spaces.Box(0.0, float(self.horizon), shape=(1,), dtype=np.float32),
            **learner_spaces(M),
        })
        return act, obs

    def _load(self, sc: Scenario) -> None:
        self.scenario = sc
        self.problem = pb = dataclasses.replace(sc.problem, action_mode=self.action_mode)
        self._truth = sc.truth
        self._jobs = sc.truth.jobs
        self._M, self._J, self._N = pb.num_machines, pb.max_jobs, len(self._jobs)
        self._price = np.asarray(pb.price, dtype=float)
        self._min_price = float(self._price.min())
        self._stats = MachineStats(1, self._M)  # the learner's statistics (approxjobs/stats.py)
        self._space_desc = f"MultiDiscrete([{self._J + 1}] * {self._M}) (0 = idle, k = window slot k)"
        self._order = np.arange(self._M)  # "job" mode: machines dealt in index order
        self._job_desc = f"MultiDiscrete([{JOB_LEVELS + 1}] * {self._J}) (level 0..{JOB_LEVELS} per window slot)"
        # "job" mode: level s caps a job at round(s·M/S) machines (integer arithmetic: level S = all M)
        self._level_cap = (np.arange(JOB_LEVELS + 1) * self._M + JOB_LEVELS // 2) // JOB_LEVELS

    # -- job bookkeeping ------------------------------------------------------------------------
    def _utility(self, idx: np.ndarray, work: np.ndarray) -> np.ndarray:
        jb = self._jobs
        return jb.value[idx] * np.power(work, jb.beta[idx])  # f_j(X) = v_j X^β_j (§VI)

    def _admit(self) -> None:
        """Before slot s = t+1: arrivals with a_j <= t join the queue; leavers free their slots."""
        self._live = None  # "job" mode: the live slots of the new slot are computed on first use
        jb, t = self._jobs, self._t
        s = t + 1
        while self._next < self._N and jb.arrival[self._next] <= t:
            self._queue.append(self._next)
            self._next += 1
        gone = (self._slot_deadline < s) | ((self._slot_rem < self._min_price) & (self._slot_job >= 0))
        if gone.any():
            slots = np.flatnonzero(gone)
            self._left[self._slot_job[slots]] = True
            self._slot_job[slots] = -1
            self._slot_rem[slots] = -1.0
            self._slot_deadline[slots] = np.inf
            self._feat[slots] = 0.0
        if self._queue:
            q = [j for j in self._queue if jb.deadline[j] >= s]  # expired while waiting
            for j in self._queue:
                if jb.deadline[j] < s:
                    self._left[j] = True
            free = np.flatnonzero(self._slot_job < 0)
            n = min(free.size, len(q))
            if n:
                sl, j = free[:n], np.asarray(q[:n], dtype=np.int64)
                self._slot_job[sl] = j
                self._slot_rem[sl] = jb.budget[j] - self._spent[j]
                self._slot_deadline[sl] = jb.deadline[j]
                self._feat[sl] = np.stack([j, jb.arrival[j], jb.deadline[j], jb.budget[j], self._spent[j],
                                           jb.value[j], jb.beta[j], self._work[j]], axis=1)
            self._queue = q[n:]

    def _rates(self) -> np.ndarray:
        i = self._t - self._block_start
        if i >= _BLOCK:
            self._rate_block = self._service.block(_BLOCK)
            self._block_start = self._t
            i = 0
        return self._rate_block[i]

    # -- gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._begin_instance(seed, options)  # options["scenario_seed"] or a draw from `instances`
        self._rngs = child_generators(self.np_random, ("service", "unused"))
        self._service = ServiceProcess(self._truth.service, self._truth.speed, self._rngs["service"])
        self._rate_block = self._service.block(_BLOCK)
        self._t = 0
        self._block_start = 0
        N = self._N
        self._spent = np.zeros(N)  # (N,) price units
        self._work = np.zeros(N)  # (N,) X_j
        self._util = np.zeros(N)  # (N,) f_j(X_j)
        self._left = np.zeros(N, dtype=bool)
        self._slot_job = np.full(self._J, -1, dtype=np.int64)  # (J,) job id per window slot
        self._prev_job = np.full(self._M, -1, dtype=np.int64)  # (M,) job each machine ran last slot
        self._prev_slot = np.zeros(self._M, dtype=np.int64)  # (M,) its window slot (0 = idle)
        self._slot_rem = np.full(self._J, -1.0)  # (J,) remaining budget per window slot, -1 = empty
        self._slot_deadline = np.full(self._J, np.inf)  # (J,) d_j per window slot, inf = empty
        self._feat = np.zeros((self._J, len(JOB_FEATURES)))  # (J, 8) observation rows, float64 so that
        # agents read budgets exactly (a float32 remaining budget could be off by 1e-3 and overspend)
        self._queue: list[int] = []
        self._next = 0
        self._migrations = 0
        self._total_util = 0.0
        self._total_spent = 0.0
        self._fit_total = 0.0
        self._admit()
        self._stats.reset(0)
        self._viewer_reset(problem=self.problem, jobs=self._jobs)
        return self._obs(), {"action_mask": self.action_masks(), "t": 0}

    def _obs(self) -> dict:
        obs = {"jobs": self._feat.copy(), "job_mask": (self._slot_job >= 0).astype(np.int8),
               "t": np.array([self._t], dtype=np.float32)}
        for key, value in self._stats.observe(np.array([self._t])).items():
            obs[key] = value[0]
        return obs

    def _live_slots(self) -> tuple[np.ndarray, np.ndarray]:
        """In "job" mode: (remaining budgets (J,), live window slots (0-based)) from the public job rows, as
        ``baselines.approx.Fair`` reads them: occupied, B_j − spent_j >= the cheapest price. Cached per slot."""
        if self._live is None:
            occupied = self._slot_job >= 0
            rem = np.where(occupied, self._feat[:, _F["budget"]] - self._feat[:, _F["spent"]], -1.0)
            self._live = (rem, np.flatnonzero(occupied & (rem >= self._min_price - 1e-9)))
        return self._live

    def _deal(self, action: Any) -> np.ndarray:
        """In "job" mode: the levels (J,) -> the machine action (M,) by the capped water-filling deal."""
        a = action if isinstance(action, np.ndarray) and action.dtype.kind in "iu" and action.shape == (self._J,) \
            else self._as_int_action(action, (self._J,), self._job_desc)
        if a.size and (a.max() > JOB_LEVELS or a.min() < 0):
            raise ValueError(f"action values must be in 0..{JOB_LEVELS}, expected {self._job_desc}")
        rem, live = self._live_slots()  # the kernel works on a copy of rem
        cap = self._level_cap[a]  # (J,) machines each window slot may take
        # dynamics.deal_machines with caps, compiled (the same action, tested)
        return deal_kernel(self._order, self._price, rem, live[cap[live] > 0], cap, np.zeros(self._M, dtype=np.int64))

    def action_masks(self) -> np.ndarray:
        """(M·(J_max+1),) bool: per machine [idle, slot 1, ..., slot J_max] allowed. "job" mode:
        (J_max·(S+1),) bool, per window slot [level 0, ..., level S]: every level for a live job, only
        0 otherwise (its level is ignored)."""
        if self.action_mode == "job":
            m = np.zeros((self._J, JOB_LEVELS + 1), dtype=bool)
            m[:, 0] = True
            m[self._live_slots()[1], 1:] = True
            return m.reshape(-1)
        m = np.empty((self._M, self._J + 1), dtype=bool)
        m[:, 0] = True
        np.less_equal(self._price[:, None], self._slot_rem[None, :] + 1e-9, out=m[:, 1:])
        return m.reshape(-1)

    def _check(self, action: Any) -> tuple[np.ndarray, np.ndarray, int]:
        """Validate and repair; returns (machines kept, their window slot 1..J, number dropped)."""
        if self._rngs is None:
            raise RuntimeError("call reset() before step()")
        a = action if isinstance(action, np.ndarray) and action.dtype.kind in "iu" and action.shape == (self._M,) \
            else self._as_int_action(action, (self._M,), self._space_desc)
        if a.size and (a.max() > self._J or a.min() < 0):
            raise ValueError(f"action values must be in 0..{self._J}, expected {self._space_desc}")
        mach = np.flatnonzero(a)
        slot = a[mach].astype(np.int64)
        dropped = 0
        rem = self._slot_rem  # (J,) remaining budget per window slot, -1 when empty
        empty = rem[slot - 1] < 0
        if empty.any():
            if self.infeasible == "raise":
                i = int(mach[np.argmax(empty)])
                raise ValueError(f"infeasible action: machine {i} is given window slot {int(a[i])}, which holds no job")
            dropped += int(empty.sum())
            mach, slot = mach[~empty], slot[~empty]
        if mach.size:
            cost = self._price[mach]
            per_slot = np.bincount(slot, weights=cost, minlength=self._J + 1)[1:]
            if (per_slot > np.maximum(rem, 0.0) + 1e-9).any():
                ok = budget_prefix(slot, cost, rem)  # eq. 4, Algorithm 1 lines 7-12
                if self.infeasible == "raise":
                    k = int(slot[np.argmin(ok)])
                    need = float(per_slot[k - 1])
                    raise ValueError(f"infeasible action: job {int(self._slot_job[k - 1])} (window slot {k}) would "
                                     f"spend {need:.4g} > remaining budget {rem[k - 1]:.4g} (excess "
                                     f"{need - rem[k - 1]:.4g}, eq. 4)")
                dropped += int((~ok).sum())
                mach, slot = mach[ok], slot[ok]
        return mach, slot, dropped

    def step(self, action: Any):
        if self._episode_over:
            raise self._over()
        if self.action_mode == "job" and self._rngs is not None:
            action = self._deal(action)  # within every budget by construction: nothing to repair
        mach, slot, dropped = self._check(action)
        theta = self._rates()  # (M,) θ_i^t of this slot (hidden)
        jid = self._slot_job[slot - 1]  # (n,) job of each used machine
        work = theta[mach]  # r_j^i(t) = θ_i^t x_j^i(t)
        cost = self._price[mach]
        reward = 0.0
        if mach.size:
            J1 = self._J + 1
            add_all = np.bincount(slot, weights=cost, minlength=J1)[1:]  # (J,) price paid per window slot
            occ = add_all > 0  # window slots served this slot (prices are positive)
            touched = self._slot_job[occ]
            add = add_all[occ]
            self._work[touched] += np.bincount(slot, weights=work, minlength=J1)[1:][occ]  # eq. 1
            self._spent[touched] += add
            rem = self._slot_rem[occ]
            self._slot_rem[occ] = rem - add
            # eq. 8 (violations only): only the jobs served now can change it
            self._fit_total += np.maximum(add - rem, 0.0).sum() - np.maximum(-rem, 0.0).sum()
            new_u = self._utility(touched, self._work[touched])
            reward = float((new_u - self._util[touched]).sum())
            self._util[touched] = new_u
            self._feat[occ, _F["spent"]] = self._spent[touched]
            self._feat[occ, _F["work"]] = self._work[touched]
        spent = float(cost.sum())
        self._total_util += reward
        self._total_spent += spent
        # Migrations (Fig. 3b): machine i ran job j last slot, j is still in the window, i no longer runs j.
        now_slot = np.zeros(self._M, dtype=np.int64)
        now_slot[mach] = slot
        ps = self._prev_slot
        was = ps > 0
        migr = 0
        if was.any():
            pj = self._prev_job
            moved = was & (now_slot != ps)
            if moved.any():
                migr = int((self._slot_job[ps[moved] - 1] == pj[moved]).sum())  # same job still holds that slot
        self._migrations += migr
        self._prev_slot = now_slot
        self._prev_job = np.where(now_slot > 0, self._slot_job[now_slot - 1], -1)
        self._last = (mach, slot, work)
        self._t += 1
        self._admit()
        done = self._N > 0 and self._next >= self._N and not self._queue and not (self._slot_job >= 0).any()
        truncated = self._t >= self.horizon and not done
        metrics = {"utility": self._total_util, "budget_spent": spent, "fit": float(self._fit_total),
                   "migrations": migr, "migration_rate": migr / self._M, "busy": int(mach.size), "repaired": dropped}
        if done or truncated:
            metrics.update(self._episode_summary())
            if self.oracle:
                metrics["episode_bound"] = self.episode_bound()
        job_m = np.full(self._M, -1, dtype=np.int64)  # per-machine feedback (fixed shape (M,))
        job_m[mach] = jid
        work_m = np.zeros(self._M)
        work_m[mach] = work
        cost_m = np.zeros(self._M)
        cost_m[mach] = cost
        if self._viewer is not None:  # the episode viewer's history (picture render modes only)
            self._viewer.record(job_of_machine=job_m, cost=cost_m, utility=reward, busy=int(mach.size),
                                occupied=int((self._slot_job >= 0).sum()))
        feedback = {"executed": now_slot > 0, "slot": now_slot.copy(), "job_id": job_m, "work": work_m, "cost": cost_m}
        self._stats.update(feedback["executed"][None], work_m[None])
        info = {"feedback": feedback,
                "metrics": metrics, "action_mask": self.action_masks(), "t": self._t}
        self._episode_over = bool(done) or bool(truncated)
        return self._obs(), reward, bool(done), bool(truncated), info

    def episode_bound(self) -> float:
        """Upper bound on the expected episode utility (``bound.fluid_bound``: the fluid program
        with the hidden job list and mean rates; see its docstring for exactly what it bounds).
        Depends only on the instance and the horizon, so it is computed once per instance of this env."""
        bounds = self.__dict__.setdefault("_bounds", {})  # scenario seed -> bound
        k = self.scenario_seed
        if k not in bounds:
            from clustergym.envs.approxjobs.oracle import fluid_bound

            bounds[k] = float(fluid_bound(self.scenario, self.horizon))
        return bounds[k]

    def _fit(self) -> float:
        return float(np.maximum(self._spent - self._jobs.budget, 0.0).sum())  # eq. 8, violations only

    def job_records(self) -> dict[str, np.ndarray]:
        """Per-job arrays for every job that has arrived so far (Fig. 1 CDFs)."""
        n = self._next
        jb = self._jobs
        return {"budget": np.asarray(jb.budget[:n]), "spent": self._spent[:n].copy(), "work": self._work[:n].copy(),
                "utility": self._util[:n].copy(), "left": self._left[:n].copy(),
                "arrival": np.asarray(jb.arrival[:n]), "deadline": np.asarray(jb.deadline[:n])}

    def _episode_summary(self) -> dict:
        r = self.job_records()
        served = r["utility"] > 0
        ctu = r["spent"][served] / r["utility"][served]
        used = r["spent"] / r["budget"]
        return {"episode_utility": float(r["utility"].sum()), "episode_budget_spent": float(r["spent"].sum()),
                "episode_fit": self._fit(), "episode_jobs": int(r["budget"].size),
                "episode_jobs_served": int(served.sum()),
                "episode_cost_to_utility_median": float(np.median(ctu)) if ctu.size else 0.0,
                "episode_budget_used_median": float(np.median(used)) if used.size else 0.0,
                "episode_budget_used_mean": float(np.mean(used)) if used.size else 0.0,
                "episode_migrations": float(self._migrations)}

    # -- rendering ------------------------------------------------------------------------------
    def _render_ansi(self) -> str:
        from clustergym.envs.approxjobs.render import render_ansi

        last = getattr(self, "_last", (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)))
        return render_ansi(self.problem, self._t, self._slot_job, self._jobs, self._spent, self._work, last)

    def _make_viewer(self):
        from clustergym.envs.approxjobs.render import ApproxViewer

        return ApproxViewer(self.render_mode, self.horizon, self.metadata["render_fps"])
