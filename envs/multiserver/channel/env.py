"""P1 environment: MultiServerChannel-v0 (ESDP paper, esdp.md §2)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from clustergym.core.scenario import Scenario, check_int, child_generators, freeze
from clustergym.core.env import ClusterEnv, InstanceSource, StepReturn, check_maxima
from clustergym.core.metrics import CUMULATIVE, SLOT, Metric
from clustergym.envs.multiserver.channel.dynamics import BLOCK, OK, channel_slot, draw_block, infeasible_message
from clustergym.envs.multiserver.channel.scenario import CHANNEL_SCENARIOS, make_channel_scenario
from clustergym.envs.multiserver.channel.oracle import knapsack_value
from clustergym.envs.multiserver.channel.learner_stats import ChannelStats, stats_spaces
from clustergym.envs.multiserver.channel.types import ChannelFeedback, ChannelObservation

__all__ = ["MultiServerChannelEnv", "instance_sizes"]


def instance_sizes(problem) -> dict[str, int]:
    """The natural sizes of a P1 instance, keyed by the padding kwarg that bounds them (``FamilySpec.sizes``)."""
    return {"max_edges": int(problem.num_edges)}

_ONE = np.ones(1, dtype=bool)  # (1,) "stepping" of the single env's statistics
_BLOCK = BLOCK  # slots of arrivals/utilities drawn at once (same values as drawing slot by slot)


class MultiServerChannelEnv(ClusterEnv[ChannelObservation, np.ndarray]):
    r"""Multi-server jobs on a bipartite job-type/server graph with stochastic channel utilities.

    ## Description
    The ESDP paper's model (esdp.md §2). Ports l (job types) connect to servers r through channels
    e = (l, r) ∈ E. At the start of every slot, port l yields a job with hidden probability ρ_l.
    The scheduler selects channels x ∈ {0,1}^|E| (eq. 1); a job may use several channels at once.
    Selected channels must belong to ports with a job (eq. 4) and fit the cluster capacity
    Σ_e a_k^e x_e <= c_k for every device type k (eq. 2). A used channel yields the net utility
    Z̃_e(t) ∈ [0, 1], random with hidden mean ṽ_e (eq. 7; see ``channel_scenario`` for the law).
    The block of utilities of every channel is drawn each slot whether used or not, so the
    realised values do not depend on the agent.

    ## Action Space
    ``MultiBinary(|E|)``: x_e = 1 selects channel e (edges ordered by (port, server), see
    ``problem.edge_port`` / ``problem.edge_server``). ``info["action_mask"]`` (|E|,) marks the
    channels of ports with a job; ``action_masks()`` gives the (2|E|,) mask sb3-contrib expects.
    With ``max_edges=P`` (padding, below): ``MultiBinary(P)``; entries |E|..P−1 are padding, always
    masked out, never executed nor rewarded (0 is accepted; a 1 raises under ``infeasible="raise"``
    and is dropped and counted in ``metrics["repaired"]`` under ``"repair"``).

    ## Observation Space
    P = |E| (or ``max_edges`` when padded). Besides the slot's arrivals, the observation carries what a
    learner needs (``info`` is diagnostics, never required): the last slot's feedback, its empirical
    statistics and the public problem data ESDP reads (demands relative to the capacity, eq. 2).

    | key           | space                     | meaning                                              |
    |---------------|---------------------------|------------------------------------------------------|
    | arrivals      | MultiBinary(L)            | 1_l(t): port l has a job this slot                   |
    | t             | Box(0, T, (1,), f32)      | slots elapsed                                         |
    | edge_arrival  | MultiBinary(P)            | 1_{l(e)}(t), the port's job flag per channel (= the action mask) |
    | edge_demand   | Box(0, 1, (P, K), f32)    | a_k^e / c_k, the channel's demand relative to the capacity (0 on padding) |
    | edge_present  | MultiBinary(P)            | padded only: 1 for the instance's channels e < |E|    |
    | utility_mean  | Box(0, 1, (P,), f32)      | v̂_e: mean realised Z̃_e over the slots channel e ran (0 if untried; eqs. 8–9) |
    | channel_share | Box(0, 1, (P,), f32)      | n_e / t: share of the slots channel e ran             |
    | arrival_share | Box(0, 1, (L,), f32)      | share of the slots port l had a job (estimates ρ_l)   |
    | last_executed | MultiBinary(P)            | the channels that ran last slot (``feedback["executed"]``) |
    | last_utility  | Box(0, 1, (P,), f32)      | their realised Z̃_e (``feedback["utilities"]``; 0 elsewhere) |

    The statistics are updated from the feedback alone (``channel/learner_stats.py``, shared with the vector and
    PettingZoo envs); at t = 0 they are 0. The |E| of the random graph varies by instance
    (``scenario_seed``), L, R and K do not. Without padding the spaces are those of the instance the env
    was built with; with ``max_edges`` they depend on P alone, so one policy fits every instance with
    |E| <= P, and the problem data tell instances apart. ``gymnasium.wrappers.FlattenObservation`` (or
    ``clustergym.learning.wrappers.FlattenWithStats``) gives the flat vector a standard learner takes.

    ## Instances
    ``reset(seed=s, options={"scenario_seed": k})`` switches to instance k (the scenario regenerated
    with seed k): the episode equals that of ``gym.make(..., scenario_seed=k)`` (same other kwargs)
    reset with ``seed=s``; ``env.unwrapped.problem`` / ``scenario`` are then instance k's.
    ``instances=range(100, 200)`` (or any sequence of seeds) makes each reset without that option
    draw an instance uniformly, from a generator derived from the reset seed (not from ``np_random``,
    so the dynamics are still those of ``scenario_seed=k``): same seed, same instance, same episode;
    unseeded resets continue the draw. An instance whose spaces differ from the env's (no padding, or
    |E| > P) is a ValueError naming ``max_edges``; other option keys are a ValueError.

    ## Rewards
    Eq. 5: $\sum_e x_e \tilde Z_e(t)$ over the executed channels.

    ## Infeasible actions
    ``infeasible="repair"`` (default): channels of ports without a job are dropped, then selected
    channels are dropped from the highest edge index down until eq. 2 holds (equivalently: the
    longest prefix, in edge order, of the selection that fits is kept). The number dropped is
    ``info["metrics"]["repaired"]``. ``infeasible="raise"``: ValueError naming the violated
    constraint (the port without a job, or the device type and its excess). Wrong shape, values
    outside {0, 1}, NaN: always ValueError.

    ## Info
    ``feedback`` (what a real scheduler sees, fixed shapes so that Gymnasium's vector envs can stack
    it): ``executed`` (|E|,) bool, the channels run this slot, and ``utilities`` (|E|,) float64, their
    realised Z̃ (0 where not executed). ``metrics`` (evaluation only, agents never get it): ``expected_reward``
    ṽᵀx, ``repaired``, ``used`` (K,) devices in use; with ``oracle=True`` also ``oracle_reward``
    max_{x∈Ω(t)} ṽᵀx (exact knapsack DP), ``regret`` (per-slot gap, eq. 6) and ``cum_regret``. The
    oracle is off by default (it costs most of a step); ``clustergym run`` / ``clustergym.evaluate`` turn
    it on when they compute a score or regret (``score_env_kwargs``).

    ## Starting State / Episode End
    ``reset(seed)`` seeds separate child generators for arrivals and utilities, so every agent
    sees the same arrivals and the same realised Z̃ for the same seed (common random numbers).
    The episode is truncated after ``horizon`` slots; ``step`` then raises ``ResetNeeded``
    (``clustergym.core.env.ResetNeeded``, a ``RuntimeError``) until ``reset``.

    ## Arguments
    ``scenario`` ("paper", "toy" or a Scenario object), ``scenario_seed`` (seed of the instance:
    graph, demands, utilities; default 0), ``horizon`` (default 2000), ``oracle`` (default False),
    ``infeasible``, ``render_mode`` ("ansi", "rgb_array" or "human": the episode viewer), and any
    scenario parameter:
    ``num_ports``, ``num_servers``, ``num_device_types``, ``channel_prob``, ``rho``,
    ``capacity_ratio``, ``demand_min``, ``demand_max``, ``utility_low``, ``utility_high``,
    ``cost_mean``, ``cost_std``; ``instances`` (seeds drawn at each reset, default None) and
    ``max_edges`` (padding, default None: the instance's own |E|).

    ## Version History
    * v0: initial version.
    * v0, later: Z̃ is drawn from a Beta law with mean ṽ_e and the paper's std where [0, 1] allows
      it (was a triangular law that reached a median 58–63% of it); same id, different draws.
    * v0, later: ``info["feedback"]`` has fixed shapes, ``executed`` (|E|,) bool and ``utilities``
      (|E|,) (was ``channels``, the executed edge ids, and their utilities, whose length changed
      from slot to slot and broke ``gym.make_vec(..., vectorization_mode="sync")``).
    * v0, later: ``reset(options={"scenario_seed": k})``, ``instances``, ``max_edges`` padding;
      unknown reset options raise. Later: ``step`` after the episode's end raises until ``reset``.
    * v0, later: the observation carries the statistics, the last slot's feedback and ``edge_arrival``,
      ``edge_demand`` (padded or not); ``oracle`` defaults to False. The flat vector of earlier versions
      is ``clustergym.learning.pipeline``'s ``"legacy"`` layout (same values).
    """

    family = "multiserver-channel"
    _stats_update: tuple[np.ndarray, ...] | None  # the statistics' pending update (applied by _obs)
    # info["metrics"] keys and their kind (clustergym/core/metrics.py); the vector env reuses it.
    metrics_spec = {
        "expected_reward": Metric(SLOT, "ṽᵀx, the expected reward of the executed channels (eq. 5 in expectation)"),
        "repaired": Metric(SLOT, "channels dropped by the repair (eq. 2)", total=True),
        "used": Metric(SLOT, "devices in use per type (eq. 2)", shape="(K,)"),
        "oracle_reward": Metric(SLOT, "max_{x∈Ω(t)} ṽᵀx, exact knapsack DP (oracle=True)"),
        "regret": Metric(SLOT, "oracle_reward − expected_reward, the per-slot gap of eq. 6 (oracle=True)"),
        "cum_regret": Metric(CUMULATIVE, "Σ regret so far (eq. 6; oracle=True)", total=False),
    }

    pad_kwargs = ("max_edges",)
    score_env_kwargs = {"oracle": True}  # the per-slot knapsack oracle, the bound of a score (clustergym.evaluate)
    viewer_env_kwargs = {"oracle": True}  # the viewer draws the oracle's max ṽᵀx as a reference (clustergym replay)

    def __init__(self, scenario: str | Scenario = "paper", *, scenario_seed: int = 0, horizon: int = 2000,
                 oracle: bool = False, infeasible: str = "repair", render_mode: str | None = None,
                 instances: Any = None, max_edges: int | None = None, **params: Any):
        super().__init__(horizon=horizon, infeasible=infeasible, render_mode=render_mode, oracle=oracle)
        self.max_edges = None if max_edges is None else check_int("max_edges", max_edges, 1, 10_000_000)
        self._source = InstanceSource(scenario, params, make_channel_scenario, CHANNEL_SCENARIOS, scenario_seed,
                                      instances, self.pad_kwargs)
        sc = self._source.first
        self.action_space, self.observation_space = self._spaces(sc.problem, self.scenario_seed)
        self._load(sc)
        self._t = 0
        self._rngs = None

    def _spaces(self, pb, k) -> tuple:
        """(action space, observation space) of problem ``pb`` in this env (padded to ``max_edges`` if set)."""
        E = pb.num_edges
        if self.max_edges is not None:
            check_maxima(instance_sizes(pb), {"max_edges": self.max_edges}, f"instance scenario_seed={k}")
            E = self.max_edges
        obs = {"arrivals": spaces.MultiBinary(pb.num_ports),
               "t": spaces.Box(0.0, float(self.horizon), shape=(1,), dtype=np.float32),
               "edge_arrival": spaces.MultiBinary(E),
               "edge_demand": spaces.Box(0.0, 1.0, shape=(E, pb.num_device_types), dtype=np.float32),
               **stats_spaces(E, pb.num_ports)}
        if self.max_edges is not None:
            obs["edge_present"] = spaces.MultiBinary(E)
        return spaces.MultiBinary(E), spaces.Dict(obs)

    def _load(self, sc: Scenario) -> None:
        """Take the problem-derived state of instance ``sc`` (its spaces were checked)."""
        self.scenario = sc
        pb = sc.problem
        self.problem = pb
        self._truth = sc.truth
        self._E, self._L, self._K = pb.num_edges, pb.num_ports, pb.num_device_types
        self._demand = np.ascontiguousarray(pb.demand, dtype=np.int64)  # (E, K) a_k^e
        self._capacity = np.ascontiguousarray(pb.capacity, dtype=np.int64)  # (K,) c_k
        self._buf = np.empty(self._E)  # (E,) scratch of channel_slot
        # action length: |E|, or max_edges when padded
        self._A: int = self.action_space.n  # type: ignore[attr-defined]  # a MultiBinary
        self.space_desc = (f"MultiBinary({self._A}) (0/1 per channel)" if self.max_edges is None else
                           f"MultiBinary({self._A}) (0/1 per channel; entries {self._E}..{self._A - 1} are padding: 0)")
        # static observation parts (public problem data; each observation gets a copy)
        P = self._A
        self._edge_present = np.zeros(P, dtype=np.int8)
        self._edge_present[:self._E] = 1
        d = np.zeros((P, self._K), dtype=np.float32)
        d[:self._E] = pb.demand / np.maximum(pb.capacity, 1)[None, :]
        self._edge_demand = freeze(d)
        freeze(self._edge_present)
        self._stats = ChannelStats(1, P, self._L)  # the learner's statistics (channel/learner_stats.py)
        self._t_arr = np.zeros(1, dtype=np.int64)  # (1,) t, as the statistics read it

    def _instance_sizes(self, problem) -> dict:
        return instance_sizes(problem)

    # -- randomness ---------------------------------------------------------------------------
    def _refill(self) -> None:
        """Draw the next block of arrivals (B, L) and realised utilities (B, E) (``channel.dynamics.draw_block``)."""
        tr = self._truth
        assert self._rngs is not None, "reset() draws the generators first"
        self._arr_block, self._z_block = draw_block(self._rngs, tr, _BLOCK)
        self._block_start = self._t

    def _slot(self) -> tuple[np.ndarray, np.ndarray]:
        i = self._t - self._block_start
        if i >= _BLOCK:
            self._refill()
            i = 0
        return self._arr_block[i], self._z_block[i]

    # -- gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[ChannelObservation, dict[str, Any]]:
        super().reset(seed=seed)
        self._begin_instance(seed, options)  # options["scenario_seed"] or a draw from `instances`
        self._rngs = child_generators(self.np_random, ("arrivals", "utilities"))
        self._t = 0
        self._cum_regret = 0.0
        self._refill()
        self._arrivals, self._z = self._slot()
        self._mask = self._arrivals[self.problem.edge_port]
        self._last_x = np.zeros(self._E, dtype=bool)
        self._stats.reset(0)
        self._stats_update = None
        self._viewer_reset(problem=self.problem)
        return self._obs(), {"action_mask": self._padded(self._mask), "t": 0}

    def _padded(self, a: np.ndarray) -> np.ndarray:
        """A copy of the per-channel array ``a`` (|E|, ...) padded with zeros to the action length."""
        if self._A == self._E:
            return a.copy()
        out = np.zeros((self._A, *a.shape[1:]), dtype=a.dtype)
        out[:self._E] = a
        return out

    def _obs(self) -> ChannelObservation:
        obs: dict[str, np.ndarray] = {"arrivals": self._arrivals.astype(np.int8),
                                      "t": np.array([self._t], dtype=np.float32),
                                      "edge_arrival": self._edge_arrival(), "edge_demand": self._edge_demand.copy()}
        if self.max_edges is not None:
            obs["edge_present"] = self._edge_present.copy()
        self._t_arr[0] = self._t
        obs.update(self._stats.observe(self._t_arr, squeeze=True, update=self._stats_update))
        self._stats_update = None
        return cast(ChannelObservation, obs)

    def _edge_arrival(self) -> np.ndarray:
        """(P,) int8: 1_{l(e)}(t) per channel (the action mask; 0 on padding)."""
        if self._A == self._E:
            return self._mask.astype(np.int8)
        out = np.zeros(self._A, dtype=np.int8)
        out[:self._E] = self._mask
        return out

    def action_masks(self) -> np.ndarray:
        """(2|E|,) mask for sb3-contrib MaskablePPO: per channel [0 allowed, 1 allowed] (padding: 0 only)."""
        m = np.ones((self._A, 2), dtype=bool)
        m[:, 1] = self._padded(self._mask)
        return m.reshape(-1)

    def _check_form(self, action: Any) -> np.ndarray:
        """The action as a 0/1 array of shape (|E|,) (any bool/int dtype); ValueError on shape, NaN, values."""
        if self._rngs is None:
            raise RuntimeError("call reset() before step()")
        a = action if isinstance(action, np.ndarray) else np.asarray(action)
        if a.dtype.kind != "b":
            if a.shape == (self._A,) and a.dtype.kind in "iu":
                # One reduction: viewed as unsigned, negative values become huge.
                if a.size and a.view(a.dtype.str.replace("i", "u")).max() > 1:
                    raise ValueError(f"action values must be 0 or 1, expected {self.space_desc}")
            else:
                a = self._as_int_action(a, (self._A,), self.space_desc)
                if a.size and (a.max() > 1 or a.min() < 0):
                    raise ValueError(f"action values must be 0 or 1, expected {self.space_desc}")
        elif a.shape != (self._A,):
            raise ValueError(f"action has shape {a.shape}, expected {(self._A,)} ({self.space_desc})")
        return a

    def step(self, action: npt.ArrayLike) -> StepReturn[ChannelObservation]:
        if self._episode_over:
            raise self._over()
        a = self._check_form(action)
        pad_dropped = 0
        if self._A != self._E:  # padding entries: never executed, never rewarded
            pad = a[self._E:]
            if pad.any():
                if self.infeasible == "raise":
                    e = self._E + int(np.flatnonzero(pad)[0])
                    raise ValueError(f"infeasible action: entry {e} is padding (this instance has {self._E} "
                                     f"channels, max_edges={self._A}); padding entries must be 0")
                pad_dropped = int(np.count_nonzero(pad))
            a = a[:self._E]
        x = np.empty(self._E, dtype=bool)
        used = np.empty(self._K, dtype=np.int64)  # (K,) devices in use
        # Eqs. 4, 2 (validate or repair) and eq. 5, in the kernel the vector env runs too.
        status, where, dropped, reward, expected = channel_slot(
            a, self._mask, self._demand, self._capacity, self._z, self._truth.mean_utility,
            self.infeasible == "repair", x, used, self._buf)
        if status != OK:
            raise ValueError(infeasible_message(self.problem, status, where, used))
        utilities = np.where(x, self._z, 0.0)  # (E,) realised Z̃ of the executed channels, 0 elsewhere
        v = self._truth.mean_utility
        metrics = {"expected_reward": expected, "repaired": dropped + pad_dropped, "used": used}
        if self.oracle:
            active = np.flatnonzero(self._mask)
            opt = knapsack_value(v[active], self.problem.demand[active], self.problem.capacity)  # eq. 7
            regret = opt - expected  # eq. 6 (per-slot expected gap)
            self._cum_regret += regret
            metrics.update(oracle_reward=opt, regret=regret, cum_regret=self._cum_regret)
        if self._viewer is not None:  # the episode viewer's history (picture render modes only)
            self._viewer.record(selected=x, available=self._mask, utility=utilities, reward=reward, expected=expected,
                                oracle=metrics.get("oracle_reward", np.nan))
        self._last_x = x
        feedback: ChannelFeedback = {"executed": self._padded(x), "utilities": self._padded(utilities)}
        # the statistics' update, applied by _obs in the same compiled call as the observation
        self._stats_update = (feedback["executed"][None], feedback["utilities"][None], self._arrivals[None], _ONE)
        self._t += 1
        self._arrivals, self._z = self._slot()
        self._mask = self._arrivals[self.problem.edge_port]
        info = {"feedback": feedback, "metrics": metrics, "action_mask": self._padded(self._mask), "t": self._t}
        self._episode_over = truncated = self._t >= self.horizon
        return self._obs(), reward, False, truncated, info

    # -- rendering ----------------------------------------------------------------------------
    def _render_ansi(self) -> str:
        from clustergym.envs.multiserver.channel.render import render_ansi

        return render_ansi(self.problem, self._t, self._arrivals, self._last_x)

    def _make_viewer(self):
        from clustergym.envs.multiserver.channel.render import ChannelViewer

        return ChannelViewer(self.render_mode, self.horizon, self.metadata["render_fps"])
