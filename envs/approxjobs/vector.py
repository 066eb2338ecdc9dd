"""Native vector env for P4, ApproxJobs-v0 (OPM paper, opm.md §III): N envs stepped as arrays."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from gymnasium.vector.utils import batch_space

from clustergym.core.scenario import Scenario
from clustergym.envs.approxjobs.dynamics import RATE_BLOCK, SlotState, infeasible_message
from clustergym.envs.approxjobs.env import ApproxJobsEnv, episode_summary, job_records
from clustergym.envs.approxjobs.service import ServiceProcess
from clustergym.envs.approxjobs.oracle import fluid_bound
from clustergym.envs.approxjobs.types import ApproxObservation
from clustergym.core.vector_env import ClusterVectorEnv, VectorStepReturn, with_masks

__all__ = ["ApproxJobsVectorEnv"]


class ApproxJobsVectorEnv(ClusterVectorEnv[ApproxObservation, np.ndarray]):
    """N independent copies of :class:`ApproxJobsEnv` (same scenario), stepped as arrays.

    ## Description
    The model, rewards and infeasibility rules are those of the single env (opm.md §III, see
    :class:`~clustergym.envs.approxjobs.env.ApproxJobsEnv`), computed by the same code: the single env's
    slot step is ``approxjobs.dynamics.SlotState`` with N = 1, and this env's is the same class with N
    sub-envs, so one call of the compiled ``dynamics.slot_step_batch`` plays every sub-env's slot ("job"
    mode's deal, the budget check and repair of eq. 4, eqs. 1–2, the statistics of ``learner_stats.py``, the
    window and queue). Each sub-env draws its hidden rates from its own ``service.ServiceProcess``, a block
    of 256 slots at a time. Sub-env i seeded with s_i gives exactly the trajectory of a single env with
    ``reset(seed=s_i)`` (``clustergym.core.vector_env``). Create it with ``gym.make_vec(
    "clustergym/ApproxJobs-v0", num_envs=N, vectorization_mode="vector_entry_point", **kwargs)``.

    ## Action Space
    The single env's with a leading N axis (``single_action_space`` = the single env's): ``action_mode=
    "job"`` (what ``clustergym train`` uses) ``MultiDiscrete`` (N, J_max) levels 0..S per window slot;
    ``"machine"`` (N, M) window slots 0..J_max per machine. ``info["action_mask"]`` and ``action_masks()``
    are the single env's flat masks, (N, J_max·(S+1)) or (N, M·(J_max+1)).

    ## Observation Space
    The single env's keys with a leading N axis (``single_observation_space`` = the single env's), same values:
    | key                                    | shape        | dtype   | meaning                          |
    |----------------------------------------|--------------|---------|----------------------------------|
    | jobs                                   | (N, J_max, 8) | float64 | the job rows of every window slot |
    | job_mask, last_executed                | (N, J_max), (N, M) | int8 | as the single env            |
    | t                                      | (N, 1)       | float32 | slots elapsed in each episode    |
    | machine_rate, machine_share, last_work | (N, M)       | float32 | as the single env                |
    ``clustergym.learning.pipeline.flatten_batch`` flattens a batch to (N, flatdim), row i equal to
    ``gymnasium.spaces.flatten`` of sub-env i's observation.

    ## Rewards
    (N,) float64: Σ_j f_j(X_j(t)) − f_j(X_j(t−1)) per sub-env (0 for a sub-env being autoreset).

    ## Infeasible actions
    As the single env, per row: ``"repair"`` drops tasks for empty window slots and each job keeps the
    affordable prefix of its tasks (``"job"`` mode's deal is within every budget); ``"raise"``: ValueError
    naming the sub-env, then the constraint. Shape other than the batch's, values outside the space, NaN:
    ValueError naming the first offending sub-env. A rejected step changes no state.

    ## Info
    Arrays with a leading N axis, each with a ``_key`` mask (Gymnasium's vector layout): ``action_mask``,
    ``t`` (N,) int64; ``feedback`` (per machine, (N, M)): ``executed`` bool, ``slot`` and ``job_id`` int64,
    ``work`` and ``cost`` float64; ``metrics``: the single env's per-slot metrics (``utility``,
    ``budget_spent``, ``fit``, ``migration_rate`` (N,) float64, ``migrations``, ``busy``, ``repaired`` (N,)
    int64) and, for the sub-envs whose episode ends at this step only (mask True there), its ``episode_*``
    summaries (with ``oracle=True`` ``episode_bound``, the fluid bound of the sub-env's instance, computed
    once per instance). ``feedback``/``metrics`` are absent (mask False) for sub-envs being autoreset.
    ``job_records(i)`` gives sub-env i's per-job arrays.

    ## Starting State / Episode End
    Each sub-env truncates after ``horizon`` slots, terminates when every job of its instance has left, and
    autoresets at the next step (``AutoresetMode.NEXT_STEP``); randomness as in ``clustergym.core.vector_env``.

    ## Arguments
    ``num_envs`` (N, default 1) and the single env's arguments: ``scenario``, ``scenario_seed``, ``horizon``,
    ``oracle`` (default False), ``infeasible``, ``instances``, ``action_mode`` (``"machine"`` or ``"job"``),
    scenario parameters. ``render_mode`` must be None.

    ## Instances
    Each sub-env runs its own instance (``scenario_seeds``, (N,); ``problems[i]``; ``problem`` and
    ``scenario`` are sub-env 0's). ``reset(options={"scenario_seed": k})`` switches the sub-envs it resets
    (all, or those of ``reset_mask``) to instance k; with ``instances``, every sub-env reset (autoresets
    included) draws one from its own generator, derived from the sub-env's seed as the single env derives
    it, so sub-env i seeded with s_i replays the single env built with the same kwargs and reset with
    ``seed=s_i``. P4's spaces do not vary by instance (no padding kwargs); instances differ in their job
    lists, whose per-job arrays grow (doubling) to the longest list seen.

    ## Version History
    * v0: initial version.
    """

    family = "approxjobs"
    metrics_spec = ApproxJobsEnv.metrics_spec  # the single env's declaration (clustergym/core/metrics.py)
    _rng_names = ("service", "unused")  # the single env's child generators

    def __init__(self, num_envs: int = 1, scenario: str | Scenario = "paper", *, scenario_seed: int = 0,
                 horizon: int | None = None, oracle: bool = False, infeasible: str = "repair",
                 render_mode: str | None = None, instances: Any = None, action_mode: str = "machine", **params: Any):
        # The single env builds and validates the scenario, the spaces and the default horizon; it words the errors.
        s = ApproxJobsEnv(scenario, scenario_seed=scenario_seed, horizon=horizon, oracle=False, infeasible=infeasible,
                          instances=instances, action_mode=action_mode, **params)
        super().__init__(num_envs, horizon=s.horizon, infeasible=infeasible, oracle=oracle, render_mode=render_mode)
        self._single = s
        self._source = s.instance_source
        self.action_mode = s.action_mode
        self._job_mode = s.action_mode == "job"
        pb = s.problem
        N, self._M, self._J = self.num_envs, pb.num_machines, pb.max_jobs
        self.single_action_space = s.action_space
        self.single_observation_space = s.observation_space
        self.action_space = batch_space(self.single_action_space, N)
        self.observation_space = batch_space(self.single_observation_space, N)
        self._width = s.action_space.shape[0]  # type: ignore[index]  # J (levels) or M (machine action)
        self._high = int(s.action_space.nvec[0]) - 1  # type: ignore[attr-defined]  # a MultiDiscrete
        self._desc = s.space_desc
        k0 = s.scenario_seed if s.scenario_seed is not None else 0
        self._by_instance: dict = {k0: (s.scenario, s.problem)}  # scenario seed -> (scenario, problem), checked
        self._bounds: dict = {}  # scenario seed -> episode_bound (oracle=True)
        self._instance[:] = k0
        self._state = SlotState(N, self._M, self._J, cap=len(s.scenario.truth.jobs))  # every sub-env (dynamics.py)
        self.problems: list = [None] * N  # public problem of each sub-env
        self._scenarios: list = [None] * N
        for i in range(N):
            self._set_instance(i, k0)
        self._services: list[ServiceProcess | None] = [None] * N  # each sub-env's rate process
        self._total_util = np.zeros(N)  # (N,) Σ_j f_j(X_j) so far
        self._fit_total = np.zeros(N)  # (N,) Σ_j max(0, spent_j − B_j) so far
        self._migrations = np.zeros(N, dtype=np.int64)  # (N,) Σ_t migrations

    # -- instances ----------------------------------------------------------------------------
    def _set_instance(self, i: int, k: int) -> None:
        sc, pb = self._by_instance[k]
        self._scenarios[i], self.problems[i] = sc, pb
        self._state.load(i, pb, sc.truth.jobs)

    def _use_instance(self, i: int, sc: Scenario, k: int) -> None:
        if k not in self._by_instance:
            self._single.check_instance(sc, k)
            self._by_instance[k] = (sc, dataclasses.replace(sc.problem, action_mode=self.action_mode))
        self._set_instance(i, k)

    # -- per sub-env episode state ------------------------------------------------------------
    def _start_episode(self, i: int) -> None:
        truth = self._scenarios[i].truth
        self._services[i] = svc = ServiceProcess(truth.service, truth.speed, self._rngs[i]["service"])
        self._state.start(i, svc.block(RATE_BLOCK))  # the first jobs enter the window (dynamics.admit)
        self._total_util[i] = 0.0
        self._fit_total[i] = 0.0
        self._migrations[i] = 0

    def _observations(self) -> ApproxObservation:
        st = self._state
        obs = {"jobs": st.feat.copy(), "job_mask": st.job_mask(), "t": self._t.astype(np.float32)[:, None]}
        obs.update(st.stats.observe(self._t))
        return cast(ApproxObservation, obs)

    def _reset_info(self, mask: np.ndarray) -> dict:
        return with_masks({"action_mask": self.action_masks(), "t": self._t.copy()}, mask)

    def action_masks(self) -> np.ndarray:
        """(N, J_max·(S+1)) ("job" mode) or (N, M·(J_max+1)) bool: every sub-env's flat mask (the single env's)."""
        return self._state.action_masks(self._job_mode)

    def job_records(self, i: int) -> dict[str, np.ndarray]:
        """Sub-env i's per-job arrays for every job that has arrived so far (the single env's ``job_records()``)."""
        return job_records(self._scenarios[i].truth.jobs, int(self._state.ctr[i, 0]), *self._per_job(i))

    def _per_job(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        st, n = self._state, len(self._scenarios[i].truth.jobs)
        return st.spent[i, :n], st.work[i, :n], st.util[i, :n], st.left[i, :n]

    # -- stepping ----------------------------------------------------------------------------
    def _check_form(self, actions: Any) -> np.ndarray:
        """(N, width) int64 actions in 0..high (bool kept); ValueError naming the first bad sub-env."""
        return self._integer_actions(actions, self._width, self._high, self._desc)

    def step(self, actions: npt.ArrayLike) -> VectorStepReturn[ApproxObservation]:
        self._require_reset()
        a = self._check_form(actions)
        N, st = self.num_envs, self._state
        stepping = ~self._autoreset  # (N,) sub-envs that step (the others reset now)
        for i in np.flatnonzero(stepping & (st.pos >= RATE_BLOCK)):  # the next block of θ (every 256 slots)
            st.blocks[i] = self._services[i].block(RATE_BLOCK)  # type: ignore[union-attr]  # set by reset
            st.pos[i] = 0
        r = st.step(a, self._t, stepping, self._job_mode, self.infeasible == "repair")
        if not r.ok:
            i = int(np.argmax(r.status != 0))  # type: ignore[assignment]  # an int here
            raise ValueError(f"sub-env {i}: " + infeasible_message(int(r.status[i]), int(r.where[i]), r.slot[i],
                                                                   st.slot_rem[i], st.slot_job[i], st.price[i]))
        # The state changed from here on.
        st.pos += stepping
        self._t += stepping
        self._total_util += r.reward
        self._fit_total += r.fit
        self._migrations += r.migrations
        terminated = r.done.copy()
        truncated = stepping & (self._t >= self.horizon) & ~terminated
        ended = terminated | truncated
        metrics = {"utility": self._total_util.copy(), "budget_spent": r.paid, "fit": self._fit_total.copy(),
                   "migrations": r.migrations, "migration_rate": r.migrations / self._M, "busy": r.busy,
                   "repaired": r.dropped}
        episode = self._episode_metrics(ended) if ended.any() else {}
        self._autoreset_envs()  # NEXT_STEP: sub-envs that ended at the last step start over now
        self._autoreset = ended
        info = with_masks({"action_mask": self.action_masks(), "t": self._t.copy()}, np.ones(N, dtype=bool))
        feedback = {"executed": r.slot > 0, "slot": r.slot, "job_id": r.job_id, "work": r.work, "cost": r.cost}
        info.update(with_masks({"feedback": feedback, "metrics": metrics}, stepping))
        info["metrics"].update(episode)
        return self._observations(), r.reward, terminated, truncated, info

    def _episode_metrics(self, ended: np.ndarray) -> dict:
        """The single env's ``episode_*`` metrics (and ``episode_bound`` with the oracle) of the sub-envs whose
        episode ends now, as (N,) arrays with their masks (a Python loop over those sub-envs only)."""
        rows: dict[str, np.ndarray] = {}
        for i in np.flatnonzero(ended):
            jobs = self._scenarios[i].truth.jobs
            m = episode_summary(jobs, int(self._state.ctr[i, 0]), *self._per_job(int(i)), int(self._migrations[i]))
            if self.oracle:
                m["episode_bound"] = self._bound(int(i))
            for key, v in m.items():
                rows.setdefault(key, np.zeros(self.num_envs, dtype=type(v)))[i] = v
        return with_masks(rows, ended)

    def _bound(self, i: int) -> float:
        """``episode_bound`` of sub-env i's instance (``oracle.fluid_bound``, once per instance)."""
        k = int(self._instance[i])
        if k not in self._bounds:
            self._bounds[k] = float(fluid_bound(self._scenarios[i], self.horizon))
        return self._bounds[k]
