"""Native vector env for P1, MultiServerChannel-v0 (ESDP paper, esdp.md §2): N envs stepped as arrays."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt
from gymnasium.vector.utils import batch_space

from clustergym.core.scenario import Scenario, freeze
from clustergym.envs.multiserver.channel.dynamics import BLOCK, channel_slot_batch, draw_block, infeasible_message
from clustergym.envs.multiserver.channel.env import MultiServerChannelEnv
from clustergym.envs.multiserver.channel.oracle import knapsack_value
from clustergym.envs.multiserver.channel.learner_stats import ChannelStats
from clustergym.envs.multiserver.channel.types import ChannelObservation
from clustergym.core.vector_env import ClusterVectorEnv, VectorStepReturn, with_masks

__all__ = ["MultiServerChannelVectorEnv"]


class MultiServerChannelVectorEnv(ClusterVectorEnv[ChannelObservation, np.ndarray]):
    """N independent copies of :class:`MultiServerChannelEnv` (same scenario), stepped as arrays.

    ## Description
    The model, rewards and infeasibility rules are those of the single env (eqs. 1–5, see
    :class:`~clustergym.envs.multiserver.channel.env.MultiServerChannelEnv`), computed by the same
    code: ``channel.dynamics.channel_slot`` (eq. 4, eq. 2 with the repair, eq. 5, ṽᵀx) runs for every
    sub-env inside one parallel numba kernel, and ``channel.dynamics.draw_block`` draws each sub-env's
    arrivals and utilities from its own child generators. Sub-env i seeded with s_i gives exactly
    the trajectory of a single env with ``reset(seed=s_i)`` (``clustergym.core.vector_env``).
    Create it with ``gym.make_vec("clustergym/MultiServerChannel-v0", num_envs=N,
    vectorization_mode="vector_entry_point", **kwargs)``.

    ## Action Space
    ``MultiBinary((N, |E|))`` (``single_action_space`` = the single env's ``MultiBinary(|E|)``):
    row i is sub-env i's channel selection. ``info["action_mask"]`` (N, |E|) marks the channels of
    ports with a job; ``action_masks()`` gives the (N, 2|E|) masks sb3-contrib expects.

    ## Observation Space
    The single env's keys with a leading N axis (``single_observation_space`` = the single env's), computed
    for all sub-envs at once (the statistics by ``channel/learner_stats.py``, the kernels the single env runs):
    | key                                       | shape       | dtype   | meaning                          |
    |-------------------------------------------|-------------|---------|----------------------------------|
    | arrivals                                  | (N, L)      | int8    | 1_l(t) of every sub-env           |
    | t                                         | (N, 1)      | float32 | slots elapsed in each episode    |
    | edge_arrival, last_executed (, edge_present) | (N, P)   | int8    | as the single env                |
    | utility_mean, channel_share, last_utility | (N, P)      | float32 | as the single env                |
    | arrival_share                             | (N, L)      | float32 | as the single env                |
    | edge_demand                               | (N, P, K)   | float32 | as the single env                |
    The public problem data (``edge_demand``, ``edge_present``) are read-only arrays shared by the
    observations until a sub-env switches instance (then replaced, never written): copy them to modify.
    ``clustergym.learning.pipeline.flatten_batch`` flattens a batch to (N, flatdim), row i equal to
    ``gymnasium.spaces.flatten`` of sub-env i's observation.

    ## Rewards
    (N,) float64: eq. 5, Σ_e x_e Z̃_e(t) per sub-env (0 for a sub-env being autoreset).

    ## Infeasible actions
    As the single env, per row: ``"repair"`` drops channels of ports without a job, then the
    selection's longest edge-order prefix that fits eq. 2 is kept; ``"raise"``: ValueError naming the
    sub-env, then the constraint. Shape other than (N, |E|), values outside {0, 1}, NaN: ValueError
    naming the first offending sub-env.

    ## Info
    Arrays with a leading N axis, each with a ``_key`` mask (Gymnasium's vector layout):
    ``action_mask`` (N, |E|) bool; ``t`` (N,) int64; ``feedback``: ``executed`` (N, |E|) bool (the
    channels that ran, the single env's ``channels`` as a mask) and ``utilities`` (N, |E|) float64
    (their Z̃_e(t), 0 elsewhere); ``metrics``: ``expected_reward`` (N,), ``repaired`` (N,) int64,
    ``used`` (N, K) int64 and, with ``oracle=True``, ``oracle_reward``, ``regret``, ``cum_regret``
    (N,). ``feedback``/``metrics`` are absent (mask False) for sub-envs being autoreset.
    ``oracle=True`` solves the exact knapsack of every sub-env in a Python loop (slow: about a
    millisecond per sub-env and slot); it is off by default.

    ## Starting State / Episode End
    Each sub-env truncates after ``horizon`` slots and autoresets at the next step
    (``AutoresetMode.NEXT_STEP``); randomness as in ``clustergym.core.vector_env``.

    ## Arguments
    ``num_envs`` (N, default 1) and the single env's arguments: ``scenario``, ``scenario_seed``,
    ``horizon``, ``oracle`` (default False, as the single env), ``infeasible``, ``instances``,
    ``max_edges``, scenario parameters. ``render_mode`` must be None.

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

    family = "multiserver-channel"
    metrics_spec = MultiServerChannelEnv.metrics_spec  # the single env's declaration (clustergym/core/metrics.py)
    _rng_names = ("arrivals", "utilities")

    def __init__(self, num_envs: int = 1, scenario: str | Scenario = "paper", *, scenario_seed: int = 0,
                 horizon: int = 2000, oracle: bool = False, infeasible: str = "repair",
                 render_mode: str | None = None, instances: Any = None, max_edges: int | None = None, **params: Any):
        super().__init__(num_envs, horizon=horizon, infeasible=infeasible, oracle=oracle, render_mode=render_mode)
        # The single env builds and validates the scenario and spaces; it also words the errors.
        self._single = s = MultiServerChannelEnv(scenario, scenario_seed=scenario_seed, horizon=horizon, oracle=False,
                                                 infeasible=infeasible, instances=instances, max_edges=max_edges,
                                                 **params)
        self._source = s.instance_source
        self.max_edges = s.max_edges
        pb = s.problem
        N, self._L, self._K = self.num_envs, pb.num_ports, pb.num_device_types
        # action width: |E|, or max_edges when padded
        self._E = self._W = W = s.action_space.shape[0]  # type: ignore[index]
        self.single_action_space = s.action_space
        self.single_observation_space = s.observation_space
        self.action_space = batch_space(self.single_action_space, N)
        self.observation_space = batch_space(self.single_observation_space, N)
        self._space_desc = s.space_desc
        # Each sub-env's instance, padded to W channels (padding: demand 0, v 0, port L = never a job).
        self._demand = np.zeros((N, W, self._K), dtype=np.int64)  # (N, W, K) a_k^e
        self._capacity = np.zeros((N, self._K), dtype=np.int64)  # (N, K) c_k
        self._v = np.zeros((N, W))  # (N, W) hidden ṽ_e
        self._edge_port = np.full((N, W), self._L, dtype=np.int64)  # (N, W) port of each channel, L on padding
        self._n_edges = np.zeros(N, dtype=np.int64)  # (N,) real channels of each sub-env
        self._edge_demand = np.zeros((N, W, self._K), dtype=np.float32)  # (N, W, K) a/c (padded observation)
        self.problems: list = [None] * N  # public problem of each sub-env
        self._truths: list = [None] * N
        self._scenarios: list = [None] * N
        for i in range(N):
            self._set_instance(i, s.scenario)
        self._instance[:] = s.scenario_seed if s.scenario_seed is not None else 0
        self._arr_block = np.zeros((N, BLOCK, self._L), dtype=bool)  # (N, B, L) arrivals of the block
        self._z_block = np.zeros((N, BLOCK, W))  # (N, B, W) realised Z̃ of the block (0 on padding)
        self._pos = np.zeros(N, dtype=np.int64)  # (N,) current slot's index in the block
        self._cum_regret = np.zeros(N)  # (N,)
        self._arrivals = np.zeros((N, self._L + 1), dtype=bool)  # (N, L + 1) (column L: padding, always False)
        self._mask = np.zeros((N, W), dtype=bool)  # (N, W) channels of ports with a job
        self._stats = ChannelStats(N, W, self._L)  # the learner's statistics (channel/learner_stats.py), all sub-envs
        self._share_static()

    # -- instances ----------------------------------------------------------------------------
    def _set_instance(self, i: int, sc: Scenario) -> None:
        pb = sc.problem
        E = pb.num_edges
        self._scenarios[i], self.problems[i], self._truths[i] = sc, pb, sc.truth
        self._n_edges[i] = E
        self._demand[i] = 0
        self._demand[i, :E] = pb.demand
        self._capacity[i] = pb.capacity
        self._v[i] = 0.0
        self._v[i, :E] = sc.truth.mean_utility
        self._edge_port[i] = self._L
        self._edge_port[i, :E] = pb.edge_port
        # copy on write once observations share it (read-only): those already returned keep their arrays
        d = self._edge_demand if self._edge_demand.flags.writeable else self._edge_demand.copy()
        d[i] = 0.0
        d[i, :E] = pb.demand / np.maximum(pb.capacity, 1)[None, :]
        self._edge_demand = d

    def _share_static(self) -> None:
        """Freeze the static observation parts (public problem data), shared by every observation."""
        self._edge_demand = freeze(self._edge_demand)
        self._edge_present = freeze((np.arange(self._W)[None, :] < self._n_edges[:, None]).astype(np.int8))

    def _use_instance(self, i: int, sc: Scenario, k: int) -> None:
        self._single.check_instance(sc, k)
        self._set_instance(i, sc)
        self._share_static()

    # -- per sub-env episode state ------------------------------------------------------------
    def _refill(self, i: int) -> None:
        E = int(self._n_edges[i])
        arr, z = draw_block(self._rngs[i], self._truths[i], BLOCK)
        self._arr_block[i] = arr
        self._z_block[i, :, :E] = z
        self._pos[i] = 0

    def _start_episode(self, i: int) -> None:
        self._z_block[i] = 0.0
        self._cum_regret[i] = 0.0
        self._stats.reset(i)
        self._refill(i)
        self._arrivals[i, :self._L] = self._arr_block[i, 0]
        self._mask[i] = self._arrivals[i, self._edge_port[i]]

    def _observations(self) -> ChannelObservation:
        obs = {"arrivals": self._arrivals[:, :self._L].astype(np.int8), "t": self._t.astype(np.float32)[:, None],
               "edge_arrival": self._mask.astype(np.int8), "edge_demand": self._edge_demand}
        if self.max_edges is not None:
            obs["edge_present"] = self._edge_present
        obs.update(self._stats.observe(self._t))
        return cast(ChannelObservation, obs)

    def _reset_info(self, mask: np.ndarray) -> dict:
        return with_masks({"action_mask": self._mask.copy(), "t": self._t.copy()}, mask)

    def action_masks(self) -> np.ndarray:
        """(N, 2|E|) masks for sb3-contrib MaskablePPO: per sub-env and channel [0 allowed, 1 allowed]."""
        m = np.ones((self.num_envs, self._W, 2), dtype=bool)
        m[:, :, 1] = self._mask
        return m.reshape(self.num_envs, -1)

    # -- stepping ----------------------------------------------------------------------------
    def _check_form(self, actions: Any) -> np.ndarray:
        """(N, |E|) 0/1 actions of any bool/int dtype; ValueError naming the first bad sub-env."""
        return self._integer_actions(actions, self._W, 1, self._space_desc, "action values must be 0 or 1",
                                     dtype=np.int8)

    def step(self, actions: npt.ArrayLike) -> VectorStepReturn[ChannelObservation]:
        self._require_reset()
        a = self._check_form(actions)
        N, E, K = self.num_envs, self._W, self._K
        stepping = ~self._autoreset  # (N,) sub-envs that step (the others reset now)
        if self.max_edges is not None and self.infeasible == "raise":  # padding first, as the single env
            pad = (np.arange(E)[None, :] >= self._n_edges[:, None]) & (a != 0) & stepping[:, None]
            if pad.any():
                i = self._bad_env(pad)
                e = int(np.flatnonzero(pad[i])[0])
                raise ValueError(f"sub-env {i}: infeasible action: entry {e} is padding (this instance has "
                                 f"{int(self._n_edges[i])} channels, max_edges={E}); padding entries must be 0")
        x = np.empty((N, E), dtype=bool)  # executed channels
        used = np.empty((N, K), dtype=np.int64)
        status = np.empty(N, dtype=np.int64)
        where = np.empty(N, dtype=np.int64)
        dropped = np.empty(N, dtype=np.int64)
        reward = np.empty(N)
        expected = np.empty(N)
        channel_slot_batch(a, self._mask, self._demand, self._capacity, self._z_block, self._pos,
                           self._v, self.infeasible == "repair", stepping,
                           x, used, status, where, dropped, reward, expected)
        if status.any():
            i = int(np.argmax(status != 0))
            raise ValueError(f"sub-env {i}: " + infeasible_message(self.problems[i], int(status[i]), int(where[i]),
                                                                   used[i]))
        # The state changes only from here on.
        rows = np.arange(N)
        utilities = np.where(x, self._z_block[rows, self._pos], 0.0)  # (N, E) Z̃ of executed channels
        metrics = {"expected_reward": expected, "repaired": dropped, "used": used}
        if self.oracle:  # exact knapsack per sub-env (slow: a Python loop)
            opt = np.zeros(N)
            for i in np.flatnonzero(stepping):  # type: ignore[assignment]  # a numpy int here
                v, pb = self._truths[i].mean_utility, self.problems[i]
                active = np.flatnonzero(self._mask[i])
                opt[i] = knapsack_value(v[active], pb.demand[active], pb.capacity)
            regret = np.where(stepping, opt - expected, 0.0)  # eq. 6 (per-slot expected gap)
            self._cum_regret += regret
            metrics.update(oracle_reward=opt, regret=regret, cum_regret=self._cum_regret.copy())
        self._stats.update(x, utilities, self._arrivals[:, :self._L], stepping)
        self._t += stepping
        truncated = stepping & (self._t >= self.horizon)
        terminated = np.zeros(N, dtype=bool)
        self._pos += stepping
        for i in np.flatnonzero(self._pos >= BLOCK):  # type: ignore[assignment]  # a numpy int here
            self._refill(int(i))
        self._autoreset_envs()  # NEXT_STEP: sub-envs that ended at the last step start over now
        self._arrivals[:, :self._L] = self._arr_block[rows, self._pos]
        self._mask = np.take_along_axis(self._arrivals, self._edge_port, axis=1)
        self._autoreset = truncated | terminated
        info = with_masks({"action_mask": self._mask.copy(), "t": self._t.copy()}, np.ones(N, dtype=bool))
        info.update(with_masks({"feedback": {"executed": x, "utilities": utilities}, "metrics": metrics}, stepping))
        return self._observations(), reward, terminated, truncated, info
