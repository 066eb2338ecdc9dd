"""P2 environment: MultiServerAllocation-v0 (OGASched paper, ogasched.md §2)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from clustergym.core.scenario import Scenario, check_choice, check_int, child_generators
from clustergym.core.env import ClusterEnv, InstanceSource, StepReturn, check_maxima
from clustergym.core.metrics import EPISODE, SLOT, Metric
from clustergym.envs.multiserver.allocation.actions import ACTION_MODES, PortFill, channel_high, zero_ignored
from clustergym.envs.multiserver.allocation.dynamics import AllocationDynamics
from clustergym.envs.multiserver.allocation.scenario import ALLOCATION_SCENARIOS, make_allocation_scenario
from clustergym.envs.multiserver.allocation.learner_stats import AllocationStats, learner_spaces, static_parts
from clustergym.envs.multiserver.allocation.types import AllocationFeedback, AllocationObservation

OBS_MODES = ("full", "compact")
# Observation entries that are constant over an instance (the public problem data; the padding's channels):
# obs="compact" leaves them out of every step's observation and gives them once, in reset's
# info["instance_constants"] (and in env.unwrapped.problem).
INSTANCE_CONSTANTS = ("edge_demand", "edge_alpha", "edge_utility", "beta", "edge_present")

__all__ = ["MultiServerAllocationEnv", "instance_sizes"]

_ONE = np.ones(1, dtype=bool)  # (1,) "stepping" of the single env's statistics


def instance_sizes(problem) -> dict[str, int]:
    """The natural sizes of a P2 instance, keyed by the padding kwarg that bounds them (``FamilySpec.sizes``)."""
    return {"max_edges": int(problem.num_edges)}


class MultiServerAllocationEnv(ClusterEnv[AllocationObservation, np.ndarray]):
    r"""Fractional allocation of K device types to multi-server jobs on a bipartite graph.

    ## Description
    The OGASched paper's model (ogasched.md §2). Ports l (job types) connect to servers r through
    channels (l, r) ∈ E. At the start of every slot, port l yields a job with hidden probability ρ_l
    (x_l(t) ∈ {0, 1}, eq. 1) and the arrivals are observed. The scheduler then chooses a fractional
    allocation y_(l,r)^k (eq. 2) with 0 <= y <= a_l^k (eq. 3) and Σ_{l∈L_r} y_(l,r)^k <= c_r^k
    (eq. 4). Only ports with a job earn reward; an allocation to an idle port is feasible but earns
    nothing (Y does not depend on x, as in the paper).

    ## Action Space
    ``action_mode="channel"`` (default; the paper's decision, what OGASched outputs):
    ``Box(0, a, shape=(|E|, K), float32)``: row e is channel (problem.edge_port[e],
    problem.edge_server[e]) (edges ordered by (port, server)); column k a device type; values in
    device units, bounded by a_l^k. Where port l does not request type k (a_l^k = 0) the entry has
    nothing to decide: its bound is [0, 1] instead of a zero-width [0, 0], and the env ignores its
    value (executed as 0, never counted as repaired; NaN/inf still raise); the mask of decided
    entries is ``problem.edge_demand > 0``. So ``gymnasium.wrappers.RescaleAction`` (or
    ``clustergym.learning.wrappers.RescaleBox``) rescales the action to [-1, 1].
    With ``max_edges=P`` (padding, below): ``Box(0, 1, shape=(P, K), float32)``, the allocation as a
    **fraction of the cap**: y_e^k = u_e^k a_l^k for the instance's channels e < |E| (the bounds then
    do not depend on the instance); rows |E|..P−1 are padding, never executed nor rewarded (0 is
    accepted; a non-zero entry raises under ``infeasible="raise"`` and is dropped and counted in
    ``metrics["repaired"]`` under ``"repair"``); ``info["action_mask"]`` (P,) marks the channels of
    ports with a job (padding: False). ``action_bounds()`` is then [0, 1].

    Compact modes (``allocation/actions.py``), completed by the env with one stated rule:
    ``action_mode="port"``: ``Box(0, 1, shape=(L,), float32)``, a request fraction u_l per port;
    ``action_mode="port_device"``: ``Box(0, 1, shape=(L, K), float32)``, a fraction u_l^k per port
    and device type. **Fill rule:** every channel (l, r) of a port with a job requests
    d_(l,r)^k = u_l^k a_l^k (u_l^k = u_l in ``"port"`` mode; ports without a job request nothing);
    on every (r, k) the ports of L_r are served in DRF order (ascending dominant share
    s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k, ties by port index: public problem data) and each takes
    min(d_(l,r)^k, what is left of c_r^k). The allocation lies in Y (eqs. 3–4) by construction; the
    all-ones action is DRF's allocation exactly (the ``drf`` baseline), smaller fractions leave
    capacity to the ports served later. Fractions outside [0, 1] are clipped and counted in
    ``metrics["repaired"]`` under ``"repair"``, a ValueError under ``"raise"``. These action spaces do
    not depend on the instance's channels nor on ``max_edges`` (the observation does: switching
    instances needs ``max_edges`` as in the channel mode). ``problem.action_mode`` carries the mode.

    ## Observation Space
    P = |E| (or ``max_edges`` when padded). Besides the slot's arrivals, the observation carries what a
    learner needs (``info`` is diagnostics, never required): the last slot's feedback, its empirical
    statistics and the public problem data OGASched's gradient reads (eqs. 9–10, 27).

    | key              | space                         | meaning                                        |
    |------------------|-------------------------------|------------------------------------------------|
    | arrivals         | MultiBinary(L)                | x_l(t): port l has a job this slot             |
    | t                | Box(0, T, (1,), f32)          | slots elapsed                                   |
    | edge_arrival     | MultiBinary(P)                | x_{l(e)}(t), the port's job flag per channel   |
    | edge_present     | MultiBinary(P)                | padded only: 1 for the instance's channels e < |E| |
    | edge_demand      | Box(0, inf, (P, K), f32)      | a_l^k / c_r^k of channel (l, r) (0 where c_r^k = 0 and on padding) |
    | edge_alpha       | Box(0, inf, (P, K), f32)      | α_r^k of the channel's server (eq. 27; 0 on padding) |
    | edge_utility     | MultiDiscrete(4, (P·K,))      | its utility family (eq. 27): 0 linear, 1 log, 2 reciprocal, 3 poly; row-major (entry p·K + k) |
    | beta             | Box(0, inf, (K,), f32)        | β_k, the overhead weights of eq. 5             |
    | arrival_share    | Box(0, 1, (L,), f32)          | share of the slots port l had a job (estimates ρ_l) |
    | port_reward_mean | Box(-inf, inf, (L,), f32)     | mean realised x_l q_l over the slots port l had a job |
    | last_port_reward | Box(-inf, inf, (L,), f32)     | last slot's x_l q_l (``feedback["port_reward"]``) |
    | last_allocation  | Box(0, inf, (P, K), f32)      | last slot's executed y in device units (``feedback["allocation"]``) |

    The statistics are updated from the feedback alone (``allocation/learner_stats.py``, shared with the vector
    and PettingZoo envs); at t = 0 they are 0. The |E| of the random graph varies by instance
    (``scenario_seed``), L, R and K do not, and the unpadded action bounds a_l^k differ in every
    instance: without padding an env cannot switch to another instance; with ``max_edges`` the spaces
    depend on P alone. ``gymnasium.wrappers.FlattenObservation`` (or
    ``clustergym.learning.wrappers.FlattenWithStats``) gives the flat vector a standard learner takes.
    ``obs="compact"`` leaves out the entries constant over an instance (``edge_demand``, ``edge_alpha``,
    ``edge_utility``, ``beta``, ``edge_present``: about 11,300 of the 13,549 flat inputs of the default instance)
    and gives them once, in ``reset``'s ``info["instance_constants"]``; the dynamics and rewards are the same.

    ## Instances
    ``reset(seed=s, options={"scenario_seed": k})`` switches to instance k: the episode equals that
    of ``gym.make(..., scenario_seed=k)`` (same other kwargs) reset with ``seed=s``; ``problem`` and
    ``scenario`` are then instance k's. ``instances=range(...)`` draws an instance at each reset
    without that option, from a generator derived from the reset seed (never from ``np_random``):
    same seed, same instance, same episode. An instance that does not fit the spaces is a ValueError
    naming ``max_edges``; other option keys are a ValueError.

    ## Rewards
    Eq. 5 with the nice setup of eq. 7, utilities of eq. 27 (see ``allocation_scenario``):

    $$q(x, y) = \sum_l x_l \Big[\sum_k \sum_{r \in R_l} f_r^k\big(y_{(l,r)}^k\big)
    - \max_k \beta_k \sum_{r \in R_l} y_{(l,r)}^k\Big]$$

    ## Infeasible actions
    ``infeasible="repair"`` (default): an action outside Y (beyond a tolerance of 1e-6 device units)
    is replaced by its exact Euclidean projection Π_Y (the routine OGASched uses, ``projection.py``);
    ``info["metrics"]["repaired"]`` counts the violated constraints (entries outside [0, a] plus
    (r, k) pairs over capacity). ``infeasible="raise"``: ValueError naming the constraint (eq. 3 or
    eq. 4), where, and by how much. Wrong shape, NaN/inf: always ValueError. An entry beyond ±1e9 device
    units (no a_l^k is larger; beyond it the projection's arithmetic loses the allocation to rounding) is a
    ValueError under ``"repair"`` too; a request fraction of the port modes is clipped to [0, 1] whatever its size.

    ## Info
    ``feedback`` (what a real scheduler sees): ``allocation`` (the executed y, (E, K)) and
    ``port_reward`` ((L,) x_l q_l). ``metrics`` (evaluation only): ``expected_reward`` (equal to the
    reward: q is deterministic given x and y), ``gain`` and ``overhead`` (the two parts of eq. 5 over
    ports with a job, Fig. 6), ``repaired``, ``utilisation`` (share of all device units allocated to
    ports with a job, averaged over device types that exist). At the last slot, with ``oracle=True`` (off
    by default; ``clustergym run`` / ``clustergym.evaluate`` turn it on for a score or regret,
    ``score_env_kwargs``):
    ``episode_best_static`` = Q(y*) for the best static allocation in hindsight
    y* = argmax_{y∈Y} Σ_t q(x(t), y) (``allocation/oracle.py``, relative tolerance 1e-6),
    ``episode_best_static_upper`` (its certified upper bound) and ``episode_regret`` = Q(y*) −
    Σ_t q(x(t), y(t)) (eq. 6 for the realised trajectory).

    ## Starting State / Episode End
    ``reset(seed)`` seeds a child generator for arrivals, so every agent sees the same arrivals for
    the same seed (common random numbers). The episode is truncated after ``horizon`` slots; ``step``
    then raises ``ResetNeeded`` (a ``RuntimeError``) until ``reset``.

    ## Arguments
    ``scenario`` ("paper", "fig2", "large", "toy", "alibaba-v2023" or a Scenario), ``scenario_seed``
    (default 0), ``horizon`` (default 2000; public: ``env.problem.horizon`` carries it, so an agent
    can use T, e.g. OGASched's eq. 26 step), ``oracle`` (default False; True: the hindsight optimum
    at episode end), ``infeasible``, ``render_mode`` ("ansi", "rgb_array" or "human": the episode
    viewer), and scenario parameters:
    ``setting`` ("paper", default: Table 1 counted in devices; "authors-code": the authors' code's
    units, β ∈ [0.01, 0.1], reciprocal 1/(3α) − 1/(y + 3α), contention 4 (their 0.4);
    "table1-in-code-units": the earlier default mixture), ``units`` ("device" or "code", default
    the setting's), ``reciprocal`` ("paper" or "code", default the setting's),
    ``num_ports``, ``num_servers``, ``num_device_types``, ``rho``, ``contention``, ``density``,
    ``utility``, ``alpha_low``, ``alpha_high``, ``beta_low``, ``beta_high`` (see the scenario module);
    ``instances`` (seeds drawn at each reset, default None), ``max_edges`` (padding, default None) and
    ``action_mode`` (``"channel"``, default, ``"port"`` or ``"port_device"``; Action Space above).

    ## Version History
    * v0: initial version. Later in v0: the default device units became ``units="paper-code"``
      (the authors' code's ranges; ``units="device"`` gives the earlier instances bit for bit), and
      ``problem.horizon`` was added. Later: ``setting`` names each setting after its source and
      the default became ``setting="paper"`` (the earlier ``units="device"`` instances bit for bit);
      the earlier default ``units="paper-code"`` is ``setting="table1-in-code-units"`` (bit for bit).
    * v0, later: ``reset(options={"scenario_seed": k})``, ``instances``, ``max_edges`` padding
      (fractional action); unknown reset options raise. Later: ``step`` after the end raises.
    * v0, later: the channel action's entries with a_l^k = 0 are bounded by [0, 1] and ignored
      (they were zero-width [0, 0] boxes); ``action_mode`` (``"port"``, ``"port_device"``). Every
      earlier action gives the same rewards.
    * v0, later: the observation carries the statistics, the last slot's feedback, ``edge_arrival``,
      ``edge_demand`` (padded or not), ``edge_alpha``, ``edge_utility`` and ``beta``; ``oracle``
      defaults to False. The flat vector of earlier versions is ``clustergym.learning.pipeline``'s
      ``"legacy"`` layout (same values).
    """

    family = "multiserver-allocation"
    action_space: spaces.Box
    _block_start: int  # the slot the current arrival block starts at (set by reset)
    _arr_block: np.ndarray  # (B, L) the arrival block (set by reset)
    # info["metrics"] keys and their kind (clustergym/core/metrics.py); the vector env reuses it.
    metrics_spec = {
        "expected_reward": Metric(SLOT, "q(x(t), y(t)), equal to the reward (eq. 5 with eq. 7)"),
        "gain": Metric(SLOT, "Σ_l x_l Σ_k Σ_r f_r^k(y), the gain part of eq. 5 (Fig. 6)"),
        "overhead": Metric(SLOT, "Σ_l x_l max_k β_k Σ_r y, the overhead part of eq. 5 (Fig. 6)"),
        "repaired": Metric(SLOT, "violated constraints of eqs. 3–4 removed by the projection", total=True),
        "utilisation": Metric(SLOT, "share of device units allocated to ports with a job, mean over types"),
        "episode_best_static": Metric(EPISODE, "Q(y*), the best static allocation in hindsight (eq. 6; oracle=True)"),
        "episode_best_static_upper": Metric(EPISODE, "certified upper bound on Q(y*) (oracle=True)"),
        "episode_regret": Metric(EPISODE, "Q(y*) − Σ_t q(x(t), y(t)) (eq. 6; oracle=True)"),
    }

    pad_kwargs = ("max_edges",)
    score_env_kwargs = {"oracle": True}  # the hindsight optimum, the bound of a score (clustergym.evaluate)
    obs_modes = OBS_MODES  # values of the obs kwarg: "full" (default) or "compact" (no instance constants)
    action_modes = ACTION_MODES  # values of the action_mode kwarg, the default first (allocation/actions.py)

    def __init__(self, scenario: str | Scenario = "paper", *, scenario_seed: int = 0, horizon: int = 2000,
                 oracle: bool = False, infeasible: str = "repair", render_mode: str | None = None,
                 instances: Any = None, max_edges: int | None = None, action_mode: str = "channel", obs: str = "full",
                 **params: Any):
        super().__init__(horizon=horizon, infeasible=infeasible, render_mode=render_mode, oracle=oracle)
        self.action_mode = check_choice("action_mode", action_mode, ACTION_MODES)
        self.obs_mode = check_choice("obs", obs, OBS_MODES)
        self.max_edges = None if max_edges is None else check_int("max_edges", max_edges, 1, 10_000_000)
        self._source = InstanceSource(scenario, params, make_allocation_scenario, ALLOCATION_SCENARIOS, scenario_seed,
                                      instances, self.pad_kwargs)
        sc = self._source.first
        self.action_space, self.observation_space = self._spaces(sc.problem, self.scenario_seed)
        self._load(sc)
        self._t = 0
        self._rngs = None

    def _spaces(self, pb, k) -> tuple:
        """(action space, observation space) of problem ``pb`` in this env (padded to ``max_edges`` if set)."""
        L, K = pb.num_ports, pb.num_device_types
        obs = {"arrivals": spaces.MultiBinary(L), "t": spaces.Box(0.0, float(self.horizon), shape=(1,), dtype=np.float32)}
        if self.action_mode != "channel":  # request fractions per port (× device type): allocation/actions.py
            act = spaces.Box(0.0, 1.0, shape=(L,) if self.action_mode == "port" else (L, K), dtype=np.float32)
        elif self.max_edges is None:  # [0, a_l^k]; 1 where a_l^k = 0 (ignored entries, never zero-width)
            act = spaces.Box(low=0.0, high=channel_high(pb).astype(np.float32), shape=(pb.num_edges, K),
                             dtype=np.float32)
        if self.max_edges is None:
            obs.update(edge_arrival=spaces.MultiBinary(pb.num_edges), **learner_spaces(pb.num_edges, L, K))
            return act, spaces.Dict(self._shown(obs))
        check_maxima(instance_sizes(pb), {"max_edges": self.max_edges}, f"instance scenario_seed={k}")
        E = self.max_edges
        obs.update(edge_present=spaces.MultiBinary(E), edge_arrival=spaces.MultiBinary(E), **learner_spaces(E, L, K))
        if self.action_mode == "channel":
            act = spaces.Box(0.0, 1.0, shape=(E, K), dtype=np.float32)
        return act, spaces.Dict(self._shown(obs))

    def _shown(self, obs: dict) -> dict:
        """The observation's entries in this ``obs`` mode: ``"compact"`` leaves out the instance's constants."""
        return obs if self.obs_mode == "full" else {k: v for k, v in obs.items() if k not in INSTANCE_CONSTANTS}

    def _load(self, sc: Scenario) -> None:
        """Take the problem-derived state of instance ``sc`` (its spaces were checked)."""
        self.scenario = sc
        # The horizon T is public (the episode is truncated after T slots): agents read it from the
        # problem (OGASched's eq. 26 step needs T).
        pb = dataclasses.replace(sc.problem, horizon=self.horizon, action_mode=self.action_mode)
        self.problem = pb
        self._E, self._L, self._K = pb.num_edges, pb.num_ports, pb.num_device_types
        # Arrivals, the check and repair of eqs. 3–4 and eq. 5: one object, shared with the vector and
        # PettingZoo envs (allocation/dynamics.py).
        self.dynamics = dyn = AllocationDynamics(pb, sc.truth.rho)
        self.layout = dyn.layout
        self._A = self._E if self.max_edges is None else self.max_edges  # channel rows: |E|, or max_edges when padded
        self._fill = None  # the completion rule of the compact modes
        self._open = None  # (E, K) float 1/0: entries the channel mode executes (None: all of them)
        if self.action_mode != "channel":
            self._fill = PortFill(pb)
            shape = self.action_space.shape
            self.space_desc = self._space_desc = (f"Box(0, 1, shape={shape}): request fraction of a_l^k per port"
                                                  + (" and device type" if len(shape) == 2 else ""))
        else:
            self.space_desc = self._space_desc = (
                dyn.space_desc if self.max_edges is None else
                f"Box(0, 1, shape=({self._A}, {self._K})): fraction of a_l^k per channel (rows "
                f"{self._E}..{self._A - 1} are padding: 0)")
            if self.max_edges is None:
                self._open = dyn.open
        # static observation parts (public problem data; allocation/learner_stats.py), copied into each observation
        self._static = static_parts(pb, self._A)
        self._stats = AllocationStats(1, self._A, self._L, self._K)  # the learner's statistics
        self._t_arr = np.zeros(1, dtype=np.int64)  # (1,) t, as the statistics read it
        if self.max_edges is not None:
            self._upper = np.ascontiguousarray(pb.edge_demand, dtype=np.float64)  # (E, K) a of eq. 3
            self._edge_present = np.zeros(self._A, dtype=np.int8)
            self._edge_present[:self._E] = 1

    def _instance_sizes(self, problem) -> dict:
        return instance_sizes(problem)

    # -- randomness ---------------------------------------------------------------------------
    def _slot(self) -> np.ndarray:
        i = self._t - self._block_start
        if i >= self._arr_block.shape[0]:  # next block of arrivals (eq. 1)
            assert self._rngs is not None, "reset() draws the generators first"
            self._arr_block = self.dynamics.draw_arrivals(self._rngs["arrivals"])
            self._block_start = self._t
            i = 0
        return self._arr_block[i]

    # -- gymnasium API ------------------------------------------------------------------------
    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Exact float64 bounds [0, a_l^k] of eq. 3 (the float32 space bounds can round a_l^k up by
        more than the feasibility tolerance; 1 on the ignored entries where a_l^k = 0); [0, 1]
        everywhere when padded (fractions of a_l^k) and in the port modes (request fractions)."""
        if self.action_mode != "channel" or self.max_edges is not None:
            shape = self.action_space.shape
            return np.zeros(shape), np.ones(shape)
        hi = channel_high(self.problem)
        return np.zeros_like(hi), hi

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[AllocationObservation, dict[str, Any]]:
        super().reset(seed=seed)
        self._begin_instance(seed, options)  # options["scenario_seed"] or a draw from `instances`
        self._rngs = child_generators(self.np_random, ("arrivals",))
        self._t = 0
        self._counts = np.zeros(self._L)  # n_l = Σ_t x_l(t), all the hindsight optimum needs
        self._total = 0.0
        self._arr_block = self.dynamics.draw_arrivals(self._rngs["arrivals"])
        self._block_start = 0
        self._arrivals = self._slot()
        self._last_y = np.zeros((self._E, self._K))
        self._stats.reset(0)
        self._viewer_reset(problem=self.problem)
        return self._obs(), self._reset_info()

    def _reset_info(self) -> dict:
        info: dict = {"t": 0} if self.max_edges is None else {"t": 0, "action_mask": self._edge_mask()}
        if self.obs_mode == "compact":  # the instance's constants, once per episode
            info["instance_constants"] = {k: v.copy() for k, v in self._static.items()}
            if self.max_edges is not None:
                info["instance_constants"]["edge_present"] = self._edge_present.copy()
        return info

    def _edge_mask(self) -> np.ndarray:
        """(max_edges,) bool: real channels of ports with a job (padded env only; padding False)."""
        m = np.zeros(self._A, dtype=bool)
        m[:self._E] = self._arrivals[self.problem.edge_port]
        return m

    def _obs(self) -> AllocationObservation:
        obs: dict[str, np.ndarray] = {"arrivals": self._arrivals.astype(np.int8), "t": np.array([self._t], dtype=np.float32)}
        compact = self.obs_mode == "compact"
        if self.max_edges is not None:
            obs["edge_arrival"] = self._edge_mask().astype(np.int8)
            if not compact:
                obs["edge_present"] = self._edge_present.copy()
        else:
            obs["edge_arrival"] = self._arrivals[self.problem.edge_port].astype(np.int8)
        for key, value in ({} if compact else self._static).items():
            obs[key] = value.copy()
        self._t_arr[0] = self._t
        obs.update(self._stats.observe(self._t_arr, squeeze=True))
        return cast(AllocationObservation, obs)

    def _unpad(self, action: Any) -> tuple[np.ndarray, int]:
        """Padded env: the fractions (max_edges, K) -> y (E, K) in device units and the padding entries dropped."""
        u = self._as_float_action(action, (self._A, self._K), self._space_desc)
        pad = u[self._E:]
        dropped = 0
        if pad.any():
            if self.infeasible == "raise":
                e, k = map(int, np.argwhere(pad != 0)[0])
                raise ValueError(f"infeasible action: entry [{self._E + e}, {k}] is padding (this instance has "
                                 f"{self._E} channels, max_edges={self._A}); padding entries must be 0")
            dropped = int(np.count_nonzero(pad))
        return np.ascontiguousarray(u[:self._E] * self._upper), dropped

    def _complete(self, action: Any) -> tuple[np.ndarray, int]:
        """Port modes: the request fractions -> y (E, K) by the fill rule of ``actions.PortFill``, and the
        number of fractions outside [0, 1] (clipped under ``"repair"``, a ValueError under ``"raise"``)."""
        u = self._as_float_action(action, self.action_space.shape, self._space_desc)
        out = (u < 0.0) | (u > 1.0)
        n = 0
        if out.any():
            idx = tuple(map(int, np.argwhere(out)[0]))
            if self.infeasible == "raise":
                raise ValueError(f"infeasible action: request fraction {list(idx)} = {u[idx]:.6g} is outside [0, 1]")
            n = int(out.sum())
            u = np.clip(u, 0.0, 1.0)
        assert self._fill is not None, "the port modes build their fill rule"
        return self._fill.fill(u, self._arrivals), n

    def step(self, action: npt.ArrayLike) -> StepReturn[AllocationObservation]:
        if self._episode_over:
            raise self._over()
        if self._rngs is None:
            raise RuntimeError("call reset() before step()")
        pad_dropped = 0
        if self._fill is not None:
            y, pad_dropped = self._complete(action)
        elif self.max_edges is not None:
            y, pad_dropped = self._unpad(action)
        elif isinstance(action, np.ndarray) and action.dtype == np.float64 and action.shape == (self._E, self._K):
            y = np.ascontiguousarray(action)
        else:
            y = np.ascontiguousarray(self._as_float_action(action, (self._E, self._K), self._space_desc))
        if self._open is not None:  # entries with a_l^k = 0 are ignored (0 · NaN stays NaN: still refused)
            y = zero_ignored(y, self._open)
        x = self._arrivals
        # eqs. 3–4 (check, then repair or raise) and eq. 5: a SlotResult, unpacked in its field order
        y, port_reward, _, gain, overhead, util, repaired = self.dynamics.step(y, x, self.infeasible)
        reward = float(port_reward.sum())
        metrics = {"expected_reward": reward, "gain": gain, "overhead": overhead, "repaired": repaired + pad_dropped,
                   "utilisation": util}
        self._counts += x
        self._total += reward
        if self._viewer is not None:  # the episode viewer's history (picture render modes only)
            self._viewer.record(allocation=y, arrivals=x, reward=reward, gain=gain, overhead=overhead)
        self._last_y = y
        self._t += 1
        truncated = self._t >= self.horizon
        if truncated and self.oracle:
            from clustergym.envs.multiserver.allocation.oracle import best_static_allocation

            opt = best_static_allocation(self.problem, self._counts)
            metrics.update(episode_best_static=opt.value, episode_best_static_upper=opt.upper_bound,
                           episode_regret=opt.value - self._total)  # eq. 6
        if self.max_edges is not None:
            y_pad = np.zeros((self._A, self._K))
            y_pad[:self._E] = y
        else:
            y_pad = y
        self._stats.update(port_reward[None], x[None], y_pad[None], _ONE)
        self._arrivals = self._slot()
        feedback: AllocationFeedback = {"allocation": y_pad, "port_reward": port_reward}  # y_pad is y unpadded
        if self.max_edges is not None:
            info = {"feedback": feedback, "metrics": metrics, "t": self._t, "action_mask": self._edge_mask()}
        else:
            info = {"feedback": feedback, "metrics": metrics, "t": self._t}
        self._episode_over = truncated
        return self._obs(), reward, False, truncated, info

    # -- rendering ----------------------------------------------------------------------------
    def _render_ansi(self) -> str:
        from clustergym.envs.multiserver.allocation.render import render_ansi

        return render_ansi(self, self._t, self._arrivals, self._last_y)

    def _make_viewer(self):
        from clustergym.envs.multiserver.allocation.render import AllocationViewer

        return AllocationViewer(self.render_mode, self.horizon, self.metadata["render_fps"])
