"""Scenarios for P1, MultiServerChannel (ESDP paper, esdp.md §2 and §4 "Default Scenario Settings").

Public problem (:class:`ChannelProblem`): the bipartite graph G=(L,R,E), demands a_k^e, cluster
capacities c_k and supply costs f_k. Hidden truth (:class:`ChannelTruth`): arrival probabilities
rho_l and the law of the net utility Z̃_e(t) of every channel.

Modelling choices, each one a documented reading of the paper:

* **Capacities.** Table 3's "normalised" bounds on c (between 1 and 2) cannot be taken literally:
  with a_k^e in {1, 2} they admit about one channel. We set
  ``c_k = max(ceil(capacity_ratio * Σ_e a_k^e), max_e a_k^e)`` (default ratio 0.25: about a quarter
  of the channels fit at once, a contended cluster; every single channel fits on its own).
* **Supply costs.** "f_k(a_k^(l,r)) is generated from N(0.5, 0.1)": one draw per device type k and
  demand level a, sorted ascending in a so that a larger request never costs less; the cost of a
  channel is Σ_k f_k(a_k^e). The costs are public (they are inputs of Algorithm 1).
* **Net utility and normalisation (eqs. 3, 5, 7).** The raw mean of channel e is
  m_e = μ_e − Σ_k f_k(a_k^e) with μ_e ~ U(0.1, 1). The paper normalises Z̃ into [0, 1] "by tuning
  the f_k" (§3.1); we do it with one affine map per instance, ṽ_e = 0.05 + 0.9 (m_e − min m)/(max m − min m),
  so ṽ ∈ [0.05, 0.95].
* **Noise law (§4 "Default Scenario Settings": Z ~ N(μ_e, μ_e/2)).** The paper's std μ_e/2 carried
  through the same affine map is the *intended* std s_e = (μ_e/2)·0.9/(max m − min m) (0.22–0.27 on
  average over instances). Z̃_e(t) is drawn from a **Beta law with mean exactly ṽ_e** (the oracle
  uses ṽ) and variance σ_e² = min(s_e², 0.95 ṽ_e(1 − ṽ_e)): Beta(ṽ_e κ_e, (1 − ṽ_e) κ_e) with
  κ_e = ṽ_e(1 − ṽ_e)/σ_e² − 1 ≥ 1/19. A law on [0, 1] with mean ṽ cannot have a variance above
  ṽ(1 − ṽ) (the two-point law), so σ_e = s_e wherever [0, 1] allows it with the 5% margin, and
  ``truth.noise_std`` (realised) is below ``truth.intended_std`` only for channels with ṽ_e close
  to 0 or 1 (``tests/envs/multiserver/channel/test_channel_env.py`` checks the realised std per channel against σ_e and
  the fraction of channels at the intended std). Version note: up to this change Z̃ was a
  symmetric triangular law on [ṽ_e − h_e, ṽ_e + h_e], h_e ≤ min(ṽ_e, 1 − ṽ_e); its std cannot
  exceed min(ṽ, 1 − ṽ)/√6 ≤ 0.204, a median 58–63% of the intended std.
  A channel with σ_e = 0 (ṽ_e ∈ {0, 1} or s_e = 0) is deterministic: Z̃_e(t) = ṽ_e.
* **Graph.** Each (l, r) is a channel with probability ``channel_prob``; a port left without a
  channel gets one to a uniformly drawn server. Edges are ordered by (port, server).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from clustergym.core.scenario import (Scenario, as_generator, check_int, check_known, check_memory, check_real, freeze,
                             load_entry_point)

__all__ = ["ChannelProblem", "ChannelTruth", "channel_truth", "make_channel_scenario", "CHANNEL_SCENARIOS", "PAPER_DEFAULTS"]


@dataclass(frozen=True, eq=False)
class ChannelProblem:
    """What a scheduler knows about a P1 instance."""

    num_ports: int  # |L|
    num_servers: int  # |R|
    num_device_types: int  # K
    edge_port: np.ndarray  # (E,) int, port l of channel e
    edge_server: np.ndarray  # (E,) int, server r of channel e
    demand: np.ndarray  # (E, K) int >= 1, a_k^e device units
    capacity: np.ndarray  # (K,) int, c_k device units (eq. 2)
    cost: np.ndarray  # (E,) float, Σ_k f_k(a_k^e) in raw utility units (public)
    cost_table: np.ndarray  # (K, A+1) float, f_k(a) for a = 0..A (f_k(0) = 0)
    device_names: tuple[str, ...] = field(default=())

    @property
    def num_edges(self) -> int:
        return int(self.edge_port.shape[0])

    @property
    def port_edges(self) -> list[np.ndarray]:
        """Channels of each port (R_l as edge indices)."""
        return [np.flatnonzero(self.edge_port == l) for l in range(self.num_ports)]


@dataclass(frozen=True, eq=False)
class ChannelTruth:
    """What only the environment, oracles and metrics know.

    Z̃_e(t) ~ Beta(``beta_a[e]``, ``beta_b[e]``), derived from (ṽ_e, σ_e) so the two cannot drift
    apart: mean ṽ_e exactly, variance σ_e² (module docstring, "Noise law").
    """

    rho: np.ndarray  # (L,) arrival probability of each port per slot
    mean_utility: np.ndarray  # (E,) ṽ_e = E[Z̃_e(t)] in [0, 1] (eq. 7)
    intended_std: np.ndarray  # (E,) s_e, the paper's std μ_e/2 through the normalising map
    noise_std: np.ndarray  # (E,) σ_e = min(s_e, √(0.95 ṽ_e(1 − ṽ_e))), the std of Z̃_e(t)

    def __post_init__(self):
        v, sig = np.asarray(self.mean_utility), np.asarray(self.noise_std)
        if v.shape != sig.shape or np.any((v < 0) | (v > 1)) or np.any(sig < 0):
            raise ValueError("mean_utility must lie in [0, 1] and noise_std must be >= 0, both of shape (E,)")
        if np.any(sig * sig >= v * (1 - v) * (sig > 0) + (sig == 0)):
            raise ValueError("noise_std is invalid: expected noise_std² < ṽ(1 − ṽ) (a law on [0, 1] with mean ṽ "
                             "has variance at most ṽ(1 − ṽ)) or 0")

    @property
    def beta_kappa(self) -> np.ndarray:
        """(E,) κ_e = ṽ_e(1 − ṽ_e)/σ_e² − 1 (Var Beta(ṽκ, (1 − ṽ)κ) = ṽ(1 − ṽ)/(κ + 1)); 0 if σ_e = 0."""
        v, var = self.mean_utility, self.noise_std ** 2
        live = var > 0
        return np.where(live, v * (1.0 - v) / np.where(live, var, 1.0) - 1.0, 0.0)

    @property
    def beta_a(self) -> np.ndarray:
        """(E,) ṽ_e κ_e; 0 marks a deterministic channel (σ_e = 0)."""
        return self.mean_utility * self.beta_kappa

    @property
    def beta_b(self) -> np.ndarray:
        """(E,) (1 − ṽ_e) κ_e."""
        return (1.0 - self.mean_utility) * self.beta_kappa


PAPER_DEFAULTS = dict(
    num_ports=8,  # Table 3: |L| = 8
    num_servers=40,  # Table 3: |R| = 40
    num_device_types=3,  # Table 3: K = 3 (CPU, MEM, GPU)
    channel_prob=0.1,  # Table 3: ρ_(l,r) = 0.1
    rho=0.9,  # Table 3: ρ_l = 0.9
    demand_min=1,  # Table 3: lower bound of A
    demand_max=2,  # Table 3: upper bound of A
    capacity_ratio=0.25,  # our reading of the normalised capacity bounds (module docstring)
    utility_low=0.1,  # §4: μ_e ~ U(0.1, 1)
    utility_high=1.0,
    cost_mean=0.5,  # §4: f_k ~ N(0.5, 0.1)
    cost_std=0.1,
)

CHANNEL_SCENARIOS = ("paper", "toy", "alibaba-v2023")
# Trace presets: name -> "module:function" building the scenario (the loader imports this module for the
# problem types, so it is imported on first use).
CHANNEL_PRESETS = {"alibaba-v2023": "clustergym.envs.traces.alibaba:channel_scenario_from_preset"}


VARIANCE_CAP = 0.95  # σ² <= 0.95 ṽ(1 − ṽ): keeps the Beta law proper (κ >= 1/19)


def channel_truth(rho: np.ndarray, mean_utility: np.ndarray, intended_std: np.ndarray) -> ChannelTruth:
    """The hidden truth of a P1 instance: Beta noise with mean exactly ``mean_utility`` and std
    σ = min(``intended_std``, √(0.95 ṽ(1 − ṽ))) per channel (module docstring, "Noise law")."""
    v = np.asarray(mean_utility, dtype=float)  # (E,) ṽ_e
    s = np.asarray(intended_std, dtype=float)  # (E,) s_e
    if np.any(s < 0):
        raise ValueError("intended_std is invalid: expected values >= 0")
    sig = np.sqrt(np.minimum(s * s, VARIANCE_CAP * v * (1.0 - v)))  # σ_e
    return ChannelTruth(rho=freeze(np.asarray(rho, dtype=float)), mean_utility=freeze(v),
                        intended_std=freeze(s), noise_std=freeze(sig))


# The most cell updates one exact knapsack solve may take (|E| x Π_k (c_k + 1)): about a second per slot
# at numpy speed; demand_max=150 on the paper's defaults asks 7e9 (hours per run, 8 GiB).
MAX_GRID_WORK = 2e9


def check_grid_memory(capacity: np.ndarray, num_edges: int, p: dict) -> None:
    """Refuse a capacity grid the exact knapsack oracle (env, ``oracle=True``) and ESDP's DP (eq. 27) cannot
    handle, before any allocation: both work on Π_k (c_k + 1) cells with a decision bit per channel,
    about (|E| + 8) bytes per cell, and |E| cell updates per cell and slot. A ValueError naming the size
    parameters when the memory does not fit (:func:`clustergym.core.scenario.check_memory`) or the work per slot
    exceeds :data:`MAX_GRID_WORK` (``demand_max=150`` gave a 6.8 GiB MemoryError after a long wait)."""
    cells = float(np.prod(np.asarray(capacity, dtype=float) + 1.0))
    names = ", ".join(f"{k}={p[k]}" for k in ("num_device_types", "demand_min", "demand_max", "capacity_ratio",
                                              "channel_prob", "num_ports", "num_servers") if k in p)
    what = f"the knapsack DP over a capacity grid of {cells:.3g} cells x {num_edges} channels"
    check_memory((num_edges + 8.0) * cells, names, what)
    if num_edges * cells > MAX_GRID_WORK:
        raise ValueError(f"{names} give {what}: {num_edges * cells:.2g} cell updates per slot, more than the "
                         f"{MAX_GRID_WORK:.0e} allowed (hours per run); choose smaller values")


def _validate(p: dict) -> dict:
    p["num_ports"] = check_int("num_ports", p["num_ports"], 1, 10_000)
    p["num_servers"] = check_int("num_servers", p["num_servers"], 1, 100_000)
    # the generator works on dense (ports x servers) arrays: about 16 bytes per pair at the peak (measured)
    check_memory(16.0 * p["num_ports"] * p["num_servers"], f"num_ports={p['num_ports']}, num_servers={p['num_servers']}",
                 "the dense port x server arrays of the graph generator")
    p["num_device_types"] = check_int("num_device_types", p["num_device_types"], 1, 8)
    p["channel_prob"] = check_real("channel_prob", p["channel_prob"], 0.0, 1.0, lo_open=True)
    p["rho"] = check_real("rho", p["rho"], 0.0, 1.0)
    p["demand_min"] = check_int("demand_min", p["demand_min"], 1, 1000)
    p["demand_max"] = check_int("demand_max", p["demand_max"], p["demand_min"], 1000)
    p["capacity_ratio"] = check_real("capacity_ratio", p["capacity_ratio"], 0.0, 1.0, lo_open=True)
    p["utility_low"] = check_real("utility_low", p["utility_low"], 0.0, None)
    p["utility_high"] = check_real("utility_high", p["utility_high"], p["utility_low"], None)
    p["cost_mean"] = check_real("cost_mean", p["cost_mean"], None, None)
    p["cost_std"] = check_real("cost_std", p["cost_std"], 0.0, None)
    return p


def make_channel_scenario(name: str = "paper", seed: int | np.random.Generator | None = 0, **params) -> Scenario:
    """Build a P1 scenario by name; ``params`` override the named defaults (validated)."""
    if name == "toy":
        check_known(params, (), "toy")  # the toy scenario takes no parameters
        return _toy()
    if name in CHANNEL_PRESETS:  # trace preset; built in clustergym.envs.traces.alibaba
        return load_entry_point(CHANNEL_PRESETS[name])(seed=seed, **params)
    if name != "paper":
        raise ValueError(f"scenario={name!r} is invalid: expected one of {', '.join(map(repr, CHANNEL_SCENARIOS))}")
    check_known(params, PAPER_DEFAULTS, name)
    p = _validate({**PAPER_DEFAULTS, **params})
    rng = as_generator(seed)
    L, R, K = p["num_ports"], p["num_servers"], p["num_device_types"]

    # Graph: Bernoulli(channel_prob) per (l, r); every port keeps at least one channel.
    adj = rng.random((L, R)) < p["channel_prob"]
    lonely = ~adj.any(axis=1)
    adj[np.flatnonzero(lonely), rng.integers(0, R, size=int(lonely.sum()))] = True
    edge_port, edge_server = np.nonzero(adj)  # row-major: ordered by (port, server)
    E = edge_port.size

    demand = rng.integers(p["demand_min"], p["demand_max"] + 1, size=(E, K))  # a_k^e
    capacity = np.maximum(np.ceil(p["capacity_ratio"] * demand.sum(axis=0)), demand.max(axis=0)).astype(np.int64)
    check_grid_memory(capacity, E, p)

    A = p["demand_max"]
    f = np.sort(rng.normal(p["cost_mean"], p["cost_std"], size=(K, A)), axis=1)  # f_k(a), a = 1..A
    cost_table = np.concatenate([np.zeros((K, 1)), f], axis=1)  # (K, A+1)
    cost = cost_table[np.arange(K)[None, :], demand].sum(axis=1)  # (E,) Σ_k f_k(a_k^e)

    mu = rng.uniform(p["utility_low"], p["utility_high"], size=E)  # μ_e
    raw = mu - cost  # m_e, eq. 7 before normalisation
    span = max(raw.max() - raw.min(), 1e-9)
    v = 0.05 + 0.9 * (raw - raw.min()) / span  # ṽ_e in [0.05, 0.95]
    std = (mu / 2.0) * 0.9 / span  # N(μ, μ/2) carried through the same affine map

    problem = ChannelProblem(
        num_ports=L, num_servers=R, num_device_types=K,
        edge_port=freeze(edge_port.astype(np.int64)), edge_server=freeze(edge_server.astype(np.int64)),
        demand=freeze(demand.astype(np.int64)), capacity=freeze(capacity), cost=freeze(cost),
        cost_table=freeze(cost_table), device_names=("CPU", "MEM", "GPU", "NPU", "TPU", "FPGA", "D7", "D8")[:K],
    )
    truth = channel_truth(np.full(L, p["rho"]), v, std)
    return Scenario(name="paper", problem=problem, truth=truth, params=p)


def _toy() -> Scenario:
    """Two ports, three servers, one device type, capacity 3, every port always has a job.

    Channels (port, server, demand, ṽ): e0 = (0, 0, 2, 0.90), e1 = (0, 1, 1, 0.55),
    e2 = (1, 1, 1, 0.50), e3 = (1, 2, 1, 0.45). The optimum is {e1, e2, e3} with value 1.50; the
    value-greedy choice {e0, e1} gets only 1.45. Noise is small (std 0.05).
    """
    v = np.array([0.90, 0.55, 0.50, 0.45])
    demand = np.array([[2], [1], [1], [1]])
    cost_table = np.array([[0.0, 0.1, 0.2]])
    problem = ChannelProblem(
        num_ports=2, num_servers=3, num_device_types=1,
        edge_port=freeze(np.array([0, 0, 1, 1])), edge_server=freeze(np.array([0, 1, 1, 2])),
        demand=freeze(demand), capacity=freeze(np.array([3])),
        cost=freeze(cost_table[0, demand[:, 0]]), cost_table=freeze(cost_table), device_names=("CPU",),
    )
    truth = channel_truth(np.ones(2), v, np.full(4, 0.05))
    return Scenario(name="toy", problem=problem, truth=truth, params={})
