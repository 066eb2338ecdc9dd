"""P2 as a PettingZoo ParallelEnv: MultiServerAllocation with servers as agents (ogasched.md §2–3)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from clustergym.core.parallel import ClusterParallelEnv
from clustergym.envs.multiserver.allocation.env import MultiServerAllocationEnv

__all__ = ["MultiServerAllocationParallelEnv", "parallel_env", "server_reward_split"]


def server_reward_split(reward_model: Any, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per-edge share (E,) of eq. 5 whose sum is q(x, y); summing it per server gives the agents' rewards.

    Eq. 5: q(x, y) = Σ_l x_l [G_l − O_l] with G_l = Σ_{r∈R_l} Σ_k f_r^k(y_(l,r)^k) and
    O_l = max_k β_k Σ_{r∈R_l} y_(l,r)^k. The gain is a sum over edges; edge e = (l, r) keeps
    g_e = Σ_k f_r^k(y_e^k). The overhead is not separable by server; with k*_l = argmax_k β_k
    Σ_{r∈R_l} y_(l,r)^k (the dominant type; ties to the lowest k) edge e bears the share of O_l in
    proportion to its part of the dominant type:
        o_e = O_l · y_e^{k*_l} / Σ_{r'∈R_l} y_(l,r')^{k*_l}   (= β_{k*_l} y_e^{k*_l}),
    and o_e = O_l / |R_l| (= 0) when that sum is 0. Then Σ_{e∈l} o_e = O_l and the edge reward
    x_l (g_e − o_e) sums over all edges to q(x, y) up to float rounding. Everything numeric comes
    from ``reward_model``, the single env's dynamics object (``env.dynamics``: its eq. 27 utilities
    and eq. 5 sums); only the split is new here.
    """
    pb = reward_model.problem
    ep = np.asarray(pb.edge_port)
    g = reward_model.utilities(y).sum(axis=1)  # (E,) g_e = Σ_k f_r^k(y_e^k), eq. 27
    _, over, per_type = reward_model.parts(y, with_sums=True)  # (L,) O_l, (L, K) Σ_{r∈R_l} y
    kstar = np.argmax(per_type * reward_model.beta, axis=1)  # (L,) dominant type k*_l
    dom = per_type[np.arange(pb.num_ports), kstar]  # (L,) Σ_{r∈R_l} y^{k*_l}
    degree = np.bincount(ep, minlength=pb.num_ports)  # (L,) |R_l|
    y_dom = y[np.arange(ep.size), kstar[ep]]  # (E,) y_e^{k*_l}
    share = np.where(dom[ep] > 0, y_dom / np.where(dom[ep] > 0, dom[ep], 1.0), 1.0 / np.maximum(degree[ep], 1))
    return np.where(x[ep], g - over[ep] * share, 0.0)  # (E,) x_l (g_e − o_e)


