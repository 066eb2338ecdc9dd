"""P1 as a PettingZoo ParallelEnv: MultiServerChannel with ports as agents (esdp.md §2)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from clustergym.core.parallel import ClusterParallelEnv
from clustergym.envs.multiserver.channel.env import MultiServerChannelEnv

__all__ = ["MultiServerChannelParallelEnv", "parallel_env"]


class MultiServerChannelParallelEnv(ClusterParallelEnv):
    """MultiServerChannel-v0 with one agent per port; drives one :class:`MultiServerChannelEnv`.

    ## Description
    The single env's model (esdp.md §2), decided by the ports: agent ``port_l`` chooses which of
    its own channels e ∈ E_l = {(l, r) ∈ E} to use this slot. The agents' choices are joined into
    the single env's x ∈ {0,1}^|E| and the single env steps once (arrivals, utilities, capacity
    repair and reward are all the single env's). Agents are the ports with at least one channel
    (every port in generated scenarios).

    ## Action Space
    ``port_l``: ``MultiBinary(|E_l|)``, entry i = channel ``agent_edges[port_l][i]`` (edge order).
    ``infos[port_l]["action_mask"]`` (|E_l|,) int8 marks the allowed channels: all of them when
    port l has a job, none otherwise (eq. 4). The mask is *not* in the observation: for a
    MultiBinary space gymnasium reads a sample mask as {0: force 0, 1: force 1, 2: free}, a
    different meaning; the port's own ``job`` bit already determines it.

    ## Observation Space (per agent: what port l knows by itself)
    | key  | space                 | meaning                              |
    |------|-----------------------|--------------------------------------|
    | job  | MultiBinary(1)        | 1_l(t): port l has a job this slot   |
    | t    | Box(0, T, (1,), f32)  | slots elapsed                        |
    | arrival_share | Box(0, 1, (1,), f32) | share of the slots port l had a job |
    | utility_mean, channel_share, last_utility | Box(0, 1, (|E_l|,), f32) | the single env's statistics and last feedback of the port's channels |
    | last_executed | MultiBinary(|E_l|) | its channels that ran last slot     |
    The static public problem (its channels' demands a^e, costs, the capacities c) is in
    ``problem`` as for the single env. ``state()``: float32 (L + 1,) = [arrivals of all ports, t] of
    the single env's observation.

    ## Rewards
    ``port_l`` gets the realised utility of its executed channels, r_l(t) = Σ_{e∈E_l} x_e Z̃_e(t);
    the ports partition E, so Σ_l r_l(t) = Σ_e x_e Z̃_e(t), the single env's reward (eq. 5), up to
    float rounding (the tests use |Σ_l r_l − r| <= 1e-9 max(1, |r|)).

    ## Infeasible actions
    As the single env (kwarg ``infeasible``): under "repair" channels of ports without a job are
    dropped, then selected channels from the highest edge index down until eq. 2 holds — so when
    the joint selection exceeds capacity, the ports with higher index lose channels first.

    ## Info (per agent)
    ``feedback`` (fixed shapes, position i = the agent's i-th channel): ``executed`` (|E_l|,) bool,
    ``utilities`` (|E_l|,) realised Z̃ (0 where not executed) and ``edges`` (|E_l|,) the global edge
    ids; ``action_mask`` (|E_l|,) int8 (PettingZoo's mask dtype); ``t``;
    ``metrics``: the single env's evaluation-only metrics (hidden-truth based; never for learning).

    ## Episode End
    All agents are truncated together at ``horizon``.

    ## Instances and padding
    ``reset(options={"scenario_seed": k})`` and ``instances`` switch the single env's instance; the
    agents and per-agent spaces must stay the same (a port's |E_l| varies by instance, so without
    padding a switch usually raises a ValueError naming ``max_edges``). With ``max_edges`` every port
    is an agent and acts on ``MultiBinary(R)``, entry r = channel (l, r) (entries of servers it has
    no channel to are padding: masked, inert; raise / dropped and counted in ``metrics["repaired"]``),
    and observes besides ``job`` and ``t``: ``channel_present`` MultiBinary(R) and ``channel_demand``
    Box(0, 1, (R, K)) a_k^(l,r) / c_k, and its channels' statistics per server (R,) (0 where none);
    ``feedback`` is per server (``edges`` −1 where none).

    ## Arguments
    Exactly the single env's kwargs (``scenario``, ``scenario_seed``, ``horizon``, ``oracle``,
    ``infeasible``, ``render_mode``, ``instances``, ``max_edges``, scenario parameters); ``render``
    draws the single env.
    """

    metadata = {**ClusterParallelEnv.metadata, "name": "multiserver_channel_parallel_v0"}

    def __init__(self, scenario: Any = "paper", **kwargs: Any):
        env = MultiServerChannelEnv(scenario, **kwargs)
        self._padded = env.max_edges is not None
        agents, obs_spaces, act_spaces, state_space = self._build(env.problem, float(env.horizon))
        super().__init__(env, agents, obs_spaces, act_spaces, state_space)

    def _build(self, pb, T: float) -> tuple:
        """Agents and spaces of problem ``pb``; sets the per-instance index arrays."""
        L, R, K = pb.num_ports, pb.num_servers, pb.num_device_types
        edges = [np.flatnonzero(pb.edge_port == l) for l in range(L)]
        # padded: every port is an agent and acts on one entry per server (a fixed shape)
        self.agent_ports = [l for l in range(L) if self._padded or edges[l].size]  # ports with a channel
        agents = [f"port_{l}" for l in self.agent_ports]
        self.agent_edges = {a: edges[l] for a, l in zip(agents, self.agent_ports)}  # (|E_l|,) edge ids
        obs = {"job": spaces.MultiBinary(1), "t": spaces.Box(0.0, T, shape=(1,), dtype=np.float32),
               "arrival_share": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)}

        def own(n: int) -> dict:  # the single env's statistics of the agent's channels (channel/learner_stats.py)
            unit = spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32)
            return {"utility_mean": unit, "channel_share": unit, "last_executed": spaces.MultiBinary(n),
                    "last_utility": unit}

        if self._padded:
            obs.update(channel_present=spaces.MultiBinary(R),
                       channel_demand=spaces.Box(0.0, 1.0, shape=(R, K), dtype=np.float32))
            self.agent_slots = {a: np.asarray(pb.edge_server)[self.agent_edges[a]] for a in agents}  # server of each
            dem = pb.demand / np.maximum(pb.capacity, 1)[None, :]
            self._present = {}
            self._chan_demand = {}
            for a in agents:
                m = np.zeros(R, dtype=np.int8)
                m[self.agent_slots[a]] = 1
                d = np.zeros((R, K), dtype=np.float32)
                d[self.agent_slots[a]] = dem[self.agent_edges[a]]
                self._present[a], self._chan_demand[a] = m, d
        obs_spaces = {a: spaces.Dict({**obs, **own(R if self._padded else int(self.agent_edges[a].size))})
                      for a in agents}
        act_spaces = {a: spaces.MultiBinary(R if self._padded else int(self.agent_edges[a].size)) for a in agents}
        state_space = spaces.Box(0.0, max(T, 1.0), shape=(L + 1,), dtype=np.float32)
        self._order = np.concatenate([self.agent_edges[a] for a in agents])  # agent-major position -> edge id
        self._edge_agent = np.empty(pb.num_edges, dtype=np.int64)  # (E,) agent index of each edge
        for i, a in enumerate(agents):
            self._edge_agent[self.agent_edges[a]] = i
        self._n_edges = pb.num_edges
        return agents, obs_spaces, act_spaces, state_space

    def _on_instance(self) -> None:
        pb = self.single_env.problem
        if pb is not self.problem:
            self._rebuild(pb, float(self.single_env.horizon))

    # -- joint action ---------------------------------------------------------------------------
    def _join(self, vals: list[np.ndarray]) -> np.ndarray:
        if self._padded:
            return self._join_padded(vals)
        flat = np.concatenate(vals)  # the single env validates the values (0/1, no NaN)
        joint = np.empty_like(flat)
        joint[self._order] = flat
        return joint

    def _join_padded(self, vals: list[np.ndarray]) -> np.ndarray:
        """Per-server entries -> the single env's (max_edges,) action; entries of servers without a channel
        of the port are padding (inert: 0, else an error under "raise", dropped and counted under "repair")."""
        env = self.single_env
        joint = np.zeros(_width(env.action_space), dtype=np.result_type(np.int8, *(np.asarray(v).dtype for v in vals)))
        dropped = 0
        for a, v in zip(self.possible_agents, vals):
            v = np.asarray(v)
            if v.dtype.kind not in "biuf":
                raise ValueError(f"action of {a} has dtype {v.dtype}, expected 0/1 values ({self._action_spaces[a]})")
            # the single env validates the real entries (0/1, no NaN); padding entries must be 0
            slots = self.agent_slots[a]
            joint[self.agent_edges[a]] = v[slots]
            pad = v.sum() - v[slots].sum()
            if pad:
                if env.infeasible == "raise":
                    r = int(np.flatnonzero(np.isin(np.arange(v.size), slots, invert=True) & (v != 0))[0])
                    raise ValueError(f"infeasible action: {a} selects server {r}, to which it has no channel "
                                     f"(a padding entry: must be 0)")
                dropped += int(pad)
        self._pad_dropped = dropped
        return joint

    def _split(self, joint: np.ndarray) -> dict[str, np.ndarray]:
        if self._padded:
            out = {}
            for a in self.possible_agents:
                v = np.zeros(_width(self._action_spaces[a]), dtype=np.asarray(joint).dtype)
                v[self.agent_slots[a]] = joint[self.agent_edges[a]]
                out[a] = v
            return out
        return {a: joint[self.agent_edges[a]].copy() for a in self.possible_agents}

    # -- observations ---------------------------------------------------------------------------
    def _observe(self, obs: dict, info: dict) -> dict[str, dict]:
        arr, t = obs["arrivals"], obs["t"]
        share = obs["arrival_share"]
        out = {a: {"job": arr[l:l + 1].copy(), "t": t.copy(), "arrival_share": share[l:l + 1].copy()}
               for a, l in zip(self.possible_agents, self.agent_ports)}
        own = ("utility_mean", "channel_share", "last_executed", "last_utility")
        for a in self.possible_agents:
            e = self.agent_edges[a]
            if self._padded:  # per server: the agent's channel to server r, 0 where it has none
                out[a].update(channel_present=self._present[a].copy(), channel_demand=self._chan_demand[a].copy())
                for k in own:
                    v = np.zeros(_width(self.action_space(a)), dtype=obs[k].dtype)
                    v[self.agent_slots[a]] = obs[k][e]
                    out[a][k] = v
            else:
                out[a].update({k: obs[k][e] for k in own})
        return out

    def _state(self, obs: dict) -> np.ndarray:
        return np.concatenate([obs["arrivals"].astype(np.float32), obs["t"].astype(np.float32)])

    # -- reward and infos -----------------------------------------------------------------------
    def _split_reward(self, reward: float, info: dict) -> dict[str, float]:
        fb = info["feedback"]
        if self._padded:
            fb = {"executed": fb["executed"][:self._n_edges], "utilities": fb["utilities"][:self._n_edges]}
            if self._pad_dropped:
                info["metrics"]["repaired"] += self._pad_dropped
        ch = np.flatnonzero(fb["executed"])  # executed edge ids, ascending
        per_agent = np.bincount(self._edge_agent[ch], weights=fb["utilities"][ch],
                                minlength=len(self.possible_agents))  # r_l = Σ_{e∈E_l} x_e Z̃_e
        self._executed = fb
        return {a: float(per_agent[i]) for i, a in enumerate(self.possible_agents)}

    def _infos(self, info: dict, rewards: dict | None) -> dict[str, dict]:
        mask = info["action_mask"]
        out = {}
        if rewards is not None:
            x, z = self._executed["executed"], self._executed["utilities"]
        for i, a in enumerate(self.possible_agents):
            edges = self.agent_edges[a]
            if self._padded:  # per server: entries of servers without a channel of this port are 0 / -1
                R = _width(self._action_spaces[a])
                slots = self.agent_slots[a]
                m = np.zeros(R, dtype=np.int8)
                m[slots] = mask[edges]
                d = {"action_mask": m, "t": info["t"]}
                if rewards is not None:
                    xe, ze, ee = np.zeros(R, dtype=bool), np.zeros(R), np.full(R, -1, dtype=np.int64)
                    xe[slots], ze[slots], ee[slots] = x[edges], z[edges], edges
                    d["feedback"] = {"executed": xe, "utilities": ze, "edges": ee}
                    d["metrics"] = info["metrics"]
            else:
                d = {"action_mask": mask[edges].astype(np.int8), "t": info["t"]}
                if rewards is not None:
                    d["feedback"] = {"executed": x[edges].copy(), "utilities": z[edges].copy(), "edges": edges.copy()}
                    d["metrics"] = info["metrics"]
            out[a] = d
        return out


def _width(space: spaces.Space) -> int:
    """Entries of a 1-D MultiBinary action (its ``n``)."""
    return int(np.prod(space.shape or ()))


def parallel_env(**kwargs: Any) -> MultiServerChannelParallelEnv:
    """PettingZoo ParallelEnv of MultiServerChannel-v0 (ports as agents); kwargs as the single env."""
    return MultiServerChannelParallelEnv(**kwargs)
