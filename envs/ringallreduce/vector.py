"""Native vector env for P3, RingAllReduce-v0 (GADGET paper, gadget.md §IV–VI): N envs stepped as arrays."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium.vector.utils import batch_space

from clustergym.core.scenario import Scenario
from clustergym.envs.ringallreduce.dynamics import (BLOCK, JOB_FIELDS, SIZE_OK, arrival_block, job_generators,
                                                    settle_batch, size_infeasible_message, size_slot_batch)
from clustergym.envs.ringallreduce.env import JOB_FEATURES, RingAllReduceEnv
from clustergym.envs.ringallreduce.scenario import sigmoid_utility
from clustergym.envs.ringallreduce.types import RingObservation
from clustergym.core.vector_env import ClusterVectorEnv, VectorStepReturn, with_masks

__all__ = ["RingAllReduceVectorEnv"]

_F = len(JOB_FIELDS)


@dataclasses.dataclass(frozen=True, eq=False)
class _Instance:
    """One instance's arrays in the vector env's padded layout (built once per scenario seed)."""

    scenario: Scenario
    problem: Any
    gpus: np.ndarray  # (S,) int64 C_s
    rack_of: np.ndarray  # (S,) int64
    srv_cap: np.ndarray  # (S, 2) server uplink capacity per direction
    rack_cap: np.ndarray  # (R_max, 2) rack uplink capacity, zero beyond the instance's R racks
    num_racks: int
    ring_seq: np.ndarray  # (S,) servers grouped by rack (ring order)
    link_cap: np.ndarray  # (L, 2) capacity of the S + R links, zero beyond
    util_w: np.ndarray  # (L,) link_util weight of each link: (1/cap_up + 1/cap_down) / (2 (S + R)), zero beyond
    gpu_total: float


class RingAllReduceVectorEnv(ClusterVectorEnv[RingObservation, np.ndarray]):
    """N independent copies of :class:`RingAllReduceEnv` with ``action_mode="ring_size"``, stepped as arrays.

    ## Description
    The model, rewards and infeasibility rules are those of the single env (gadget.md §IV–VI, see
    :class:`~clustergym.envs.ringallreduce.env.RingAllReduceEnv`), computed by the same code: one call of
    ``ringallreduce.dynamics.size_slot_batch`` runs the ring-size slot of every sub-env (the requested
    sizes capped at min(N_i, budget left), the greedy ring placement in window order, each job's ring and
    the per-link loads), the utility gain is ``scenario.sigmoid_utility`` on all sub-envs' windows at once,
    one call of ``dynamics.settle_batch`` does the bookkeeping (attained service, departures, the next
    slot's arrivals), and ``dynamics.arrival_block`` draws each sub-env's arrivals from its instance's
    job-stream generators (``dynamics.job_generators``) in blocks of 256 slots; the single env calls the same functions. Sub-env i seeded with s_i
    gives exactly the trajectory of a single env built with the same kwargs and reset with ``seed=s_i``
    (``clustergym.core.vector_env``). Create it with ``gym.make_vec("clustergym/RingAllReduce-v0", num_envs=N,
    vectorization_mode="vector_entry_point", action_mode="ring_size", **kwargs)``.

    Each sub-env keeps its active jobs in arrival order in a fixed-capacity array (N, A, 11) (the capacity
    doubles when a sub-env needs more rows); its window is the first J_max rows.

    ## Action Space
    ``MultiDiscrete`` (N, J_max) with values 0..workers_max (``single_action_space`` = the single env's):
    row i is sub-env i's number of workers per visible job. ``action_mode="placement"`` (the single env's
    default) is not vectorised: the constructor raises a ValueError; step single envs instead
    (``gym.make``, or ``clustergym train --vec dummy``, which ``--vec auto`` picks for that mode).

    ## Observation Space
    The single env's keys with a leading N axis (``single_observation_space`` = the single env's), same
    values: ``jobs`` (N, J_max, 10) float32, ``job_mask`` (N, J_max) int8, ``servers`` (N, S, 3) float32,
    ``links`` (N, S + R, 4) float32, ``t`` (N, 1) float32 and, with ``max_racks``, ``link_present``
    (N, S + R_max) int8. ``clustergym.learning.pipeline.flatten_batch`` flattens a batch to (N, flatdim),
    row i equal to ``gymnasium.spaces.flatten`` of sub-env i's observation.

    ## Rewards
    (N,) float64: the slot's utility increment per sub-env (0 for a sub-env being autoreset).

    ## Infeasible actions
    As the single env, per row: values outside 0..workers_max, NaN or non-integers: ValueError naming the
    first offending sub-env (every row); ``"repair"`` caps a size at min(N_i, budget left), ignores sizes
    of empty window rows and gives no workers to a job the greedy placement cannot place; ``"raise"``:
    ValueError naming the sub-env, then the single env's message (eq. 6, eq. 2, eq. 11, or no feasible
    ring placement). A rejected step changes no state.

    ## Info
    Arrays with a leading N axis, each with a ``_key`` mask (Gymnasium's vector layout):
    ``action_mask`` (N, J_max) bool, ``window`` (the single env's keys, (N, J_max) each), ``t`` (N,) int64;
    ``feedback``: ``allocation`` (N, J_max, S), ``workers`` (N, J_max), ``job_ids`` (N, J_max), ``gain``
    (N, J_max), ``rings`` (N, J_max, S), equal to the single env's; ``metrics``: the single env's keys as
    (N,) arrays, equal to its values except ``link_util``, which is summed in another order (equal up to
    rounding); with ``oracle=True`` also ``oracle_reward`` and ``regret``, one MILP per sub-env and slot
    in a Python loop (seconds per slot; off by default). ``feedback``/``metrics`` are absent (mask False)
    for sub-envs being autoreset. ``action_masks()`` gives the (N, J_max · (workers_max + 1)) per-value
    masks of sb3-contrib's MaskablePPO.

    ## Starting State / Episode End
    Each sub-env truncates after ``horizon`` slots and autoresets at the next step
    (``AutoresetMode.NEXT_STEP``); randomness as in ``clustergym.core.vector_env``.

    ## Arguments
    ``num_envs`` (N, default 1) and the single env's arguments: ``scenario``, ``scenario_seed``,
    ``horizon``, ``oracle``, ``oracle_time_limit``, ``infeasible``, ``action_mode`` (must be
    ``"ring_size"``), ``max_jobs``, ``instances``, ``max_racks``, scenario parameters. ``render_mode``
    must be None.

    ## Instances
    Each sub-env runs its own instance (``scenario_seeds``, (N,); ``problems[i]``; ``problem`` and
    ``scenario`` are sub-env 0's). ``reset(options={"scenario_seed": k})`` switches the sub-envs it resets
    (all, or those of ``reset_mask``) to instance k; with ``instances``, every sub-env reset (autoresets
    included) draws one from its own generator, as the single env. Instances differ in the GPUs per server
    and the number of racks; with ``max_racks`` every sub-env's rack arrays are padded to R_max (the
    single env's padding rules); without it only instances with the construction instance's spaces fit.

    ## Version History
    * v0: initial version (``action_mode="ring_size"``).
    """

    family = "ringallreduce"
    metrics_spec = RingAllReduceEnv.metrics_spec  # the single env's declaration (clustergym/core/metrics.py)
    pad_kwargs = RingAllReduceEnv.pad_kwargs
    action_modes = ("ring_size",)  # the single env's action modes this env steps
    _rng_names = ("arrivals", "jobs")

    @classmethod
    def unsupported(cls, env_kwargs: dict) -> str | None:
        """Why env kwargs ``env_kwargs`` (of ``gym.make``) cannot be stepped by this env, or None when they can:
        only ``action_mode="ring_size"`` is vectorised (``clustergym.learning.training.resolve_vec`` then steps
        single envs)."""
        mode = env_kwargs.get("action_mode", RingAllReduceEnv.action_modes[0])
        if mode not in cls.action_modes:
            return (f"action_mode={mode!r} is stepped by single envs only (the native vector env runs "
                    f"action_mode={cls.action_modes[0]!r})")
        return None

    def __init__(self, num_envs: int = 1, scenario: str | Scenario = "paper", *, scenario_seed: int = 0,
                 horizon: int = 200, oracle: bool = False, infeasible: str = "repair", render_mode: str | None = None,
                 action_mode: str = "placement", max_jobs: int = 32, oracle_time_limit: float = 60.0,
                 instances: Any = None, max_racks: int | None = None, **params: Any):
        super().__init__(num_envs, horizon=horizon, infeasible=infeasible, oracle=oracle, render_mode=render_mode)
        # The single env builds and validates the scenario and spaces; it also checks instance switches.
        self._single = s = RingAllReduceEnv(scenario, scenario_seed=scenario_seed, horizon=horizon, oracle=False,
                                            infeasible=infeasible, action_mode=action_mode, max_jobs=max_jobs,
                                            oracle_time_limit=oracle_time_limit, instances=instances,
                                            max_racks=max_racks, **params)
        why = self.unsupported({"action_mode": s.action_mode})
        if why is not None:
            raise ValueError(f"{why}: build single envs for it (gym.make, or gym.make_vec with "
                             f"vectorization_mode='sync'; clustergym train --vec dummy)")
        self._source = s.instance_source
        self.action_mode, self.max_jobs, self.max_racks = s.action_mode, s.max_jobs, s.max_racks
        self.oracle_time_limit = s.oracle_time_limit
        pb = s.problem
        N, J, S = self.num_envs, s.max_jobs, pb.num_servers
        self._J, self._S = J, S
        self._L = s.observation_space["links"].shape[0]  # type: ignore[index]  # S + R (+ padding)
        self._wmax = pb.workers_max
        self.single_action_space = s.action_space
        self.single_observation_space = s.observation_space
        self.action_space = batch_space(self.single_action_space, N)
        self.observation_space = batch_space(self.single_observation_space, N)
        self._space_desc = f"MultiDiscrete({J}; values 0..{self._wmax})"
        L, Rmax = self._L, self._L - S
        # each sub-env's instance (padded to R_max racks)
        self._gpus = np.zeros((N, S), dtype=np.int64)  # (N, S) C_s
        self._rack_of = np.zeros((N, S), dtype=np.int64)  # (N, S)
        self._srv_cap = np.zeros((N, S, 2))  # (N, S, 2) Gbps per direction
        self._rack_cap = np.zeros((N, Rmax, 2))  # (N, R_max, 2) Gbps, zero beyond each instance's racks
        self._num_racks = np.zeros(N, dtype=np.int64)  # (N,) R of each instance
        self._ring_seq = np.zeros((N, S), dtype=np.int64)  # (N, S) servers in ring order
        self._link_cap = np.zeros((N, L, 2))  # (N, S + R_max, 2) Gbps, zero beyond S + R
        self._util_w = np.zeros((N, L))  # (N, S + R_max) link_util weights
        self._gpu_total = np.zeros(N)  # (N,) Σ_s C_s
        self._servers_static = np.zeros((N, S, 3), dtype=np.float32)  # (N, S, 3) C_s, rack, (GPUs used: per step)
        self._link_present = np.zeros((N, L), dtype=np.int8)  # (N, S + R_max)
        self.problems: list = [None] * N
        self._scenarios: list = [None] * N
        self._truths: list = [None] * N
        self._by_instance: dict = {}
        k0 = s.scenario_seed if s.scenario_seed is not None else 0
        for i in range(N):
            self._set_instance(i, s.scenario, k0)
        self._instance[:] = k0
        # episode state: active jobs in arrival order (rows >= count are zero), the arrival block of each sub-env
        self._jobs = np.zeros((N, max(64, 2 * J), _F))  # (N, A, F) active jobs (JOB_FIELDS)
        self._count = np.zeros(N, dtype=np.int64)  # (N,) active jobs
        self._n_vis = np.zeros(N, dtype=np.int64)  # (N,) visible jobs: min(J_max, count)
        self._block = np.zeros((N, 64, _F))  # (N, B, F) jobs of the current block (first rows of each sub-env)
        self._start = np.zeros((N, BLOCK + 1), dtype=np.int64)  # first block row of each slot of the block
        self._block_t0 = np.zeros(N, dtype=np.int64)  # first slot of each sub-env's block
        self._next_id = np.zeros(N, dtype=np.int64)
        self._used = np.zeros((N, S), dtype=np.int64)  # GPUs used in the last slot
        self._load = np.zeros((N, L))  # per-link load in the last slot (same both directions)

    @property
    def jobs_capacity(self) -> int:
        """Rows of each sub-env's active-job array (doubled whenever a sub-env needs more)."""
        return int(self._jobs.shape[1])

    # -- instances ----------------------------------------------------------------------------
    def _instance_arrays(self, sc: Scenario, k: int) -> _Instance:
        if k not in self._by_instance:
            topo = sc.problem.topology
            S, R, L = self._S, topo.num_racks, self._L
            rack_of = np.array(topo.rack_of, dtype=np.int64)
            rack_cap = np.zeros((L - S, 2))
            rack_cap[:R] = topo.rack_bw
            link_cap = np.zeros((L, 2))
            link_cap[:S + R] = topo.link_capacity
            util_w = np.zeros(L)
            util_w[:S + R] = (1.0 / link_cap[:S + R]).sum(axis=1) / (2 * (S + R))
            problem = dataclasses.replace(sc.problem, max_jobs=self._J, action_mode=self.action_mode)
            self._by_instance[k] = _Instance(sc, problem, np.array(topo.gpus, dtype=np.int64), rack_of,
                                             np.array(topo.server_bw, dtype=np.float64), rack_cap, R,
                                             np.lexsort((np.arange(S), rack_of)), link_cap, util_w,
                                             float(np.sum(topo.gpus)))
        return self._by_instance[k]

    def _set_instance(self, i: int, sc: Scenario, k: int) -> None:
        d = self._instance_arrays(sc, k)
        self._scenarios[i], self.problems[i], self._truths[i] = d.scenario, d.problem, d.scenario.truth
        self._gpus[i], self._rack_of[i], self._srv_cap[i], self._rack_cap[i] = d.gpus, d.rack_of, d.srv_cap, d.rack_cap
        self._num_racks[i], self._ring_seq[i] = d.num_racks, d.ring_seq
        self._link_cap[i], self._util_w[i], self._gpu_total[i] = d.link_cap, d.util_w, d.gpu_total
        self._servers_static[i, :, 0], self._servers_static[i, :, 1] = d.gpus, d.rack_of
        self._link_present[i] = 0
        self._link_present[i, :self._S + d.num_racks] = 1

    def _use_instance(self, i: int, sc: Scenario, k: int) -> None:
        self._single.check_instance(sc, k)
        self._set_instance(i, sc, k)

    # -- per sub-env episode state ------------------------------------------------------------
    def _ensure_rows(self, need) -> None:
        """Grow the active-job arrays (doubling) to hold ``need`` rows in every sub-env."""
        rows = self._jobs.shape[1]
        m = int(np.max(need))
        if m <= rows:
            return
        while rows < m:
            rows *= 2
        grown = np.zeros((self.num_envs, rows, _F))
        grown[:, :self._jobs.shape[1]] = self._jobs
        self._jobs = grown

    def _refill(self, i: int, t0: int) -> None:
        """Sub-env i's jobs arriving in slots [t0, t0 + BLOCK) (``dynamics.arrival_block``, as the single env)."""
        blk = arrival_block(self._rngs[i], self._truths[i], t0, int(self._next_id[i]))
        n = blk.shape[0]
        self._next_id[i] += n
        if n > self._block.shape[1]:
            grown = np.zeros((self.num_envs, max(n, 2 * self._block.shape[1]), _F))
            grown[:, :self._block.shape[1]] = self._block
            self._block = grown
        self._block[i, :n] = blk
        self._start[i] = np.searchsorted(blk[:, 1], t0 + np.arange(BLOCK + 1))
        self._block_t0[i] = t0

    def _start_episode(self, i: int) -> None:
        self._rngs[i] = job_generators(self._truths[i])  # the instance's job stream, as the single env
        self._jobs[i] = 0.0
        self._next_id[i] = 0
        self._used[i] = 0
        self._load[i] = 0.0
        self._refill(i, 0)
        lo, hi = int(self._start[i, 0]), int(self._start[i, 1])
        self._ensure_rows(hi - lo)
        self._jobs[i, :hi - lo] = self._block[i, lo:hi]
        self._count[i] = hi - lo
        self._n_vis[i] = min(self._J, hi - lo)

    def _window(self) -> tuple[np.ndarray, np.ndarray]:
        """(the windows (N, J, F) as a view, present (N, J) bool)."""
        return self._jobs[:, :self._J], np.arange(self._J)[None, :] < self._n_vis[:, None]

    def _observations(self) -> RingObservation:
        N, J = self.num_envs, self._J
        W, present = self._window()
        left = W[..., 3] - W[..., 9]  # budget left
        jobs = np.empty((N, J, len(JOB_FEATURES)), dtype=np.float32)
        jobs[..., 0] = np.minimum(W[..., 2], left)
        jobs[..., 1] = left
        jobs[..., 2:8] = W[..., [9, 4, 5, 6, 7, 8]]
        jobs[..., 8] = np.where(present, self._t[:, None] - W[..., 1], 0.0)
        jobs[..., 9] = W[..., 10]
        servers = self._servers_static.copy()
        servers[..., 2] = self._used
        links = np.empty((N, self._L, 4), dtype=np.float32)
        links[..., :2] = self._link_cap
        links[..., 2] = self._load
        links[..., 3] = self._load
        obs: RingObservation = {"jobs": jobs, "job_mask": present.astype(np.int8), "servers": servers,
                                "links": links, "t": self._t.astype(np.float32)[:, None]}
        if self.max_racks is not None:
            obs["link_present"] = self._link_present.copy()
        return obs

    def _public(self) -> dict:
        """The single env's public info (action_mask, window, t) of every sub-env."""
        W, present = self._window()
        Wi = W[..., [0, 1, 2, 3, 9]].astype(np.int64)
        Wi[..., 0][~present] = -1
        Wf = np.moveaxis(W[..., 4:9], -1, 0).copy()  # (5, N, J) zeta, bw, lam1, lam2, lam3
        window = {"id": Wi[..., 0], "present": present.copy(), "workers": Wi[..., 2],
                  "cap": np.minimum(Wi[..., 2], Wi[..., 3] - Wi[..., 4]), "remaining": Wi[..., 3] - Wi[..., 4],
                  "attained": Wi[..., 4], "arrival": Wi[..., 1], "zeta": Wf[0], "bw": Wf[1], "lam1": Wf[2],
                  "lam2": Wf[3], "lam3": Wf[4]}
        return {"action_mask": present, "window": window, "t": self._t.copy()}

    def _reset_info(self, mask: np.ndarray) -> dict:
        return with_masks(self._public(), mask)

    def action_masks(self) -> np.ndarray:
        """(N, J_max · (workers_max + 1)) per-value masks for sb3-contrib MaskablePPO: per sub-env and window row,
        value v allowed iff v <= min(N_i, budget left) (0 only on empty rows), as the single env's."""
        W, _ = self._window()
        cap = np.minimum(W[..., 2], W[..., 3] - W[..., 9])
        return (np.arange(self._wmax + 1)[None, None, :] <= cap[..., None]).reshape(self.num_envs, -1)

    # -- stepping ----------------------------------------------------------------------------
    def _check_form(self, actions: Any) -> np.ndarray:
        """(N, J) int64 sizes; ValueError naming the first bad sub-env (the single env's form rules)."""
        a = self._integer_actions(actions, self._J, self._wmax, self._space_desc, "action values out of range")
        return np.ascontiguousarray(a, dtype=np.int64)

    def step(self, actions: npt.ArrayLike) -> VectorStepReturn[RingObservation]:
        self._require_reset()
        a = self._check_form(actions)
        N, J, S = self.num_envs, self._J, self._S
        stepping = ~self._autoreset  # (N,) sub-envs that step (the others reset now)
        y = np.empty((N, J, S), dtype=np.int64)
        rings = np.empty((N, J, S), dtype=np.int64)
        w = np.empty((N, J), dtype=np.int64)
        load = np.empty((N, self._L))
        used = np.empty((N, S), dtype=np.int64)
        repaired, status, where = (np.empty(N, dtype=np.int64) for _ in range(3))
        size_slot_batch(a, self._jobs, self._n_vis, stepping, self.infeasible == "raise", self._gpus, self._srv_cap,
                        self._rack_cap, self._num_racks, self._rack_of, self._ring_seq, y, w, rings, load, used,
                        repaired, status, where)
        if status.any():
            i = int(np.argmax(status != SIZE_OK))
            j = int(where[i])
            raise ValueError(f"sub-env {i}: " + size_infeasible_message(int(status[i]), j, int(a[i, j]),
                                                                        self._jobs[i, j]))
        # The state changes only from here on.
        W, present = self._window()
        # the utility increments (the single env's formula, element by element); a job without workers gains
        # exactly 0 (mu(x) - mu(x)), so only the entries with workers are evaluated
        gain = np.zeros((N, J))
        run = w > 0  # only visible jobs of stepping sub-envs get workers
        zeta, z_old, l1, l2, l3 = (W[..., c][run] for c in (4, 9, 6, 7, 8))
        gain[run] = (sigmoid_utility(zeta * (z_old + w[run]), l1, l2, l3)
                     - sigmoid_utility(zeta * z_old, l1, l2, l3))
        reward = gain.sum(axis=1)
        active = self._count.copy()
        embedded = np.count_nonzero(w, axis=1)
        metrics = {"utility": reward.copy(), "embedded_ratio": np.where(active > 0, embedded / np.maximum(active, 1), 1.0),
                   "active_jobs": active, "embedded_jobs": embedded, "waiting_jobs": np.maximum(0, active - J),
                   "gpu_util": used.sum(axis=1) / self._gpu_total,
                   "link_util": np.einsum("ij,ij->i", load, self._util_w), "repaired": repaired}
        if self.oracle:  # the per-slot MILP of every sub-env (slow: a Python loop)
            from clustergym.envs.ringallreduce.oracle import solve_slot

            opt = np.zeros(N)
            for i in np.flatnonzero(stepping):  # type: ignore[assignment]  # a numpy int here
                Wi = W[i, :self._n_vis[i]]
                cap = np.minimum(Wi[:, 2], Wi[:, 3] - Wi[:, 9]).astype(np.int64)
                opt[i], _ = solve_slot(self.problems[i].topology, cap, Wi[:, 4], Wi[:, 9], Wi[:, 6], Wi[:, 7],
                                       Wi[:, 8], Wi[:, 5], time_limit=self.oracle_time_limit)
            metrics.update(oracle_reward=opt, regret=np.where(stepping, opt - reward, 0.0))
        ids = W[..., 0].astype(np.int64)
        ids[~present] = -1
        feedback = {"allocation": y, "workers": w, "job_ids": ids, "gain": gain, "rings": rings}
        # bookkeeping: attained service, departures, the next slot's arrivals (a new block every BLOCK slots)
        t_next = self._t + stepping
        refill = np.flatnonzero(stepping & (t_next >= self._block_t0 + BLOCK))
        for i in refill:  # type: ignore[assignment]  # a numpy int here
            self._refill(int(i), int(t_next[i]))
        rows = np.arange(N)
        slot = np.minimum(t_next - self._block_t0, BLOCK - 1)
        lo, hi = self._start[rows, slot], self._start[rows, slot + 1]
        self._ensure_rows(self._count + np.where(stepping, hi - lo, 0))
        settle_batch(self._jobs, self._count, self._n_vis, w, stepping, self._block, lo, hi, J)
        self._used, self._load = used, load  # zero rows for the sub-envs reset below
        self._t = t_next
        truncated = stepping & (self._t >= self.horizon)
        terminated = np.zeros(N, dtype=bool)
        self._autoreset_envs()  # NEXT_STEP: sub-envs that ended at the last step start over now
        self._autoreset = truncated | terminated
        info = with_masks(self._public(), np.ones(N, dtype=bool))
        info.update(with_masks({"feedback": feedback, "metrics": metrics}, stepping))
        return self._observations(), reward, terminated, truncated, info
