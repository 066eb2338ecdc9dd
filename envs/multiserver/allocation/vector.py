"""Native vector env for P2, MultiServerAllocation-v0 (OGASched paper, ogasched.md §2): N envs as arrays."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from gymnasium.vector.utils import batch_space

from clustergym.core.scenario import Scenario, freeze
from clustergym.envs.multiserver.allocation.actions import PortFill, zero_ignored
from clustergym.envs.multiserver.allocation.dynamics import ARRIVAL_BLOCK, AllocationDynamics, first_too_large
from clustergym.envs.multiserver.allocation.env import MultiServerAllocationEnv
from clustergym.envs.multiserver.allocation.learner_stats import AllocationStats, static_parts
from clustergym.envs.multiserver.allocation.types import AllocationObservation
from clustergym.core.vector_env import ClusterVectorEnv, VectorStepReturn, with_masks

__all__ = ["MultiServerAllocationVectorEnv"]

_SERIAL_ROWS = 4  # instance groups of at most this many sub-envs step with the serial kernel


class MultiServerAllocationVectorEnv(ClusterVectorEnv[AllocationObservation, np.ndarray]):
    """N independent copies of :class:`MultiServerAllocationEnv` (same scenario), stepped as arrays.

    ## Description
    The model, rewards and infeasibility rules are those of the single env (eqs. 1–7 and 27, see
    :class:`~clustergym.envs.multiserver.allocation.env.MultiServerAllocationEnv`), computed by the
    same object: the single env's :class:`~clustergym.envs.multiserver.allocation.dynamics.AllocationDynamics`
    (``env.dynamics``), whose ``step_batch`` runs the per-env kernel ``slot_step`` that the single env
    runs (the check of eqs. 3–4 and eq. 5 with eq. 7, fused) for every sub-env in one parallel numba
    kernel (``prange`` over chunks of 16 sub-envs, scratch per chunk), reading float32 or float64
    actions as given (no conversion pass), with the same plan (``AllocationDynamics.plan``, static
    entry lists): utilities only for ports with a job and entries that are not structurally zero
    (a = 0 or c_r^k = 0; non-zero values there are checked and, if within the tolerance, counted).
    Arrivals come from each sub-env's own child generator in blocks of 256 slots
    (``AllocationDynamics.draw_arrivals``, as in the single env), so sub-env i seeded with s_i
    replays a single env reset with ``seed=s_i`` (``clustergym.core.vector_env``). Create it with ``gym.make_vec("clustergym/MultiServerAllocation-v0",
    num_envs=N, vectorization_mode="vector_entry_point", **kwargs)``.

    ## Action Space
    ``Box(0, a, shape=(N, |E|, K), float32)`` (``single_action_space`` = the single env's box); row i
    is sub-env i's allocation in device units (entries with a_l^k = 0 bounded by 1 and ignored, as in
    the single env). float64 actions are accepted as well. With ``action_mode="port"`` /
    ``"port_device"``: ``Box(0, 1, shape=(N, L))`` / ``(N, L, K)``, each row completed by the single
    env's fill rule (``allocation/actions.py``, :class:`~clustergym.envs.multiserver.allocation.actions.PortFill`,
    batched over the sub-envs of an instance) before the same kernel runs.

    ## Observation Space
    The single env's keys with a leading N axis (``single_observation_space`` = the single env's), computed
    for all sub-envs at once (the statistics by ``allocation/learner_stats.py``):
    | key                                            | shape      | dtype   | meaning                  |
    |------------------------------------------------|------------|---------|--------------------------|
    | arrivals                                       | (N, L)     | int8    | x_l(t) of every sub-env   |
    | t                                              | (N, 1)     | float32 | slots elapsed            |
    | edge_arrival (, edge_present)                  | (N, P)     | int8    | as the single env        |
    | edge_demand, edge_alpha, last_allocation       | (N, P, K)  | float32 | as the single env        |
    | edge_utility                                   | (N, P·K)   | int64   | as the single env        |
    | beta                                           | (N, K)     | float32 | as the single env        |
    | arrival_share, port_reward_mean, last_port_reward | (N, L)  | float32 | as the single env        |
    The public problem data (``edge_demand``, ``edge_alpha``, ``edge_utility``, ``beta``,
    ``edge_present``) are read-only arrays shared by the observations until a sub-env switches instance
    (then replaced, never written): copy them to modify. ``clustergym.learning.pipeline.flatten_batch``
    flattens a batch to (N, flatdim), row i equal to ``gymnasium.spaces.flatten`` of sub-env i's
    observation.

    ## Rewards
    (N,) float64: q(x(t), y(t)) of eq. 5 per sub-env (0 for a sub-env being autoreset).

    ## Infeasible actions
    As the single env, per row: ``"repair"`` replaces an allocation outside Y (beyond 1e-6 device
    units) by its exact Euclidean projection Π_Y, computed inside ``step_batch`` by the compiled
    kernel the single env uses (``projection.project_into``), in parallel over sub-envs;
    ``"raise"``: ValueError naming the sub-env, then the constraint (eq. 3 or eq. 4). Shape other than (N, |E|, K), NaN/inf: ValueError naming the first offending sub-env.

    ## Info
    Arrays with a leading N axis, each with a ``_key`` mask (Gymnasium's vector layout): ``t`` (N,)
    int64; ``feedback``: ``allocation`` (N, |E|, K) the executed y — the action array itself (no
    copy, its dtype) when no sub-env needed repair and no entry is ignored, else a float64 copy (the
    ignored entries 0, the repaired rows projected; in the port modes the filled allocation) — and ``port_reward`` (N, L) x_l q_l; ``metrics``: ``expected_reward``, ``gain``,
    ``overhead``, ``utilisation`` (N,) float64 and ``repaired`` (N,) int64. With ``oracle=True``, at
    the slot where a sub-env truncates: ``episode_best_static``, ``episode_best_static_upper``,
    ``episode_regret`` (N,), set (mask True) only for the sub-envs that truncate; the hindsight
    optimum is an LP solved per sub-env (a fraction of a second each). ``feedback``/``metrics`` are
    absent (mask False) for sub-envs being autoreset.

    ## Starting State / Episode End
    Each sub-env truncates after ``horizon`` slots and autoresets at the next step
    (``AutoresetMode.NEXT_STEP``).

    ## Arguments
    ``num_envs`` (N, default 1) and the single env's arguments: ``scenario``, ``scenario_seed``,
    ``horizon``, ``oracle`` (default False, as the single env), ``infeasible``, ``instances``,
    ``max_edges``, ``action_mode``, scenario parameters. ``render_mode`` must be None.

    ## Instances
    Each sub-env runs its own instance (``scenario_seeds``, (N,); ``problems[i]``; ``problem`` and
    ``scenario`` are sub-env 0's). ``reset(options={"scenario_seed": k})`` switches the sub-envs it
    resets (all, or those of ``reset_mask``) to instance k; with ``instances``, every sub-env reset
    (autoresets included) draws one from its own generator, derived from the sub-env's seed as the
    single env derives it, so sub-env i seeded with s_i replays the single env built with the same
    kwargs and reset with ``seed=s_i``. With ``max_edges`` the spaces, observation keys and padding
    rules are the single env's.

    ## Version History
    * v0: initial version.
    * v0, later: per-sub-env instances, ``options={"scenario_seed": k}``, ``instances``, ``max_edges``.
    * v0, later: the single env's new observation keys; ``oracle`` defaults to False.
    """

    family = "multiserver-allocation"
    metrics_spec = MultiServerAllocationEnv.metrics_spec  # the single env's declaration (clustergym/core/metrics.py)
    _rng_names = ("arrivals",)

    def __init__(self, num_envs: int = 1, scenario: str | Scenario = "paper", *, scenario_seed: int = 0,
                 horizon: int = 2000, oracle: bool = False, infeasible: str = "repair",
                 render_mode: str | None = None, instances: Any = None, max_edges: int | None = None,
                 action_mode: str = "channel", **params: Any):
        super().__init__(num_envs, horizon=horizon, infeasible=infeasible, oracle=oracle, render_mode=render_mode)
        # The single env builds and validates the scenario and spaces; its dynamics object (arrivals,
        # eqs. 3–5, the error messages) is the one this env steps for every sub-env of that instance.
        self._single = s = MultiServerAllocationEnv(scenario, scenario_seed=scenario_seed, horizon=horizon,
                                                    oracle=False, infeasible=infeasible, instances=instances,
                                                    max_edges=max_edges, action_mode=action_mode, **params)
        self._source = s.instance_source
        self.max_edges = s.max_edges
        self.action_mode = s.action_mode
        self._fills: dict = {}  # scenario seed -> PortFill (port modes), built once per instance
        pb = s.problem
        N, self._L, self._K = self.num_envs, pb.num_ports, pb.num_device_types
        self._E = self._W = W = s.max_edges or pb.num_edges  # channel rows: |E|, or max_edges when padded
        self._act_shape = (N,) + s.action_space.shape
        self.single_action_space = s.action_space
        self.single_observation_space = s.observation_space
        self.action_space = batch_space(self.single_action_space, N)
        self.observation_space = batch_space(self.single_observation_space, N)
        self._space_desc = s.space_desc
        self._by_instance: dict = {}  # scenario seed -> (scenario, problem, dynamics), built once per instance
        k0 = s.scenario_seed if s.scenario_seed is not None else 0
        self._by_instance[k0] = (s.scenario, s.problem, s.dynamics)
        self._instance[:] = k0
        self._edge_port = np.full((N, W), self._L, dtype=np.int64)  # (N, W) port of each channel, L on padding
        # the public problem data of each sub-env (allocation/learner_stats.py): edge_demand, edge_alpha (N, W, K)
        # float32, edge_utility (N, W·K) int64, beta (N, K) float32; read-only arrays shared by the observations
        self._static = {key: np.zeros((N, *v.shape), dtype=v.dtype) for key, v in static_parts(pb, W).items()}
        self._n_edges = np.zeros(N, dtype=np.int64)  # (N,) real channels of each sub-env
        self._dyns: list = [None] * N
        self.problems: list = [None] * N  # public problem of each sub-env
        self._scenarios: list = [None] * N
        for i in range(N):
            self._set_instance(i, k0)
        self._share_static()
        self._stats = AllocationStats(N, W, self._L, self._K)  # the learner's statistics, all sub-envs
        self._repair_buf = np.empty((N, W, self._K))  # (N, E, K) float64, see step()
        self._arr_block = np.zeros((N, ARRIVAL_BLOCK, self._L), dtype=bool)  # (N, B, L) arrivals of the block
        self._pos = np.zeros(N, dtype=np.int64)  # (N,) current slot's index in the block
        self._counts = np.zeros((N, self._L))  # (N, L) n_l = Σ_t x_l(t) (the hindsight optimum's input)
        self._total = np.zeros(N)  # (N,) Σ_t q(x(t), y(t))
        self._arrivals = np.zeros((N, self._L), dtype=bool)  # (N, L)
        self._rows = np.arange(N)

    @property
    def dynamics(self):
        """The dynamics object of sub-env 0's instance."""
        return self._dyns[0]

    # -- instances ----------------------------------------------------------------------------
    def _set_instance(self, i: int, k: int) -> None:
        sc, pb, dyn = self._by_instance[k]
        E = pb.num_edges
        self._scenarios[i], self.problems[i], self._dyns[i] = sc, pb, dyn
        self._n_edges[i] = E
        self._edge_port[i] = self._L
        self._edge_port[i, :E] = pb.edge_port
        # copy on write once observations share them (read-only): those already returned keep their arrays
        for key, value in static_parts(pb, self._W).items():
            a = self._static[key]
            if not a.flags.writeable:
                a = self._static[key] = a.copy()
            a[i] = value

    def _share_static(self) -> None:
        """Freeze the static observation parts, shared by every observation until an instance switch."""
        for a in self._static.values():
            freeze(a)
        self._edge_present = freeze((np.arange(self._W)[None, :] < self._n_edges[:, None]).astype(np.int8))

    def _use_instance(self, i: int, sc: Scenario, k: int) -> None:
        if k not in self._by_instance:
            self._single.check_instance(sc, k)
            pb = dataclasses.replace(sc.problem, horizon=self.horizon)
            self._by_instance[k] = (sc, pb, AllocationDynamics(pb, sc.truth.rho))
        self._set_instance(i, k)
        self._share_static()

    # -- per sub-env episode state ------------------------------------------------------------
    def _refill(self, i: int) -> None:
        self._arr_block[i] = self._dyns[i].draw_arrivals(self._rngs[i]["arrivals"])  # eq. 1
        self._pos[i] = 0

    def _start_episode(self, i: int) -> None:
        self._counts[i] = 0.0
        self._total[i] = 0.0
        self._stats.reset(i)
        self._refill(i)
        self._arrivals[i] = self._arr_block[i, 0]

    def _edge_mask(self) -> np.ndarray:
        """(N, W) bool: real channels of ports with a job (padding: False)."""
        ext = np.concatenate([self._arrivals, np.zeros((self.num_envs, 1), dtype=bool)], axis=1)
        return np.take_along_axis(ext, self._edge_port, axis=1)

    def _observations(self) -> AllocationObservation:
        obs = {"arrivals": self._arrivals.astype(np.int8), "t": self._t.astype(np.float32)[:, None],
               "edge_arrival": self._edge_mask().astype(np.int8), **self._static}
        if self.max_edges is not None:
            obs["edge_present"] = self._edge_present
        obs.update(self._stats.observe(self._t))
        return cast(AllocationObservation, obs)

    def _reset_info(self, mask: np.ndarray) -> dict:
        if self.max_edges is not None:
            return with_masks({"t": self._t.copy(), "action_mask": self._edge_mask()}, mask)
        return with_masks({"t": self._t.copy()}, mask)

    # -- stepping ----------------------------------------------------------------------------
    def _fill_of(self, k: int) -> PortFill:
        """The fill rule of the port modes for instance k (``actions.PortFill``), built once."""
        if k not in self._fills:
            self._fills[k] = PortFill(self._by_instance[k][1])
        return self._fills[k]

    def _fractions(self, u: np.ndarray, stepping: np.ndarray, repair: bool) -> tuple[np.ndarray, np.ndarray]:
        """Port modes: check the request fractions (N, L[, K]) as the single env does; returns them (clipped to
        [0, 1] under ``"repair"``) and the (N,) count of entries outside [0, 1] of the stepping sub-envs."""
        N = self.num_envs
        finite = np.isfinite(u).reshape(N, -1).all(axis=1)
        if not finite.all():
            raise ValueError(f"sub-env {int(np.argmin(finite))}: action contains NaN or inf, "
                             f"expected {self._space_desc}")
        out = ((u < 0.0) | (u > 1.0)).reshape(N, -1) & stepping[:, None]
        fixed = out.sum(axis=1)
        if fixed.any():
            i = int(np.argmax(fixed > 0))
            if not repair:
                idx = [int(v) for v in np.argwhere(out[i].reshape(u.shape[1:]))[0]]
                raise ValueError(f"sub-env {i}: infeasible action: request fraction {idx} = "
                                 f"{u[(i, *idx)]:.6g} is outside [0, 1]")
            u = np.clip(u, 0.0, 1.0)
        return u, fixed

    def _step_groups(self, y: np.ndarray, stepping: np.ndarray, repair: bool, fixed: np.ndarray | None = None) -> tuple:
        """Sub-envs on different instances, padded actions (fractions of a_l^k) or port-mode fractions
        (``fixed`` given: their out-of-range counts): the kernel of each instance on its rows, as the
        single env computes them (a padded row: the padding entries are checked, then y = u[:E] · a in
        float64; a port-mode row: y = the fill rule of the instance). Raises before any state changes."""
        N, W, K, L = self.num_envs, self._W, self._K, self._L
        port_reward = np.zeros((N, L))
        gain, overhead, utilisation = np.zeros(N), np.zeros(N), np.zeros(N)
        repaired = np.zeros(N, dtype=np.int64)
        allocation = np.zeros((N, W, K))
        errors = []  # (sub-env, message)
        compact = fixed is not None
        padded = self.max_edges is not None and not compact
        if padded:
            finite = np.isfinite(y).reshape(N, -1).all(axis=1)
            if not finite.all():  # as the single env: NaN/inf anywhere, padding included
                raise ValueError(f"sub-env {int(np.argmin(finite))}: action contains NaN or inf, "
                                 f"expected {self._space_desc}")
        for k in np.unique(self._instance):
            rows = np.flatnonzero(self._instance == k)
            _, pb, dyn = self._by_instance[int(k)]
            E = pb.num_edges
            yk = y[rows]
            dropped = np.zeros(rows.size, dtype=np.int64)
            if compact:  # the port modes' fill rule (actions.PortFill), feasible by construction
                yk = self._fill_of(int(k)).fill_batch(yk, self._arrivals[rows])
                dropped = fixed[rows]  # type: ignore[index]  # set in the port modes
            elif not padded and dyn.open is not None:  # entries with a_l^k = 0 are ignored
                yk = zero_ignored(yk, dyn.open)
            if padded:
                pad = (yk[:, E:] != 0) & stepping[rows, None, None]
                dropped = pad.reshape(rows.size, -1).sum(axis=1)
                if not repair and dropped.any():
                    j = int(np.argmax(dropped > 0))
                    e, kk = map(int, np.argwhere(pad[j])[0])
                    errors.append((int(rows[j]), f"infeasible action: entry [{E + e}, {kk}] is padding (this instance "
                                                 f"has {E} channels, max_edges={W}); padding entries must be 0"))
                up = np.asarray(pb.edge_demand, dtype=np.float64)
                yk = np.ascontiguousarray(yk[:, :E].astype(np.float64) * up[None])
            if rows.size <= _SERIAL_ROWS:  # a few rows: the single env's serial kernel (a parallel launch costs more)
                for j, i in enumerate(rows):
                    if not stepping[i]:
                        continue
                    try:
                        res = dyn.step(np.ascontiguousarray(yk[j], dtype=np.float64), self._arrivals[i], self.infeasible)
                    except ValueError as exc:
                        errors.append((int(i), str(exc)))
                        continue
                    port_reward[i] = res.port_reward
                    gain[i], overhead[i], utilisation[i] = res.gain, res.overhead, res.utilisation
                    repaired[i] = res.repaired + dropped[j]
                    allocation[i, :E] = res.allocation
                continue
            out = np.empty((rows.size, E, K))
            res = dyn.step_batch(np.ascontiguousarray(yk), self._arrivals[rows], stepping[rows], repair, out)
            if res.nonfinite.any():
                errors.append((int(rows[int(np.argmax(res.nonfinite > 0))]),
                               f"action contains NaN or inf, expected {self._space_desc}"))
                continue
            rep = np.where(stepping[rows], res.bad_box + res.bad_cap, 0)
            alloc = yk
            if rep.any():
                if not repair:
                    j = int(np.argmax(rep > 0))
                    errors.append((int(rows[j]), dyn.infeasible_message(yk[j], self._arrivals[rows[j]])))
                    continue
                if (huge := first_too_large(yk, np.flatnonzero(rep))) is not None:  # beyond what "repair" projects
                    errors.append((int(rows[huge[0]]), huge[1]))
                    continue
                kept = rep == 0
                out[kept] = yk[kept]
                alloc = out
            port_reward[rows] = res.port_reward
            gain[rows], overhead[rows], utilisation[rows] = res.gain, res.overhead, res.utilisation
            repaired[rows] = rep + dropped
            allocation[rows, :E] = alloc
        if errors:
            i, msg = min(errors)  # type: ignore[assignment]  # an int here
            raise ValueError(f"sub-env {i}: {msg}")
        return port_reward, gain, overhead, utilisation, repaired, allocation

    def _as_actions(self, actions: Any) -> np.ndarray:
        shape = self._act_shape
        if isinstance(actions, np.ndarray) and actions.dtype in (np.float32, np.float64) and actions.shape == shape:
            return np.ascontiguousarray(actions)  # no copy for a C-contiguous float32/float64 batch
        try:
            raw = np.asarray(actions)
        except Exception:  # noqa: BLE001 - ragged lists and exotic objects
            raise ValueError(f"actions cannot be read as numbers, expected {self._space_desc} per sub-env") from None
        if raw.dtype.kind not in "biuf":  # like the single env: no complex, strings, datetimes or objects
            raise ValueError(f"actions have dtype {raw.dtype}, expected real numbers ({self._space_desc} per sub-env)")
        y = raw.astype(np.float64, copy=False)
        if y.shape != shape:
            raise ValueError(f"actions have shape {y.shape}, expected {shape} (one row per sub-env, each "
                             f"{self._space_desc})")
        return np.ascontiguousarray(y)

    def step(self, actions: npt.ArrayLike) -> VectorStepReturn[AllocationObservation]:
        self._require_reset()
        y = self._as_actions(actions)
        N = self.num_envs
        stepping = ~self._autoreset  # (N,) sub-envs that step (the others reset now)
        repair = self.infeasible == "repair"
        fixed = None
        if self.action_mode != "channel":  # request fractions, completed per instance by actions.PortFill
            y, fixed = self._fractions(y, stepping, repair)
        one = all(d is self._dyns[0] for d in self._dyns)
        if self.max_edges is None and one:  # one instance: one kernel call
            if fixed is not None:
                y = self._fill_of(int(self._instance[0])).fill_batch(y, self._arrivals)  # (N, E, K) in Y
            elif self._dyns[0].open is not None:  # entries with a_l^k = 0 are ignored (0 · NaN stays NaN)
                y = zero_ignored(y, self._dyns[0].open)
            out = self._repair_buf  # (N, E, K) receives the repaired rows; handed out (and replaced) only if used
            res = self._dyns[0].step_batch(y, self._arrivals, stepping, repair, out)  # eqs. 3–5, Π_Y, per sub-env
            nonfinite, bad_box, bad_cap, port_reward = res.nonfinite, res.bad_box, res.bad_cap, res.port_reward
            gain, overhead, utilisation = res.gain, res.overhead, res.utilisation
            if nonfinite.any():
                raise ValueError(f"sub-env {int(np.argmax(nonfinite > 0))}: action contains NaN or inf, "
                                 f"expected {self._space_desc}")
            repaired = np.where(stepping, bad_box + bad_cap, 0)  # (N,) violated constraints
            allocation = y
            if repaired.any():
                bad = np.flatnonzero(repaired)
                if not repair:  # "raise"
                    i = int(bad[0])
                    raise ValueError(f"sub-env {i}: " + self._dyns[i].infeasible_message(y[i], self._arrivals[i]))
                huge = first_too_large(y, bad)  # beyond the range "repair" projects: refused before any state changes
                if huge:
                    raise ValueError(f"sub-env {huge[0]}: {huge[1]}")
                # The kernel projected the repaired rows into ``out`` (eqs. 11–13) and evaluated eq. 5 there.
                allocation = out
                self._repair_buf = np.empty_like(out)  # the caller keeps ``allocation``: never write into it again
                kept = repaired == 0
                if kept.any():
                    allocation[kept] = y[kept]
            if fixed is not None:  # port modes: fractions outside [0, 1] clipped before the fill
                repaired = repaired + fixed
        else:
            port_reward, gain, overhead, utilisation, repaired, allocation = self._step_groups(y, stepping, repair, fixed)
        # The state changes only from here on.
        reward = port_reward.sum(axis=1)  # (N,) eq. 5 (rows of the autoresetting sub-envs are 0)
        metrics = {"expected_reward": reward.copy(), "gain": gain, "overhead": overhead,
                   "repaired": repaired, "utilisation": utilisation}
        np.add(self._counts, self._arrivals, out=self._counts, where=stepping[:, None])
        self._stats.update(port_reward, self._arrivals, allocation, stepping)
        self._total += reward
        self._t += stepping
        truncated = stepping & (self._t >= self.horizon)
        terminated = np.zeros(N, dtype=bool)
        if self.oracle and truncated.any():
            from clustergym.envs.multiserver.allocation.oracle import best_static_allocation

            best, upper, regret = np.zeros(N), np.zeros(N), np.zeros(N)
            for i in np.flatnonzero(truncated):  # type: ignore[assignment]  # a numpy int here
                opt = best_static_allocation(self.problems[i], self._counts[i])
                best[i], upper[i], regret[i] = opt.value, opt.upper_bound, opt.value - self._total[i]  # eq. 6
            episode = with_masks({"episode_best_static": best, "episode_best_static_upper": upper,
                                  "episode_regret": regret}, truncated)
        else:
            episode = {}
        self._pos += stepping
        for i in np.flatnonzero(self._pos >= ARRIVAL_BLOCK):  # type: ignore[assignment]  # a numpy int here
            self._refill(int(i))
        self._autoreset_envs()  # NEXT_STEP: sub-envs that ended at the last step start over now
        self._arrivals = self._arr_block[self._rows, self._pos]
        self._autoreset = truncated | terminated
        info = with_masks({"t": self._t.copy()}, np.ones(N, dtype=bool))
        if self.max_edges is not None:
            info.update(with_masks({"action_mask": self._edge_mask()}, np.ones(N, dtype=bool)))
        info.update(with_masks({"feedback": {"allocation": allocation, "port_reward": port_reward},
                                "metrics": metrics}, stepping))
        info["metrics"].update(episode)
        return self._observations(), reward, terminated, truncated, info
