"""P4 environment: ApproxJobs-v0 (OPM paper, opm.md §III and §VI)."""

from __future__ import annotations

import dataclasses
import functools

from typing import Any, cast

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from clustergym.core.scenario import Scenario, check_choice, child_generators
from clustergym.core.env import ClusterEnv, InstanceSource, StepReturn
from clustergym.core.metrics import CUMULATIVE, EPISODE, SLOT, Metric
from clustergym.envs.approxjobs.dynamics import (JOB_FEATURES, JOB_LEVELS, RATE_BLOCK, SlotState,
                                                 infeasible_message)
from clustergym.envs.approxjobs.learner_stats import learner_spaces
from clustergym.envs.approxjobs.scenario import APPROX_SCENARIOS, PAPER_DEFAULTS, SCALES, make_approx_scenario
from clustergym.envs.approxjobs.service import ServiceProcess
from clustergym.envs.approxjobs.oracle import fluid_bound
from clustergym.envs.approxjobs.types import ApproxFeedback, ApproxObservation

__all__ = ["ApproxJobsEnv", "episode_summary", "job_records"]


class ApproxJobsEnv(ClusterEnv[ApproxObservation, np.ndarray]):
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
    ``approxjobs/learner_stats.py``, shared with the PettingZoo env; 0 at t = 0). The prices p_i stay in
    ``problem.price`` (an instance fingerprint in the observation: see ``approxjobs/learner_stats.py``).
    ``gymnasium.wrappers.FlattenObservation`` (or ``clustergym.learning.wrappers.FlattenWithStats``) gives the flat
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

    ## Vector env
    ``gym.make_vec("clustergym/ApproxJobs-v0", num_envs=N, vectorization_mode="vector_entry_point", **kwargs)``
    builds :class:`~clustergym.envs.approxjobs.vector.ApproxJobsVectorEnv`: N sub-envs stepped by this env's
    own slot step (``dynamics.SlotState`` with N rows, one compiled call per step), in both action modes;
    sub-env i seeded s_i replays this env reset with ``seed=s_i``. ``clustergym train`` steps its training
    envs with it.

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
    ``clustergym.evaluate`` turn it on whenever they compute a score, unless ``oracle`` is given), ``infeasible``, ``render_mode``, and
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
    * v0, later: the slot runs in one compiled step (``dynamics.SlotState``) shared with the native vector
      env; the same trajectories, except that f_j(X) = v_j X^β_j now comes from the C library's ``pow``
      where numpy's vectorised ``np.power`` gave it before (they differ in the last bit for some X), so
      rewards and utilities may differ from earlier versions in the last bits.
    """

    family = "approxjobs"
    _last: tuple[np.ndarray, np.ndarray] | None  # (window slot, work) per machine of the last slot, None at t = 0
    # info["metrics"] keys and their kind (clustergym/core/metrics.py).
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
                scale = params.get("scale")
                preset = {**PAPER_DEFAULTS, **(SCALES.get(scale, {}) if isinstance(scale, str) else {})}
                horizon = cast(int, preset["horizon"])
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
        if getattr(self, "_state", None) is None:  # every instance has the same M and J (the spaces are checked)
            self._state = SlotState(1, self._M, self._J, cap=self._N)
        self._state.load(0, pb, self._jobs)  # the slot step's arrays (dynamics.py), N = 1
        self._space_desc = f"MultiDiscrete([{self._J + 1}] * {self._M}) (0 = idle, k = window slot k)"
        self._job_desc = f"MultiDiscrete([{JOB_LEVELS + 1}] * {self._J}) (level 0..{JOB_LEVELS} per window slot)"

    @property
    def space_desc(self) -> str:
        """The action space of the action mode in words (the error messages say it)."""
        return self._job_desc if self.action_mode == "job" else self._space_desc

    # The episode's state: row 0 of the slot step's arrays (views; dynamics.SlotState).
    @property
    def _slot_job(self) -> np.ndarray:
        return self._state.slot_job[0]  # (J,) job id per window slot, -1 = empty

    @property
    def _slot_rem(self) -> np.ndarray:
        return self._state.slot_rem[0]  # (J,) remaining budget per window slot, -1 = empty

    @property
    def _feat(self) -> np.ndarray:
        return self._state.feat[0]  # (J, 8) observation rows

    @property
    def _next(self) -> int:
        return int(self._state.ctr[0, 0])  # jobs arrived so far

    def _per_job(self, name: str) -> np.ndarray:
        return getattr(self._state, name)[0, :self._N]  # (N,) spent, work, util or left

    # -- gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[ApproxObservation, dict[str, Any]]:
        super().reset(seed=seed)
        self._begin_instance(seed, options)  # options["scenario_seed"] or a draw from `instances`
        self._rngs = child_generators(self.np_random, ("service", "unused"))
        self._service = ServiceProcess(self._truth.service, self._truth.speed, self._rngs["service"])
        self._t = 0
        self._state.start(0, self._service.block(RATE_BLOCK))  # the first jobs enter the window (dynamics.admit)
        self._migrations = 0
        self._total_util = 0.0
        self._fit_total = 0.0
        self._last = None
        self._viewer_reset(problem=self.problem, jobs=self._jobs)
        return self._obs(), {"action_mask": self.action_masks(), "t": 0}

    def _rates(self) -> np.ndarray:
        """(M,) θ_i^t of the slot about to run (hidden), drawing the next block when the current one is used up."""
        st = self._state
        if st.pos[0] >= RATE_BLOCK:
            st.blocks[0] = self._service.block(RATE_BLOCK)
            st.pos[0] = 0
        return st.blocks[0, st.pos[0]]

    def _obs(self) -> ApproxObservation:
        st = self._state
        obs = {"jobs": st.feat[0].copy(), "job_mask": st.job_mask()[0], "t": np.array([self._t], dtype=np.float32)}
        for key, value in st.stats.observe(np.array([self._t])).items():
            obs[key] = value[0]
        return cast(ApproxObservation, obs)

    def action_masks(self) -> np.ndarray:
        """(M·(J_max+1),) bool: per machine [idle, slot 1, ..., slot J_max] allowed. "job" mode:
        (J_max·(S+1),) bool, per window slot [level 0, ..., level S]: every level for a live job, only
        0 otherwise (its level is ignored)."""
        return self._state.action_masks(self.action_mode == "job")[0]

    def _action(self, action: Any) -> np.ndarray:
        """The (1, J) levels ("job" mode) or (1, M) machine action as int64; ValueError on shape, NaN, range."""
        if self.action_mode == "job":
            width, hi, desc = self._J, JOB_LEVELS, self._job_desc
        else:
            width, hi, desc = self._M, self._J, self._space_desc
        a = action if isinstance(action, np.ndarray) and action.dtype.kind in "iu" and action.shape == (width,) \
            else self._as_int_action(action, (width,), desc)
        if a.size and (a.max() > hi or a.min() < 0):
            raise ValueError(f"action values must be in 0..{hi}, expected {desc}")
        return np.ascontiguousarray(a, dtype=np.int64)[None, :]  # one compiled signature for every input

    def step(self, action: npt.ArrayLike) -> StepReturn[ApproxObservation]:
        if self._episode_over:
            raise self._over()
        if self._rngs is None:
            raise RuntimeError("call reset() before step()")
        a = self._action(action)
        st = self._state
        self._rates()  # the slot reads θ from the current block
        # The slot (dynamics.slot_step_batch, N = 1): "job" mode's deal (within every budget by construction:
        # nothing to repair), the check and repair of eq. 4, eqs. 1–2, the statistics and the next window.
        r = st.step(a, np.array([self._t]), _STEPPING, self.action_mode == "job", self.infeasible == "repair")
        if not r.ok:
            raise ValueError(infeasible_message(int(r.status[0]), int(r.where[0]), r.slot[0], st.slot_rem[0],
                                                st.slot_job[0], st.price[0]))
        st.pos[0] += 1
        reward = float(r.reward[0])
        migr = int(r.migrations[0])
        busy = int(r.busy[0])
        self._total_util += reward
        self._fit_total += r.fit[0]
        self._migrations += migr
        now_slot, job_m, work_m, cost_m = r.slot[0], r.job_id[0], r.work[0], r.cost[0]
        self._last = (now_slot, work_m)
        self._t += 1
        done = bool(r.done[0])
        truncated = self._t >= self.horizon and not done
        metrics = {"utility": self._total_util, "budget_spent": float(r.paid[0]), "fit": float(self._fit_total),
                   "migrations": migr, "migration_rate": migr / self._M, "busy": busy, "repaired": int(r.dropped[0])}
        if done or truncated:
            metrics.update(self._episode_summary())
            if self.oracle:
                metrics["episode_bound"] = self.episode_bound()
        if self._viewer is not None:  # the episode viewer's history (picture render modes only)
            self._viewer.record(job_of_machine=job_m, cost=cost_m, utility=reward, busy=busy,
                                occupied=int((self._slot_job >= 0).sum()))
        feedback: ApproxFeedback = {"executed": now_slot > 0, "slot": now_slot, "job_id": job_m, "work": work_m,
                                    "cost": cost_m}
        info = {"feedback": feedback,
                "metrics": metrics, "action_mask": self.action_masks(), "t": self._t}
        self._episode_over = done or bool(truncated)
        return self._obs(), reward, done, bool(truncated), info

    def episode_bound(self) -> float:
        """Upper bound on the expected episode utility (``bound.fluid_bound``: the fluid program
        with the hidden job list and mean rates; see its docstring for exactly what it bounds).
        Depends only on the instance and the horizon, so it is computed once per instance of this env."""
        bounds = self.__dict__.setdefault("_bounds", {})  # scenario seed -> bound
        k = self.scenario_seed
        if k not in bounds:
            bounds[k] = float(fluid_bound(self.scenario, self.horizon))
        return bounds[k]

    def job_records(self) -> dict[str, np.ndarray]:
        """Per-job arrays for every job that has arrived so far (Fig. 1 CDFs)."""
        return job_records(self._jobs, self._next, *(self._per_job(k) for k in ("spent", "work", "util", "left")))

    def _episode_summary(self) -> dict:
        return episode_summary(self._jobs, self._next, self._per_job("spent"), self._per_job("work"),
                               self._per_job("util"), self._per_job("left"), self._migrations)

    # -- rendering ------------------------------------------------------------------------------
    def _render_ansi(self) -> str:
        from clustergym.envs.approxjobs.render import render_ansi

        slot, work = getattr(self, "_last", None) or (np.zeros(0, np.int64), np.zeros(0))
        mach = np.flatnonzero(slot)  # the machines that ran last slot, their window slots and work
        return render_ansi(self.problem, self._t, self._slot_job, self._jobs, self._per_job("spent"),
                           self._per_job("work"), (mach, slot[mach], work[mach]))

    def _make_viewer(self):
        from clustergym.envs.approxjobs.render import ApproxViewer

        return ApproxViewer(self.render_mode, self.horizon, self.metadata["render_fps"])


_STEPPING = np.ones(1, dtype=bool)  # the single env steps its one row


def job_records(jobs, n: int, spent: np.ndarray, work: np.ndarray, util: np.ndarray,
                left: np.ndarray) -> dict[str, np.ndarray]:
    """Per-job arrays of the first ``n`` jobs of ``jobs`` (``scenario.JobList``) from the per-job state
    (spent, work, util, left: (len(jobs),) each); the single and the vector env both report them."""
    return {"budget": np.asarray(jobs.budget[:n]), "spent": spent[:n].copy(), "work": work[:n].copy(),
            "utility": util[:n].copy(), "left": left[:n].copy(),
            "arrival": np.asarray(jobs.arrival[:n]), "deadline": np.asarray(jobs.deadline[:n])}


def episode_summary(jobs, n: int, spent: np.ndarray, work: np.ndarray, util: np.ndarray, left: np.ndarray,
                    migrations: int) -> dict:
    """The ``episode_*`` metrics of an episode whose first ``n`` jobs have arrived (per-job state as
    :func:`job_records`; ``migrations`` Σ_t of the slot counts)."""
    r = job_records(jobs, n, spent, work, util, left)
    served = r["utility"] > 0
    ctu = r["spent"][served] / r["utility"][served]
    used = r["spent"] / r["budget"]
    fit = float(np.maximum(spent - jobs.budget, 0.0).sum())  # eq. 8, violations only
    return {"episode_utility": float(r["utility"].sum()), "episode_budget_spent": float(r["spent"].sum()),
            "episode_fit": fit, "episode_jobs": int(r["budget"].size),
            "episode_jobs_served": int(served.sum()),
            "episode_cost_to_utility_median": float(np.median(ctu)) if ctu.size else 0.0,
            "episode_budget_used_median": float(np.median(used)) if used.size else 0.0,
            "episode_budget_used_mean": float(np.mean(used)) if used.size else 0.0,
            "episode_migrations": float(migrations)}