class MultiServerAllocationParallelEnv(ClusterParallelEnv):
    """MultiServerAllocation-v0 with one agent per server; drives one :class:`MultiServerAllocationEnv`.

    ## Description
    The single env's model (ogasched.md §2), decided by the servers: agent ``server_r`` splits its
    own capacity among the ports it serves, i.e. chooses its (|L_r|, K) block of y — the per-(r, k)
    decomposition of OGASched's projection (eq. 4 couples only the rows of one server). The blocks
    are joined into the single env's y (E, K) and the single env steps once (arrivals, the exact
    projection under "repair", and eq. 5 are the single env's). Agents are the servers with at
    least one channel (every server in generated scenarios).

    ## Action Space
    ``server_r``: ``Box(0, a, shape=(|L_r|, K), float32)`` in device units; row i is channel
    ``agent_edges[server_r][i]`` = (port ``agent_ports[server_r][i]``, r), column k a device type.
    No mask (all of Y is allowed; eq. 4 is Σ_i row_i^k <= c_r^k). Entries where the port does not
    request type k (a_l^k = 0) are bounded by 1 and ignored, as in the single env (no zero-width box).
    Only the single env's ``"channel"`` action mode (the servers split their own capacity).

    ## Observation Space (per agent: what server r knows by itself)
    | key      | space                 | meaning                                     |
    |----------|-----------------------|---------------------------------------------|
    | arrivals | MultiBinary(|L_r|)    | x_l(t) of the ports l ∈ L_r it serves       |
    | t        | Box(0, T, (1,), f32)  | slots elapsed                               |
    | arrival_share, port_reward_mean | Box((|L_r|,), f32) | the single env's statistics of those ports |
    ``state()``: float32 (L + 1,) = [arrivals of all ports, t] of the single env's observation.

    ## Rewards
    Eq. 5 is per port and its overhead max_k β_k Σ_{r∈R_l} y is not separable by server. Exact split
    (``server_reward_split``): edge e = (l, r) earns x_l (g_e − o_e), with its own gain
    g_e = Σ_k f_r^k(y_e^k) (eq. 27) and the share o_e = β_{k*_l} y_e^{k*_l} of the port's overhead
    O_l, k*_l the port's dominant type (ties: lowest k; o_e = O_l / |R_l| = 0 when O_l = 0); server r
    gets Σ_{e∈E_r} x_l (g_e − o_e). Σ_r r_r(t) = q(x(t), y(t)), the single env's reward, up to float
    rounding (the tests use |Σ_r r_r − q| <= 1e-9 max(1, |q|)). The numbers come from the single
    env's dynamics object (``env.dynamics``); the split is computed on the executed (repaired) y.

    ## Info (per agent)
    ``feedback``: ``allocation`` (its executed (|L_r|, K) block of y) and ``edge_reward`` (|L_r|,) the
    split above per row; ``t``; ``metrics``: the single env's evaluation-only metrics.

    ## Episode End
    All agents are truncated together at ``horizon``.

    ## Instances and padding
    ``reset(options={"scenario_seed": k})`` and ``instances`` switch the single env's instance; the
    agents and per-agent spaces must stay the same (|L_r| and the bounds a vary by instance, so
    without padding a switch raises a ValueError naming ``max_edges``). With ``max_edges`` every
    server is an agent and acts on ``Box(0, 1, (L, K))``, row l = channel (l, r) as a fraction of
    a_l^k (rows of ports it has no channel to are padding: inert; raise / dropped and counted in
    ``metrics["repaired"]``), and observes ``arrivals`` MultiBinary(L) (x_l(t) of the ports it
    serves, 0 elsewhere), ``channel_present`` MultiBinary(L), ``channel_demand`` Box(0, inf, (L, K))
    a_l^k / c_r^k, ``arrival_share`` and ``port_reward_mean`` (L,) (0 for the ports it does not serve)
    and ``t``; ``infos[agent]["action_mask"]`` (L,) and ``feedback`` are per port.

    ## Arguments
    Exactly the single env's kwargs (``instances``, ``max_edges`` included); ``render`` draws the single env.
    """

    metadata = {**ClusterParallelEnv.metadata, "name": "multiserver_allocation_parallel_v0"}

    def __init__(self, scenario: Any = "paper", **kwargs: Any):
        if kwargs.get("action_mode", "channel") != "channel":
            raise ValueError(f"action_mode={kwargs['action_mode']!r} is invalid here: the servers split their own "
                             "capacity, the \"channel\" action (the port modes are single-env actions)")
        env = MultiServerAllocationEnv(scenario, **kwargs)
        self._padded = env.max_edges is not None
        agents, obs_spaces, act_spaces, state_space = self._build(env.problem, float(env.horizon))
        super().__init__(env, agents, obs_spaces, act_spaces, state_space)

    def _build(self, pb, T: float) -> tuple:
        """Agents and spaces of problem ``pb``; sets the per-instance index arrays."""
        L, K = pb.num_ports, pb.num_device_types
        upper = np.asarray(pb.demand, dtype=np.float64)[np.asarray(pb.edge_port)]  # (E, K) a_l^k of eq. 3
        edges = [np.flatnonzero(pb.edge_server == r) for r in range(pb.num_servers)]
        # padded: every server is an agent and acts on one row per port (a fixed shape), in fractions of a
        self.agent_servers = [r for r in range(pb.num_servers) if self._padded or edges[r].size]
        agents = [f"server_{r}" for r in self.agent_servers]
        self.agent_edges = {a: edges[r] for a, r in zip(agents, self.agent_servers)}  # (|L_r|,) edge ids
        self.agent_ports = {a: np.asarray(pb.edge_port)[e] for a, e in self.agent_edges.items()}  # (|L_r|,) L_r
        obs = {"t": spaces.Box(0.0, T, shape=(1,), dtype=np.float32)}

        def stats(n: int) -> dict:  # the single env's statistics of the agent's ports (allocation/learner_stats.py)
            return {"arrival_share": spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32),
                    "port_reward_mean": spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)}

        if self._padded:
            obs_spaces = {a: spaces.Dict({**obs, "arrivals": spaces.MultiBinary(L), "channel_present": spaces.MultiBinary(L),
                                          "channel_demand": spaces.Box(0.0, np.inf, shape=(L, K), dtype=np.float32),
                                          **stats(L)})
                          for a in agents}
            act_spaces = {a: spaces.Box(0.0, 1.0, shape=(L, K), dtype=np.float32) for a in agents}
            cap = np.asarray(pb.capacity, dtype=np.float64)[pb.edge_server]
            dem = np.divide(upper, cap, out=np.zeros_like(cap), where=cap > 0)
            self._present, self._chan_demand = {}, {}
            for a in agents:
                m = np.zeros(L, dtype=np.int8)
                m[self.agent_ports[a]] = 1
                d = np.zeros((L, K), dtype=np.float32)
                d[self.agent_ports[a]] = dem[self.agent_edges[a]]
                self._present[a], self._chan_demand[a] = m, d
        else:
            obs_spaces = {a: spaces.Dict({**obs, "arrivals": spaces.MultiBinary(int(self.agent_edges[a].size)),
                                          **stats(int(self.agent_edges[a].size))})
                          for a in agents}
            high = np.where(upper > 0, upper, 1.0).astype(np.float32)  # a_l^k; 1 on the ignored entries (a_l^k = 0)
            act_spaces = {a: spaces.Box(0.0, high[self.agent_edges[a]],
                                        shape=(int(self.agent_edges[a].size), K), dtype=np.float32) for a in agents}
        state_space = spaces.Box(0.0, max(T, 1.0), shape=(L + 1,), dtype=np.float32)
        self._order = np.concatenate([self.agent_edges[a] for a in agents])
        self._edge_server = np.ascontiguousarray(pb.edge_server, dtype=np.int64)
        self._n_edges = pb.num_edges
        return agents, obs_spaces, act_spaces, state_space

    @property
    def reward_model(self):
        """The single env's dynamics object (eq. 5 and eq. 27 code), for the split."""
        return self.single_env.dynamics

    def _on_instance(self) -> None:
        pb = self.single_env.problem
        if pb is not self.problem:
            self._rebuild(pb, float(self.single_env.horizon))

    # -- joint action ---------------------------------------------------------------------------
    def _join(self, vals: list[np.ndarray]) -> np.ndarray:
        if self._padded:
            return self._join_padded(vals)
        flat = np.concatenate(vals, axis=0)  # (E, K) agent-major; the single env validates values
        joint = np.empty(flat.shape, dtype=np.result_type(flat.dtype, np.float64))
        joint[self._order] = flat
        return joint

    def _join_padded(self, vals: list[np.ndarray]) -> np.ndarray:
        """Per-port rows (fractions of a_l^k) -> the single env's (max_edges, K) action; rows of ports the
        server has no channel to are padding (inert: 0, else an error under "raise", dropped and counted
        under "repair")."""
        env = self.single_env
        joint = np.zeros(_shape(env.action_space))
        dropped = 0
        for a, v in zip(self.possible_agents, vals):
            v = np.asarray(v)
            if v.dtype.kind not in "biuf":
                raise ValueError(f"action of {a} has dtype {v.dtype}, expected real numbers ({self._action_spaces[a]})")
            # the single env validates the real entries (NaN/inf, eqs. 3–4); padding entries must be 0
            ports = self.agent_ports[a]
            joint[self.agent_edges[a]] = v[ports]
            off = np.ones(v.shape[0], dtype=bool)
            off[ports] = False
            pad = int(np.count_nonzero(v[off]))
            if pad:
                if env.infeasible == "raise":
                    l = int(np.flatnonzero(off & (v != 0).any(axis=1))[0])
                    raise ValueError(f"infeasible action: {a} allocates to port {l}, to which it has no channel "
                                     f"(a padding row: must be 0)")
                dropped += pad
        self._pad_dropped = dropped
        return joint

    def _split(self, joint: np.ndarray) -> dict[str, np.ndarray]:
        if self._padded:
            out = {}
            for a in self.possible_agents:
                v = np.zeros(_shape(self._action_spaces[a]), dtype=np.asarray(joint).dtype)
                v[self.agent_ports[a]] = joint[self.agent_edges[a]]
                out[a] = v
            return out
        return {a: joint[self.agent_edges[a]].copy() for a in self.possible_agents}  # dtype kept: exact replay

    # -- observations ---------------------------------------------------------------------------
    def _observe(self, obs: dict, info: dict) -> dict[str, dict]:
        arr, t = obs["arrivals"], obs["t"]
        share, mean = obs["arrival_share"], obs["port_reward_mean"]
        if self._padded:
            return {a: {"arrivals": arr * self._present[a], "t": t.copy(), "channel_present": self._present[a].copy(),
                        "channel_demand": self._chan_demand[a].copy(), "arrival_share": share * self._present[a],
                        "port_reward_mean": mean * self._present[a]} for a in self.possible_agents}
        return {a: {"arrivals": arr[self.agent_ports[a]], "t": t.copy(), "arrival_share": share[self.agent_ports[a]],
                    "port_reward_mean": mean[self.agent_ports[a]]} for a in self.possible_agents}

    def _state(self, obs: dict) -> np.ndarray:
        return np.concatenate([obs["arrivals"].astype(np.float32), obs["t"].astype(np.float32)])

    # -- reward and infos -----------------------------------------------------------------------
    def _split_reward(self, reward: float, info: dict) -> dict[str, float]:
        y = info["feedback"]["allocation"][:self._n_edges]  # (E, K) executed y (after any repair)
        if self._padded and self._pad_dropped:
            info["metrics"]["repaired"] += self._pad_dropped
        assert self._obs is not None  # set by reset
        x = self._obs["arrivals"].astype(bool)  # x(t) of the slot just played (the obs is not yet updated)
        self._edge_reward: np.ndarray = server_reward_split(self.reward_model, y, x)  # (E,)
        self._y: np.ndarray = y
        per_server = np.bincount(self._edge_server, weights=self._edge_reward, minlength=self.problem.num_servers)
        return {a: float(per_server[r]) for a, r in zip(self.possible_agents, self.agent_servers)}

    def _infos(self, info: dict, rewards: dict | None) -> dict[str, dict]:
        out = {}
        for a in self.possible_agents:
            d = {"t": info["t"]}
            if self._padded and "action_mask" in info:  # per port: channel of a port with a job
                m = np.zeros(self.problem.num_ports, dtype=np.int8)
                m[self.agent_ports[a]] = info["action_mask"][self.agent_edges[a]]
                d["action_mask"] = m
            if rewards is not None:
                e = self.agent_edges[a]
                if self._padded:
                    L, K = _shape(self._action_spaces[a])
                    alloc, er = np.zeros((L, K)), np.zeros(L)
                    alloc[self.agent_ports[a]], er[self.agent_ports[a]] = self._y[e], self._edge_reward[e]
                    d["feedback"] = {"allocation": alloc, "edge_reward": er}
                else:
                    d["feedback"] = {"allocation": self._y[e], "edge_reward": self._edge_reward[e]}
                d["metrics"] = info["metrics"]
            out[a] = d
        return out


def _shape(space: spaces.Space) -> tuple[int, ...]:
    """The shape of a Box action space (set for every Box)."""
    assert space.shape is not None
    return space.shape


def parallel_env(**kwargs: Any) -> MultiServerAllocationParallelEnv:
    """PettingZoo ParallelEnv of MultiServerAllocation-v0 (servers as agents); kwargs as the single env."""
    return MultiServerAllocationParallelEnv(**kwargs)
