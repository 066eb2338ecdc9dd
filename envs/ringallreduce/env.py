"""P3 environment: RingAllReduce-v0 (GADGET paper, gadget.md §IV–VI)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from clustergym.core.scenario import Scenario, check_choice, check_int, check_real
from clustergym.core.env import ClusterEnv, InstanceSource, StepReturn, check_maxima
from clustergym.core.metrics import SLOT, Metric
from clustergym.envs.ringallreduce.dynamics import (BLOCK, JOB_FIELDS, PLACE_EMPTY_ROW, PLACE_OVER_CAP, PLACE_OVER_GPUS,
                                                    PLACE_OVER_LINK, SIZE_OK, arrival_block, check_placement,
                                                    job_generators, settle, size_infeasible_message, size_slot_batch)
from clustergym.envs.ringallreduce.scenario import RING_SCENARIOS, make_ring_scenario, sigmoid_utility
from clustergym.envs.ringallreduce.topology import ring_stats
from clustergym.envs.ringallreduce.types import RingFeedback, RingObservation

__all__ = ["RingAllReduceEnv", "JOB_FEATURES", "instance_sizes"]


def instance_sizes(problem) -> dict[str, int]:
    """The natural sizes of a P3 instance, keyed by the padding kwarg that bounds them (``FamilySpec.sizes``).
    The number of servers is a scenario parameter (the same for every instance of a scenario); the racks
    are drawn per instance (§VI.1: 2..5)."""
    return {"max_racks": int(problem.topology.num_racks)}

_BLOCK = BLOCK  # slots of arrivals drawn at once (same jobs as drawing slot by slot)
JOB_FEATURES = ("workers_cap", "remaining", "attained", "zeta", "bw", "lambda1", "lambda2", "lambda3", "age",
                "last_workers")
# columns of the active-job matrix (float64; integer-valued where the name says so)
_FIELDS = JOB_FIELDS
_C = {k: i for i, k in enumerate(_FIELDS)}
_INT = ("id", "arrival", "workers", "budget", "z", "last")


class RingAllReduceEnv(ClusterEnv[RingObservation, np.ndarray]):
    r"""Online scheduling of ring-all-reduce DDL jobs on a fat-tree GPU cluster.

    ## Description
    The GADGET paper's model (gadget.md §IV, specialised as in §VI). S servers with C_s GPUs sit in
    racks of a two-level fat tree (server–ToR and ToR–core links, full duplex, bandwidth per
    direction; see ``topology``). DDL jobs arrive online; job i has at most N_i concurrent workers
    (eq. 2), a worker-slot budget (eqs. 3/11; see ``scenario`` for the reading of F_i), per-worker
    speed ζ_i (iterations per worker-slot), ring bandwidth b_i and the sigmoid utility of §VI,
    μ_i(x) = λ1 / (1 + exp(−λ2 (x − λ3))) of x = ζ_i z (iterations). Every slot the scheduler sets
    y_is, the workers of job i on server s: Σ_s y_is ≤ N_i (eq. 2), Σ_s y_is ≤ budget_i − z_i
    (eq. 11), Σ_i y_is ≤ C_s (eq. 4), and the workers of a job on several servers form a ring
    (eq. 9) whose hops fit the bandwidth of every link they cross (eq. 19, per link; eq. 8
    bounds each path by its bottleneck link and does not add up jobs sharing a link): with the
    cheapest (rack-grouped) ring, b_i each way on every used server uplink, and b_i each way on every used rack uplink when
    the job spans racks (``topology`` proves this is exact). Jobs are preemptive: a job may get no
    workers in a slot. A job is active from its arrival until its budget is used up
    (Alg. 1 line 3: I[t]).

    ## Action Space
    ``action_mode="placement"`` (default; what GADGET outputs): ``MultiDiscrete(J_max·S)``, the
    flattened (J_max, S) matrix y (row j = j-th visible job); entry (j, s) ranges over
    0..min(workers_max, C_s). A (J_max, S) array is accepted too.
    ``action_mode="ring_size"``: ``MultiDiscrete(J_max)`` with values 0..workers_max, the number
    of workers per visible job; the env places them with the greedy ring placement of the paper's
    baselines (``placement``), visible jobs in window order (oldest first).
    ``info["action_mask"]`` has the action's shape and marks the entries of visible jobs;
    ``action_masks()`` gives the per-value mask sb3-contrib's MaskablePPO expects.

    ## Observation Space
    | key      | space                        | meaning                                            |
    |----------|------------------------------|----------------------------------------------------|
    | jobs     | Box(0, inf, (J_max, 10))     | per visible job: ``JOB_FEATURES`` (0 if absent)      |
    | job_mask | MultiBinary(J_max)           | 1 where a visible job sits                          |
    | servers  | Box(0, inf, (S, 3))          | C_s, rack, GPUs used last slot                      |
    | links    | Box(0, inf, (S+R, 4))        | capacity up/down, load up/down last slot (Gbps)     |
    | t        | Box(0, T, (1,))              | slots elapsed                                       |
    | link_present | MultiBinary(S+R_max)     | padded only: 1 for the instance's S + R links       |

    The visible window holds the J_max oldest active jobs (arrival order); later ones wait.
    The number of racks R (§VI.1: 2..5) and the GPUs per server C_s vary by instance
    (``scenario_seed``); S and J_max do not. With ``max_racks=R_max`` (padding) ``links`` has
    S + R_max rows (zeros beyond the instance's S + R, marked by ``link_present``) and the
    placement action's entries all range over 0..workers_max (a value above C_s is an eq. 4
    violation, repaired or raised as any other, instead of a value outside the space): the spaces
    then depend on S, J_max, R_max and workers_max alone. There are no padded action entries.

    ## Instances
    ``reset(seed=s, options={"scenario_seed": k})`` switches to instance k: the episode equals that
    of ``gym.make(..., scenario_seed=k)`` (same other kwargs) reset with ``seed=s``; ``problem`` and
    ``scenario`` are then instance k's. ``instances=range(...)`` draws an instance at each reset
    without that option, from a generator derived from the reset seed (never from ``np_random``).
    An instance that does not fit the spaces is a ValueError naming ``max_racks``; other option
    keys are a ValueError.
    ``info["window"]`` carries the same attributes as exact float64 arrays (public: a scheduler
    knows a job's parameters once it is submitted).

    ## Rewards
    $\sum_i \mu_i(\zeta_i z_{i,t}) - \mu_i(\zeta_i z_{i,t-1})$: the utility increment of the slot. Summed over
    the episode it telescopes to the DDLJS objective minus the constant $\sum_i \mu_i(0)$.

    ## Infeasible actions
    Values outside the space, wrong shape or NaN: always ValueError. Otherwise, with
    ``infeasible="raise"`` a ValueError names the first violated constraint and its excess
    (eq. 6: workers for an empty window row; eq. 2: more than N_i; eq. 11: more than the budget
    left; eq. 4: a server over its GPUs; eq. 19: a link direction over its bandwidth; in
    ``ring_size`` mode also "no feasible ring placement"). With ``"repair"`` (default), in this
    order: rows of empty window entries are zeroed; a job over min(N_i, budget left) keeps its
    workers on the lowest-index servers; a server over C_s keeps the workers of the earliest
    window rows; then jobs are admitted in window order and a multi-server job whose ring does not
    fit the bandwidth left is dropped entirely. In ``ring_size`` mode the requested size is capped
    at min(N_i, budget left) and a job that the greedy placement cannot place gets no workers.
    ``info["metrics"]["repaired"]`` counts the jobs whose allocation was changed.

    ## Info
    ``feedback``: ``allocation`` (J_max, S) executed y, ``workers`` (J_max,), ``job_ids`` (J_max,)
    (−1 where empty), ``gain`` (J_max,) utility increments, ``rings`` (J_max, S) the servers of
    each job's ring in ring order (``topology.ring_order``), padded with −1. ``metrics`` (evaluation only): ``utility``, ``embedded_ratio``
    (embedded / active jobs, 1 when none is active; Figs. 5–6), ``active_jobs``,
    ``embedded_jobs``, ``waiting_jobs`` (active beyond the window), ``gpu_util``, ``link_util``
    (mean over link directions of load / capacity), ``repaired``; with ``oracle=True`` also
    ``oracle_reward`` (exact optimum of problem (10) over the visible jobs by MILP, HiGHS) and
    ``regret`` = oracle_reward − utility.

    ## Starting State / Episode End
    An instance (``scenario_seed``) is a cluster and a workload: it draws the topology and the seed of
    its job stream, and every episode starts that stream anew (separate generators for the Poisson
    arrival counts and the job attributes, ``dynamics.job_generators``). Every agent therefore meets
    the same jobs on the same instance, and two instances differ in their jobs even at loads where the
    topology does not bind. Given the jobs the model (§IV) has no run-time randomness, so the reset
    seed does not change the episode; it seeds ``np_random`` (the draw of an instance from
    ``instances``) and, through the runner, randomised agents. Truncated after ``horizon`` slots;
    ``step`` then raises ``ResetNeeded`` (a ``RuntimeError``) until ``reset``.

    ## Arguments
    ``scenario`` ("paper", "philly", "tiresias-60", "toy", "gpu-short" or a Scenario), ``scenario_seed``
    (the instance: topology and job stream; default 0), ``horizon`` (default 200, §VI.1), ``oracle`` (default False: the
    MILP is exact but can take seconds per slot), ``oracle_time_limit`` (s per MILP, default 60),
    ``infeasible``, ``render_mode``, ``action_mode``, ``max_jobs`` (J_max, default 32), and any
    scenario parameter (``scenario.PAPER_DEFAULTS``: ``num_servers``, ``num_racks``,
    ``arrival_rate``, ``gpu_scale``, ``bw_scale``, ``budget_mode``, attribute ranges, ...);
    ``instances`` (seeds drawn at each reset, default None) and ``max_racks`` (padding, default None).

    ## Version History
    * v0: initial version.
    * v0, later: ``reset(options={"scenario_seed": k})``, ``instances``, ``max_racks`` padding;
      unknown reset options raise. Later: ``step`` after the end raises until ``reset``.
    * v0, later: the job stream is drawn from the instance (``scenario_seed``), no longer from the
      reset seed: instances at the default load gave every agent the same total (their topologies
      never bind), so "n instances" were one workload. Runs on a given instance and seed differ from
      earlier versions; topologies are unchanged.
    """

    family = "ringallreduce"
    action_space: spaces.MultiDiscrete
    _A: np.ndarray  # (n_active, fields) active jobs in arrival order (set by reset)
    pad_kwargs = ("max_racks",)
    # info["metrics"] keys and their kind (clustergym/core/metrics.py).
    metrics_spec = {
        "utility": Metric(SLOT, "this slot's utility gain Σ_i [μ_i(ζ_i z_i,t) − μ_i(ζ_i z_i,t−1)], the reward"),
        "embedded_ratio": Metric(SLOT, "embedded / active jobs, 1 when none is active (Figs. 5–6)"),
        "active_jobs": Metric(SLOT, "jobs arrived and not finished"),
        "embedded_jobs": Metric(SLOT, "jobs with at least one worker this slot"),
        "waiting_jobs": Metric(SLOT, "active jobs beyond the J_max window"),
        "gpu_util": Metric(SLOT, "GPUs used / GPUs"),
        "link_util": Metric(SLOT, "mean over link directions of load / capacity"),
        "repaired": Metric(SLOT, "jobs whose allocation the repair changed", total=True),
        "oracle_reward": Metric(SLOT, "optimum of problem (10) over the visible jobs, MILP (oracle=True)"),
        "regret": Metric(SLOT, "oracle_reward − utility (oracle=True)"),
    }

    action_modes = ("placement", "ring_size")  # values of the action_mode kwarg, the default first
    # the job stream is the instance's and §IV's dynamics are deterministic given the jobs ("Starting State")
    seed_drives_dynamics = False

    def __init__(self, scenario: str | Scenario = "paper", *, scenario_seed: int = 0, horizon: int = 200,
                 oracle: bool = False, infeasible: str = "repair", render_mode: str | None = None,
                 action_mode: str = "placement", max_jobs: int = 32, oracle_time_limit: float = 60.0,
                 instances: Any = None, max_racks: int | None = None, **params: Any):
        super().__init__(horizon=horizon, infeasible=infeasible, render_mode=render_mode, oracle=oracle)
        self.action_mode = check_choice("action_mode", action_mode, self.action_modes)
        self.max_jobs = check_int("max_jobs", max_jobs, 1, 4096)
        self.oracle_time_limit = check_real("oracle_time_limit", oracle_time_limit, 0.0, None, lo_open=True)
        self.max_racks = None if max_racks is None else check_int("max_racks", max_racks, 1, 10_000)
        self._source = InstanceSource(scenario, params, make_ring_scenario, RING_SCENARIOS, scenario_seed, instances,
                                      self.pad_kwargs)
        sc = self._source.first
        self.action_space, self.observation_space = self._spaces(sc.problem, self.scenario_seed)
        self._load(sc)
        self._rngs = None
        self._t = 0

    def _spaces(self, pb, k) -> tuple:
        """(action space, observation space) of problem ``pb`` in this env (padded to ``max_racks`` if set)."""
        topo = pb.topology
        S, R, J, wmax = topo.num_servers, topo.num_racks, self.max_jobs, pb.workers_max
        gpus = np.asarray(topo.gpus, dtype=np.int64)
        if self.max_racks is not None:
            check_maxima(instance_sizes(pb), {"max_racks": self.max_racks}, f"instance scenario_seed={k}")
            R = self.max_racks
        if self.action_mode == "placement":
            per = np.full(S, wmax + 1) if self.max_racks is not None else np.minimum(wmax, gpus) + 1
            nvec = np.tile(per, J)  # (J*S,)
        else:
            nvec = np.full(J, wmax + 1)
        obs = {
            "jobs": spaces.Box(0.0, np.inf, shape=(J, len(JOB_FEATURES)), dtype=np.float32),
            "job_mask": spaces.MultiBinary(J),
            "servers": spaces.Box(0.0, np.inf, shape=(S, 3), dtype=np.float32),
            "links": spaces.Box(0.0, np.inf, shape=(S + R, 4), dtype=np.float32),
            "t": spaces.Box(0.0, float(self.horizon), shape=(1,), dtype=np.float32),
        }
        if self.max_racks is not None:
            obs["link_present"] = spaces.MultiBinary(S + R)
        return spaces.MultiDiscrete(nvec), spaces.Dict(obs)

    def _load(self, sc: Scenario) -> None:
        """Take the problem-derived state of instance ``sc`` (its spaces were checked)."""
        self.scenario = sc
        self.problem = replace(sc.problem, max_jobs=self.max_jobs, action_mode=self.action_mode)
        self._truth = sc.truth
        topo = self.problem.topology
        self._topo = topo
        self._S, self._R, self._J = topo.num_servers, topo.num_racks, self.max_jobs
        # writable copies: the compiled ring-size step takes the same array types from this env and the vector env
        self._gpus = np.array(topo.gpus, dtype=np.int64)
        self._rack_of = np.array(topo.rack_of, dtype=np.int64)
        self._cap_srv = np.array(topo.server_bw, dtype=np.float64)
        self._cap_rack = np.array(topo.rack_bw, dtype=np.float64)
        self._link_cap = np.concatenate([self._cap_srv, self._cap_rack])  # (S+R, 2)
        # link_util of the metrics: mean over links and directions of load / capacity; a ring loads both
        # directions equally, so it is load · (1/cap_up + 1/cap_down) / (2 (S+R))
        self._util_w = (1.0 / self._link_cap).sum(axis=1) / self._link_cap.size  # (S+R,)
        self._gpu_total = float(self._gpus.sum())
        wmax = self.problem.workers_max
        self._nvec = np.asarray(self.action_space.nvec)
        if self.action_mode == "placement":
            rng = f"min({wmax}, C_s)" if self.max_racks is None else f"{wmax} (a value above C_s breaks eq. 4)"
            self._space_desc = f"MultiDiscrete({self._J}x{self._S} flattened; entry (j, s) in 0..{rng})"
        else:
            self._space_desc = f"MultiDiscrete({self._J}; values 0..{wmax})"
        S = self._S
        self._servers_static = np.stack([self._gpus, self._rack_of, np.zeros(S)], axis=1).astype(np.float32)
        self._ring_seq = np.lexsort((np.arange(S), self._rack_of))  # servers grouped by rack (ring order)
        # S + R, or S + max_racks when padded
        self._n_links = self.observation_space["links"].shape[0]  # type: ignore[index]
        if self.max_racks is not None:
            self._link_present = np.zeros(self._n_links, dtype=np.int8)
            self._link_present[:S + self._R] = 1

    def _instance_sizes(self, problem) -> dict:
        return instance_sizes(problem)

    # -- arrivals ------------------------------------------------------------------------------
    def _refill(self) -> None:
        """Jobs arriving in slots [t, t + _BLOCK) (``dynamics.arrival_block``)."""
        assert self._rngs is not None, "reset() draws the generators first"
        self._block = arrival_block(self._rngs, self._truth, self._t, self._next_id)
        self._next_id += self._block.shape[0]
        self._block_end = self._t + _BLOCK

    def _admit(self) -> None:
        """Move the jobs arriving at slot t into the active set (eq. 6: none before a_i)."""
        if self._t >= self._block_end:
            self._refill()
        lo, hi = np.searchsorted(self._block[:, 1], [self._t, self._t + 1])
        if hi > lo:
            self._A = np.concatenate([self._A, self._block[lo:hi]])

    def _window(self) -> None:
        """The J_max oldest active jobs, padded; cached for the slot."""
        J = self._J
        n = min(J, self._A.shape[0])
        self._n_vis = n
        W = np.zeros((J, len(_FIELDS)))
        W[:n] = self._A[:n]
        self._W = W
        present = np.zeros(J, dtype=bool)
        present[:n] = True
        self._present = present
        # eqs. 2 and 11: at most min(N_i, budget left) workers this slot
        self._cap = np.minimum(W[:, 2], W[:, 3] - W[:, 9]).astype(np.int64)

    # -- gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[RingObservation, dict[str, Any]]:
        super().reset(seed=seed)
        self._begin_instance(seed, options)  # options["scenario_seed"] or a draw from `instances`
        self._rngs = job_generators(self._truth)  # the instance's job stream, from its start (scenario.py)
        self._t = 0
        self._next_id = 0
        self._block_end = 0
        self._A = np.zeros((0, len(_FIELDS)))  # (n_active, fields) active jobs in arrival order
        self._last_y = np.zeros((self._J, self._S), dtype=np.int64)
        self._last_ids = np.full(self._J, -1, dtype=np.int64)
        self._last_load = np.zeros((self._S + self._R, 2))
        self._admit()
        self._window()
        self._viewer_reset(problem=self.problem)
        return self._obs(), self._info_public()

    def _pad(self, key: str, dtype=np.float64) -> np.ndarray:
        """(J,) one attribute of the visible window (0 where empty)."""
        col = self._W[:, _C[key]]
        return col.astype(dtype) if dtype is not np.float64 else col.copy()

    def _obs(self) -> RingObservation:
        W = self._W
        jobs = np.empty((self._J, len(JOB_FEATURES)), dtype=np.float32)
        jobs[:, 0] = self._cap
        jobs[:, 1] = W[:, 3] - W[:, 9]
        jobs[:, 2:8] = W[:, [9, 4, 5, 6, 7, 8]]
        jobs[:, 8] = np.where(self._present, self._t - W[:, 1], 0.0)
        jobs[:, 9] = W[:, 10]
        servers = self._servers_static.copy()
        servers[:, 2] = self._last_y.sum(axis=0)
        links = np.zeros((self._n_links, 4), dtype=np.float32)
        links[:self._S + self._R] = np.concatenate([self._link_cap, self._last_load], axis=1)
        obs: RingObservation = {"jobs": jobs, "job_mask": self._present.astype(np.int8), "servers": servers,
                                "links": links, "t": np.array([self._t], dtype=np.float32)}
        if self.max_racks is not None:
            obs["link_present"] = self._link_present.copy()
        return obs

    def _mask(self) -> np.ndarray:
        if self.action_mode == "placement":
            return np.repeat(self._present, self._S)
        return self._present.copy()

    def _info_public(self) -> dict:
        Wi = self._W[:, [0, 1, 2, 3, 9]].astype(np.int64)
        Wi[~self._present, 0] = -1
        Wf = self._W[:, 4:9].T.copy()  # (5, J) zeta, bw, lam1, lam2, lam3 of the window (one copy, rows as views)
        window = {"id": Wi[:, 0], "present": self._present.copy(), "workers": Wi[:, 2], "cap": self._cap.copy(),
                  "remaining": Wi[:, 3] - Wi[:, 4], "attained": Wi[:, 4], "arrival": Wi[:, 1],
                  "zeta": Wf[0], "bw": Wf[1], "lam1": Wf[2], "lam2": Wf[3], "lam3": Wf[4]}
        return {"action_mask": self._mask(), "window": window, "t": self._t}

    def action_masks(self) -> np.ndarray:
        """Per-value mask for MaskablePPO (concatenated over the action's dimensions)."""
        vals = [np.arange(n) for n in self._nvec]
        if self.action_mode == "placement":
            lim = np.minimum(self._cap[:, None], self._gpus[None, :]).reshape(-1)
        else:
            lim = self._cap
        return np.concatenate([v <= l for v, l in zip(vals, lim)])

    # -- constraints ---------------------------------------------------------------------------
    def _raise(self, msg: str):
        raise ValueError(f"infeasible action: {msg}")

    def _parse(self, action: Any) -> np.ndarray:
        if self._rngs is None:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(action)
        if self.action_mode == "placement" and a.shape == (self._J, self._S):
            a = a.reshape(-1)
        if a.dtype.kind in "iu" and a.shape == self._nvec.shape:
            a = a.astype(np.int64, copy=False)
        else:
            a = self._as_int_action(a, tuple(self._nvec.shape), self._space_desc)
        if a.size and (a.min() < 0 or (a >= self._nvec).any()):
            raise ValueError(f"action values out of range, expected {self._space_desc}")
        return a

    def _check_placement(self, y: np.ndarray) -> tuple[np.ndarray, int]:
        """Validate / repair y (J, S) (``dynamics.check_placement``); returns the executed y and the number of
        repaired jobs, or raises under ``infeasible="raise"`` naming the first violated constraint."""
        out, load = np.empty((self._J, self._S), dtype=np.int64), np.empty(self._S + self._R)
        status, where, repaired = check_placement(np.ascontiguousarray(y, dtype=np.int64), self._present, self._cap,
                                                  self._gpus, self._pad("bw"), self._rack_of, self._R, self._link_cap,
                                                  self.infeasible == "raise", out, load)
        if status == PLACE_EMPTY_ROW:
            self._raise(f"window row {where} has no job but gets {int(y[where].sum())} workers (eq. 6)")
        if status == PLACE_OVER_CAP:
            j = where
            tot, n_i, rem = int(y[j].sum()), int(self._W[j, 2]), int(self._cap[j])
            if tot > n_i:
                self._raise(f"job {int(self._W[j, 0])} (window row {j}) gets {tot} workers > "
                            f"N_i = {n_i} (excess {tot - n_i}, eq. 2)")
            self._raise(f"job {int(self._W[j, 0])} (window row {j}) gets {tot} workers > "
                        f"remaining budget {rem} worker-slots (excess {tot - rem}, eq. 11)")
        if status == PLACE_OVER_GPUS:
            s, used = where, int(y[:, where].sum())
            self._raise(f"server {s} runs {used} workers > C_s = {int(self._gpus[s])} GPUs "
                        f"(excess {used - int(self._gpus[s])}, eq. 4)")
        if status == PLACE_OVER_LINK:
            li, d = divmod(where, 2)
            name = f"server {li} uplink" if li < self._S else f"rack {li - self._S} uplink"
            self._raise(f"{name} ({'up' if d == 0 else 'down'}) carries {load[li]:.4g} Gbps > "
                        f"{self._link_cap[li, d]:.4g} Gbps (excess {load[li] - self._link_cap[li, d]:.4g}, "
                        f"eq. 19, per link)")
        return out, repaired

    def _place_sizes(self, kappa: np.ndarray) -> tuple:
        """The ring-size slot (``dynamics.size_slot_batch`` for this one env, as the vector env runs it for all):
        (y (J, S), workers (J,), rings (J, S), server loads (S,), rack loads (R,), repaired jobs)."""
        J, S, R = self._J, self._S, self._R
        y, rings = np.empty((1, J, S), dtype=np.int64), np.empty((1, J, S), dtype=np.int64)
        w, used = np.empty((1, J), dtype=np.int64), np.empty((1, S), dtype=np.int64)
        load = np.empty((1, S + R))
        repaired, status, where = (np.empty(1, dtype=np.int64) for _ in range(3))
        size_slot_batch(np.ascontiguousarray(kappa)[None], self._W[None], np.array([self._n_vis]), np.ones(1, dtype=np.bool_),
                        self.infeasible == "raise", self._gpus[None], self._cap_srv[None], self._cap_rack[None],
                        np.array([R]), self._rack_of[None], self._ring_seq[None], y, w, rings, load, used, repaired,
                        status, where)
        if status[0] != SIZE_OK:
            j = int(where[0])
            raise ValueError(size_infeasible_message(int(status[0]), j, int(kappa[j]), self._W[j]))
        return y[0], w[0], rings[0], load[0, :S], load[0, S:], int(repaired[0])

    # -- step ----------------------------------------------------------------------------------
    def step(self, action: npt.ArrayLike) -> StepReturn[RingObservation]:
        if self._episode_over:
            raise self._over()
        a = self._parse(action)
        if self.action_mode == "placement":
            y, repaired = self._check_placement(a.reshape(self._J, self._S))
            w = y.sum(axis=1)  # (J,) workers per window row
            rings, srv, rack = ring_stats(y, self._W[:, 5], self._ring_seq, self._rack_of, self._R)
        else:
            y, w, rings, srv, rack, repaired = self._place_sizes(a)
        n, W = self._n_vis, self._W
        zeta, bw, l1, l2, l3 = W[:n, 4], W[:n, 5], W[:n, 6], W[:n, 7], W[:n, 8]
        z_old = W[:n, 9]
        gain = np.zeros(self._J)
        if n:
            gain[:n] = (sigmoid_utility(zeta * (z_old + w[:n]), l1, l2, l3)
                        - sigmoid_utility(zeta * z_old, l1, l2, l3))
        reward = float(gain.sum())
        metrics = self._metrics(y, w, reward, repaired, srv, rack)
        if self.oracle:
            from clustergym.envs.ringallreduce.oracle import solve_slot

            opt, _ = solve_slot(self._topo, self._cap[:n], zeta, z_old, l1, l2, l3, bw,
                                time_limit=self.oracle_time_limit)
            metrics.update(oracle_reward=opt, regret=opt - reward)
        feedback: RingFeedback = {"allocation": y, "workers": w, "job_ids": self._pad("id", np.int64),
                    "gain": gain, "rings": rings}
        feedback["job_ids"][~self._present] = -1
        # bookkeeping: attained service, departures (budget used up), arrivals of the next slot
        self._last_y, self._last_ids = y, feedback["job_ids"]
        if self._viewer is not None:  # the episode viewer's history (picture render modes only)
            self._viewer.record(allocation=y, job_ids=feedback["job_ids"], load=self._last_load, reward=reward,
                                active=metrics["active_jobs"])
        # only visible jobs progress; those whose budget is used up leave (dynamics.settle, as the vector env)
        self._A = self._A[:settle(self._A, self._A.shape[0], n, w)]
        self._t += 1
        self._admit()
        self._window()
        info = self._info_public()
        info.update(feedback=feedback, metrics=metrics)
        self._episode_over = truncated = self._t >= self.horizon
        return self._obs(), reward, False, truncated, info

    def _metrics(self, y, w, reward, repaired, srv, rack) -> dict:
        active = int(self._A.shape[0])
        embedded = int(np.count_nonzero(w))
        per_link = np.concatenate([srv, rack])  # (S+R,) Gbps each way
        self._last_load = np.stack([per_link, per_link], axis=1)  # (S+R, 2): the cheapest ring loads both ways
        return {"utility": reward, "embedded_ratio": embedded / active if active else 1.0, "active_jobs": active,
                "embedded_jobs": embedded, "waiting_jobs": max(0, active - self._J),
                "gpu_util": float(y.sum() / self._gpu_total), "link_util": float(per_link @ self._util_w),
                "repaired": repaired}

    # -- rendering ----------------------------------------------------------------------------
    def _render_ansi(self) -> str:
        from clustergym.envs.ringallreduce.render import render_ansi

        return render_ansi(self.problem, self._t, self._last_y, self._last_ids, self._last_load,
                           int(self._A.shape[0]))

    def _make_viewer(self):
        from clustergym.envs.ringallreduce.render import RingViewer

        return RingViewer(self.render_mode, self.horizon, self.metadata["render_fps"])
