"""P1 environment: MultiServerChannel-v0 (ESDP paper, esdp.md §2)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from clustergym.core import Scenario, resolve_scenario, child_generators
from clustergym.env import ClusterEnv
from clustergym.envs.multiserver.channel_scenario import CHANNEL_SCENARIOS, make_channel_scenario
from clustergym.envs.multiserver.knapsack import knapsack_max

__all__ = ["MultiServerChannelEnv"]

_BLOCK = 256  # slots of arrivals/utilities drawn at once (same values as drawing slot by slot)


class MultiServerChannelEnv(ClusterEnv):
    """Multi-server jobs on a bipartite job-type/server graph with stochastic channel utilities.

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

    ## Observation Space
    | key        | space                  | meaning                                   |
    |------------|------------------------|-------------------------------------------|
    | arrivals   | MultiBinary(L)         | 1_l(t): port l has a job this slot        |
    | t          | Box(0, T, (1,), f32)   | slots elapsed                              |

    ## Rewards
    Eq. 5: Σ_e x_e Z̃_e(t) over the executed channels.

    ## Infeasible actions
    ``infeasible="repair"`` (default): channels of ports without a job are dropped, then selected
    channels are dropped from the highest edge index down until eq. 2 holds (equivalently: the
    longest prefix, in edge order, of the selection that fits is kept). The number dropped is
    ``info["metrics"]["repaired"]``. ``infeasible="raise"``: ValueError naming the violated
    constraint (the port without a job, or the device type and its excess). Wrong shape, values
    outside {0, 1}, NaN: always ValueError.

    ## Info
    ``feedback`` (what a real scheduler sees): ``channels`` (executed edge ids) and ``utilities``
    (their realised Z̃). ``metrics`` (evaluation only, agents never get it): ``expected_reward``
    ṽᵀx, ``repaired``, ``used`` (K,) devices in use; with ``oracle=True`` also ``oracle_reward``
    max_{x∈Ω(t)} ṽᵀx (exact knapsack DP), ``regret`` (per-slot gap, eq. 6) and ``cum_regret``.

    ## Starting State / Episode End
    ``reset(seed)`` seeds separate child generators for arrivals and utilities, so every agent
    sees the same arrivals and the same realised Z̃ for the same seed (common random numbers).
    The episode is truncated after ``horizon`` slots.

    ## Arguments
    ``scenario`` ("paper", "toy" or a Scenario object), ``scenario_seed`` (seed of the instance:
    graph, demands, utilities; default 0), ``horizon`` (default 2000), ``oracle`` (default True),
    ``infeasible``, ``render_mode`` ("ansi" or "rgb_array"), and any scenario parameter:
    ``num_ports``, ``num_servers``, ``num_device_types``, ``channel_prob``, ``rho``,
    ``capacity_ratio``, ``demand_min``, ``demand_max``, ``utility_low``, ``utility_high``,
    ``cost_mean``, ``cost_std``.

    ## Version History
    * v0: initial version.
    """

    family = "multiserver-channel"

    def __init__(self, scenario: str | Scenario = "paper", *, scenario_seed: int = 0, horizon: int = 2000,
                 oracle: bool = True, infeasible: str = "repair", render_mode: str | None = None, **params: Any):
        super().__init__(horizon=horizon, infeasible=infeasible, render_mode=render_mode, oracle=oracle)
        self.scenario = resolve_scenario(scenario, params, make_channel_scenario, CHANNEL_SCENARIOS, scenario_seed)
        pb = self.scenario.problem
        self.problem = pb
        self._truth = self.scenario.truth
        self._E, self._L, self._K = pb.num_edges, pb.num_ports, pb.num_device_types
        self._demand_T = np.ascontiguousarray(pb.demand.T)  # (K, E)
        self._space_desc = f"MultiBinary({self._E}) (0/1 per channel)"
        self.action_space = spaces.MultiBinary(self._E)
        self.observation_space = spaces.Dict({
            "arrivals": spaces.MultiBinary(self._L),
            "t": spaces.Box(0.0, float(self.horizon), shape=(1,), dtype=np.float32),
        })
        self._t = 0
        self._rngs = None

    # -- randomness ---------------------------------------------------------------------------
    def _refill(self) -> None:
        """Draw the next block of arrivals (B, L) and realised utilities (B, E)."""
        tr = self._truth
        self._arr_block = self._rngs["arrivals"].random((_BLOCK, self._L)) < tr.rho[None, :]
        rng = self._rngs["utilities"]
        u = rng.random((2, _BLOCK, self._E))
        self._z_block = tr.mean_utility + tr.half_width * (u[0] - u[1])  # triangular, mean ṽ (scenario docs)
        self._block_start = self._t

    def _slot(self) -> tuple[np.ndarray, np.ndarray]:
        i = self._t - self._block_start
        if i >= _BLOCK:
            self._refill()
            i = 0
        return self._arr_block[i], self._z_block[i]

    # -- gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._rngs = child_generators(self.np_random, ("arrivals", "utilities"))
        self._t = 0
        self._cum_regret = 0.0
        self._refill()
        self._arrivals, self._z = self._slot()
        self._mask = self._arrivals[self.problem.edge_port]
        self._last_x = np.zeros(self._E, dtype=bool)
        return self._obs(), {"action_mask": self._mask.copy(), "t": 0}

    def _obs(self) -> dict:
        return {"arrivals": self._arrivals.astype(np.int8), "t": np.array([self._t], dtype=np.float32)}

    def action_masks(self) -> np.ndarray:
        """(2|E|,) mask for sb3-contrib MaskablePPO: per channel [0 allowed, 1 allowed]."""
        m = np.ones((self._E, 2), dtype=bool)
        m[:, 1] = self._mask
        return m.reshape(-1)

    def _check(self, action: Any) -> tuple[np.ndarray, int, np.ndarray]:
        """Validate and (under "repair") repair an action; returns (x as bool, number dropped, used (K,))."""
        if self._rngs is None:
            raise RuntimeError("call reset() before step()")
        a = action if isinstance(action, np.ndarray) else np.asarray(action)
        if a.dtype.kind != "b":
            if a.shape == (self._E,) and a.dtype.kind in "iu":
                # One reduction: viewed as unsigned, negative values become huge.
                if a.size and a.view(a.dtype.str.replace("i", "u")).max() > 1:
                    raise ValueError(f"action values must be 0 or 1, expected {self._space_desc}")
            else:
                a = self._as_int_action(a, (self._E,), self._space_desc)
                if a.size and (a.max() > 1 or a.min() < 0):
                    raise ValueError(f"action values must be 0 or 1, expected {self._space_desc}")
        elif a.shape != (self._E,):
            raise ValueError(f"action has shape {a.shape}, expected {(self._E,)} ({self._space_desc})")
        x = a.astype(bool)
        dropped = 0
        idle = x > self._mask  # selected although the port has no job
        if idle.any():
            if self.infeasible == "raise":
                e = int(np.flatnonzero(idle)[0])
                raise ValueError(f"infeasible action: channel {e} belongs to port {int(self.problem.edge_port[e])}, "
                                 f"which has no job this slot (eq. 4)")
            dropped += int(idle.sum())
            x &= self._mask
        used = self._demand_T @ x  # (K,) devices in use
        excess = used - self.problem.capacity
        if excess.max() > 0:
            if self.infeasible == "raise":
                k = int(np.argmax(excess))
                raise ValueError(f"infeasible action: device type {k} ({self.problem.device_names[k]}) uses "
                                 f"{int(used[k])} > capacity {int(self.problem.capacity[k])} (excess {int(excess[k])}, eq. 2)")
            # Keep the longest prefix (edge order) of the selection that fits = drop from the end.
            sel = np.flatnonzero(x)
            fits = (np.cumsum(self.problem.demand[sel], axis=0) <= self.problem.capacity).all(axis=1)
            n_keep = int(np.argmin(fits))  # first prefix that does not fit (some prefix must fail here)
            dropped += sel.size - n_keep
            x = np.zeros(self._E, dtype=bool)
            x[sel[:n_keep]] = True
            used = self._demand_T @ x
        return x, dropped, used

    def step(self, action: Any):
        x, dropped, used = self._check(action)
        executed = np.flatnonzero(x)
        utilities = self._z[executed]
        reward = float(utilities.sum())  # eq. 5
        v = self._truth.mean_utility
        expected = float(v[executed].sum())
        metrics = {"expected_reward": expected, "repaired": dropped, "used": used}
        if self.oracle:
            active = np.flatnonzero(self._mask)
            opt, _ = knapsack_max(v[active], self.problem.demand[active], self.problem.capacity)
            regret = opt - expected  # eq. 6 (per-slot expected gap)
            self._cum_regret += regret
            metrics.update(oracle_reward=opt, regret=regret, cum_regret=self._cum_regret)
        self._last_x = x
        self._t += 1
        self._arrivals, self._z = self._slot()
        self._mask = self._arrivals[self.problem.edge_port]
        info = {"feedback": {"channels": executed, "utilities": utilities}, "metrics": metrics,
                "action_mask": self._mask.copy(), "t": self._t}
        return self._obs(), reward, False, self._t >= self.horizon, info

    # -- rendering ----------------------------------------------------------------------------
    def render(self):
        if self.render_mode is None:
            return None
        from clustergym.envs.multiserver.channel_render import render_ansi, render_rgb

        if self.render_mode == "ansi":
            return render_ansi(self.problem, self._t, self._arrivals, self._last_x)
        return render_rgb(self.problem, self._t, self._arrivals, self._last_x)
