"""Scenarios for P2, MultiServerAllocation (OGASched paper, ogasched.md §2 and §4 "Default Settings").

Public problem (:class:`AllocationProblem`): the bipartite graph G=(L,R,E), per-port demands a_l^k,
per-server capacities c_r^k, the utilities f_r^k of eq. 27 (family and α per (r, k)) and the overhead
weights β_k of eq. 5. Hidden truth (:class:`AllocationTruth`): the arrival probability of each port.

**Settings named after their source (``setting``; docs/ogasched.md "Settings").** Each
fixes the units, the β range, the contention level and the reciprocal utility's form together, so an
instance is consistent with one source; any of these parameters given explicitly overrides it.

- ``"paper"`` (default): Table 1 as printed — α ∈ [1, 1.5], β ∈ [0.3, 0.5], contention 10, eq. 27's
  reciprocal α⁻¹ − (y + α)⁻¹ — with capacities and demands counted in **devices**
  (``units="device"``): the paper states no unit for a and c, only that the cluster is made of
  "computing devices" of K types drawn from the Alibaba trace, so we count whole devices (cores,
  8 GiB memory blocks, accelerators). Bit for bit the instances of the earlier ``units="device"``.
- ``"authors-code"``: what the authors' public review code uses (github.com/anonymity-for-review/
  OGASched, as read in its ``parameter.py`` / ``env.py``): its units (``units="code"``,
  below), β ∈ [0.01, 0.1], the reciprocal utility 1/(3α) − 1/(y + 3α) (stored as eq. 27's form with
  α_r^k replaced by 3α_r^k on the reciprocal entries, so agents and the env need nothing new;
  ``reciprocal="code"``) and its default contention 0.4, our **4** (our contention 10 is their 1).
- ``"table1-in-code-units"``: the earlier default ``units="paper-code"``, a mixture that is in neither
  source: the authors' code's units and contention normalisation with Table 1's β ∈ [0.3, 0.5],
  contention 10 and eq. 27's reciprocal. Kept so that earlier numbers can be reproduced (bit for bit).

Why ``"paper"`` is the default: it is the paper's own stated setup (claims are tested in
the paper's setup first); the other two are reported beside it by ``clustergym reproduce ogasched``.

Modelling choices, each a documented reading of the paper:

* **Device units (``units``; Table 1: |R| = 128, K = 6 CPU, MEM, GPU, NPU, TPU, FPGA).** The paper
  draws its machines from Alibaba traces we do not have and does not say in which units a_l^k and
  c_r^k are counted. With linear utilities the whole problem scales with the units: multiplying every
  a and c by s multiplies every reward by s, and η_0 at units × s behaves like η_0 / s at units × 1
  (tested exactly, ``test_scale_equivariance_with_linear_utilities``). Table 1's η_0 = 25 therefore
  only means something in some unit system. Two are offered (the setting picks one):

  - ``"code"`` (settings ``authors-code`` and ``table1-in-code-units``; called ``"paper-code"``
    formerly, a name that now raises an error naming its replacements): the ranges of the authors' public review code
    (github.com/anonymity-for-review/OGASched, ``ogasched/parameter.py`` and ``env.py``): c_r^k
    uniform integers, vCPU cores 1..127, MEM GiB 2..511, GPUs 0..63, NPUs and TPUs 0..7, FPGAs 0..3
    (all K types present, their non-"simplified" mode; D7, D8 beyond K = 6 take 0..7); demands
    a_l^k = (contention / 10) × U(low_k, high_k) — the authors draw the request from the node
    capacity range and multiply by a contention level in (0, 1), so **our contention 10 is their
    1**. At contention 10 the channel caps offer, in expectation, density × (lo+hi+1)/(lo+hi) ≈ 2.5×
    the capacity of every type (FPGA 3.3×), as in ``"device"``.
  - ``"device"`` (setting ``paper``; this package's original units): CPU cores U{8..32}, MEM U{8..32} (units of 8 GiB);
    each accelerator type is present with probability 0.5 (GPU) or 0.25 (NPU, TPU, FPGA) with a
    count from {1, 2, 4, 8}; absent means c_r^k = 0. Each port l has a base profile w_l^k ~
    U(0.5, 1.5) for CPU and MEM and, for each accelerator type, with the presence probability above
    (0 otherwise), scaled per type so that at contention 1 the channel caps sum to a quarter of the
    capacity, Σ_{(l,r)∈E} base_l^k = Σ_r c_r^k / 4, and a_l^k = contention × base_l^k: contention 10
    offers exactly 2.5× the capacity.

  What the units do to Table 1's step: Table 1's η_0 and decay "tune the learning rate around the
  value (26)"; eq. 26's step η_t = diam(Y) / (||∇q|| √T) at T = 2000 has a median of about 4.7
  (instances 0–4: 4.4–4.9) in paper-code units and about 0.40 (0.36–0.44) in device units, so
  η_0 = 25 is ≈ 5× eq. 26 in the first and ≈ 60× in the second (docs/ogasched.md, "Device units").
* **Contention level (Table 1: 10; Fig. 3(c)).** "A multiplier to the resource requirements of jobs":
  a_l^k is proportional to ``contention`` in both unit systems (above). Fierce at 10: with ρ = 0.7 the
  jobs present in a slot can absorb about 1.75× of every device type. Demands are real numbers
  (y is fractional anyway, eq. 2 footnote).
* **Graph density (Table 2: Σ_r |L_r| / |R| ≈ 2–3).** Server r connects to d_r ports drawn without
  replacement, d_r = ⌊density⌋ + Bernoulli(density − ⌊density⌋) (so the mean is ``density``, default
  2.5); a port left without a server gets one uniformly drawn server. Edges are ordered by
  (port, server).
* **Utilities (eq. 27, Fig. 7).** ``utility`` is one of linear, log, reciprocal, poly (every (r, k)
  uses that family) or ``mixed`` (default: each (r, k) draws a family uniformly; Fig. 7's "all
  reciprocal" wording suggests the default mixes them). α_r^k ~ U(1, 1.5) and β_k ~ U(0.3, 0.5)
  (Table 1; setting ``authors-code``: β ~ U(0.01, 0.1) and the reciprocal 1/(3α) − 1/(y + 3α)).
  Utilities and β are public: OGASched needs them for the gradient of eq. 9.
* **Arrivals.** x_l(t) ~ Bernoulli(ρ_l) independently per slot; ``paper``: ρ_l = ρ = 0.7 (Table 1).

Scenario ``alibaba-v2023`` builds the same objects from the shipped preset (see
``clustergym.envs.traces.alibaba``); ``toy`` is a hand-checked instance with a known optimum;
``large`` is §4.3's |L| = 100, |R| = 1024 on the paper generator; ``fig2`` is Fig. 2's caption
setting, "T = 8000, β ∈ [0.4, 0.6], and contention level is 11", on Table 1 otherwise (the horizon is
an env argument: ``gym.make(..., scenario="fig2", horizon=FIG2_HORIZON)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from clustergym.core.scenario import (Scenario, as_generator, check_choice, check_int, check_known, check_memory, check_real,
                             freeze, load_entry_point)

__all__ = ["AllocationProblem", "AllocationTruth", "make_allocation_scenario", "ALLOCATION_SCENARIOS",
           "PAPER_DEFAULTS", "FIG2_DEFAULTS", "FIG2_HORIZON", "UNITS", "UTILITY_FAMILIES", "utility_value",
           "utility_derivative", "draw_utilities"]

UTILITY_FAMILIES = ("linear", "log", "reciprocal", "poly")  # codes 0..3, eq. 27
DEVICE_NAMES = ("CPU", "MEM", "GPU", "NPU", "TPU", "FPGA", "D7", "D8")


@dataclass(frozen=True, eq=False)
class AllocationProblem:
    """What a scheduler knows about a P2 instance."""

    num_ports: int  # |L|
    num_servers: int  # |R|
    num_device_types: int  # K
    edge_port: np.ndarray  # (E,) int, port l of channel e (edges ordered by (port, server))
    edge_server: np.ndarray  # (E,) int, server r of channel e
    demand: np.ndarray  # (L, K) float >= 0, a_l^k device units (eq. 3 cap of every channel of l)
    capacity: np.ndarray  # (R, K) float >= 0, c_r^k device units (eq. 4)
    alpha: np.ndarray  # (R, K) float, α_r^k of eq. 27
    utility: np.ndarray  # (R, K) int, family code of f_r^k (index into UTILITY_FAMILIES)
    beta: np.ndarray  # (K,) float, β_k of eq. 5
    device_names: tuple[str, ...] = field(default=())
    horizon: int | None = None  # T, slots per episode (public: the env truncates at T); set by the env
    action_mode: str = "channel"  # set by the env: "channel", "port" or "port_device" (allocation/actions.py)

    @property
    def num_edges(self) -> int:
        return int(self.edge_port.shape[0])

    @property
    def edge_demand(self) -> np.ndarray:
        """(E, K) a_l^k of the port of each channel (the upper bound of eq. 3)."""
        return self.demand[self.edge_port]


@dataclass(frozen=True, eq=False)
class AllocationTruth:
    """What only the environment and metrics know."""

    rho: np.ndarray  # (L,) arrival probability of each port per slot


PAPER_DEFAULTS = dict(
    setting="paper",  # units, β range, contention and reciprocal form from one source (module docstring)
    units=None,  # None: the setting's ("device" for paper, "code" for the others)
    num_ports=10,  # Table 1: |L| = 10
    num_servers=128,  # Table 1: |R| = 128
    num_device_types=6,  # Table 1: K = 6 (CPU, MEM, GPU, NPU, TPU, FPGA)
    rho=0.7,  # Table 1: job arrival probability
    contention=None,  # None: the setting's (Table 1: 10; authors-code: 4, their 0.4)
    density=2.5,  # Table 2: graph density ≈ 2–3
    utility="mixed",  # eq. 27 families; "mixed" draws one per (r, k)
    alpha_low=1.0,  # Table 1: α ∈ [1.0, 1.5]
    alpha_high=1.5,
    beta_low=None,  # None: the setting's (paper, Table 1: β ∈ [0.3, 0.5]; authors-code: [0.01, 0.1])
    beta_high=None,
    reciprocal=None,  # None: the setting's ("paper": eq. 27; "code": 1/(3α) − 1/(y + 3α))
)
# What each setting fixes (module docstring); an explicit parameter overrides its entry.
SETTINGS = {
    "paper": dict(units="device", beta_low=0.3, beta_high=0.5, contention=10.0, reciprocal="paper"),
    "authors-code": dict(units="code", beta_low=0.01, beta_high=0.1, contention=4.0, reciprocal="code"),
    "table1-in-code-units": dict(units="code", beta_low=0.3, beta_high=0.5, contention=10.0, reciprocal="paper"),
}
LARGE_DEFAULTS = dict(PAPER_DEFAULTS, num_ports=100, num_servers=1024)  # §4.3
# Fig. 2's caption: "T = 8000, β ∈ [0.4, 0.6], and contention level is 11" (the rest is Table 1).
FIG2_DEFAULTS = dict(PAPER_DEFAULTS, beta_low=0.4, beta_high=0.6, contention=11.0)
_SETTING_KEYS = ("units", "beta_low", "beta_high", "contention", "reciprocal")
FIG2_HORIZON = 8000  # Fig. 2's T: pass horizon=FIG2_HORIZON with scenario="fig2"

ALLOCATION_SCENARIOS = ("paper", "fig2", "large", "toy", "alibaba-v2023")
# Trace presets: name -> "module:function" building the scenario (the loader imports this module for the
# problem types, so it is imported on first use).
ALLOCATION_PRESETS = {"alibaba-v2023": "clustergym.envs.traces.alibaba:allocation_scenario_from_preset"}
UNITS = ("code", "device")
RECIPROCAL_FORMS = ("paper", "code")

# units="paper-code": per device type, the authors' integer capacity range [low, high) (their
# np.random.randint(min, max) with min/max of ogasched/parameter.py: vCPU cores 1..127, MEM GiB
# 2..511, GPUs 0..63, TPU and NPU 0..7, FPGA 0..3); D7, D8 (beyond the paper's K = 6) take 0..7.
# Columns follow DEVICE_NAMES (CPU, MEM, GPU, NPU, TPU, FPGA, D7, D8).
_CODE_LOW = np.array([1, 2, 0, 0, 0, 0, 0, 0])
_CODE_HIGH = np.array([128, 512, 64, 8, 8, 4, 8, 8])
# Our contention 10 is the authors' contention 1 (module docstring): a_l^k = (contention / 10) × U(low, high).
CODE_CONTENTION_SCALE = 10.0

# Per device type: probability that a server has it, and the count law (paper scenario).
_PRESENT = np.array([1.0, 1.0, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25])


def utility_value(y: np.ndarray, alpha: np.ndarray, code: np.ndarray | int) -> np.ndarray:
    """f_r^k(y) of eq. 27, elementwise (alpha and code broadcast against y; code may be one int)."""
    if isinstance(code, (int, np.integer)):
        c = int(code)
        if c == 0:
            return alpha * y
        if c == 1:
            return alpha * np.log1p(y)
        if c == 2:
            return 1.0 / alpha - 1.0 / (y + alpha)
        return alpha * np.sqrt(y + 1.0) - alpha
    lin = alpha * y
    log = alpha * np.log1p(y)
    rec = 1.0 / alpha - 1.0 / (y + alpha)
    pol = alpha * np.sqrt(y + 1.0) - alpha
    return np.where(code == 0, lin, np.where(code == 1, log, np.where(code == 2, rec, pol)))


def utility_derivative(y: np.ndarray, alpha: np.ndarray, code: np.ndarray | int) -> np.ndarray:
    """(f_r^k)'(y) of eq. 27, elementwise (used by eq. 9; code may be one int)."""
    if isinstance(code, (int, np.integer)):
        c = int(code)
        if c == 0:
            return np.broadcast_to(alpha, np.broadcast_shapes(np.shape(y), np.shape(alpha))).astype(np.float64)
        if c == 1:
            return alpha / (1.0 + y)
        if c == 2:
            return 1.0 / (y + alpha) ** 2
        return alpha / (2.0 * np.sqrt(y + 1.0))
    lin = np.broadcast_to(alpha, np.broadcast_shapes(np.shape(y), np.shape(alpha)))
    log = alpha / (1.0 + y)
    rec = 1.0 / (y + alpha) ** 2
    pol = alpha / (2.0 * np.sqrt(y + 1.0))
    return np.where(code == 0, lin, np.where(code == 1, log, np.where(code == 2, rec, pol)))


def apply_setting(p: dict, explicit) -> dict:
    """Fill the entries of ``p`` the chosen ``setting`` fixes (SETTINGS), except those in ``explicit``."""
    if p.get("units") == "paper-code":
        raise ValueError("units='paper-code' was renamed: use setting='table1-in-code-units' for the "
                         "earlier default instances, or units='code' for the authors' code's units")
    p["setting"] = check_choice("setting", p["setting"], tuple(SETTINGS))
    for k, v in SETTINGS[p["setting"]].items():
        if k not in explicit or p[k] is None:
            p[k] = v
    return p


def _validate(p: dict) -> dict:
    p["units"] = check_choice("units", p["units"], UNITS)
    p["reciprocal"] = check_choice("reciprocal", p["reciprocal"], RECIPROCAL_FORMS)
    p["num_ports"] = check_int("num_ports", p["num_ports"], 1, 10_000)
    p["num_servers"] = check_int("num_servers", p["num_servers"], 1, 100_000)
    # the generator works on dense (ports x servers) arrays: about 25 bytes per pair at the peak (measured)
    check_memory(25.0 * p["num_ports"] * p["num_servers"], f"num_ports={p['num_ports']}, num_servers={p['num_servers']}",
                 "the dense port x server arrays of the graph generator")
    p["num_device_types"] = check_int("num_device_types", p["num_device_types"], 1, 8)
    p["rho"] = check_real("rho", p["rho"], 0.0, 1.0)
    check_demand_params(p)
    return p


def random_graph(rng: np.random.Generator, L: int, R: int, density: float) -> tuple[np.ndarray, np.ndarray]:
    """Edges (port, server) with Σ_r |L_r| / |R| ≈ density; every port and server has a channel."""
    base = int(np.floor(density))
    d = np.minimum(base + (rng.random(R) < density - base), L)  # (R,) ports per server
    keys = rng.random((R, L))
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)
    adj = (rank < d[:, None]).T  # (L, R): server r takes its d_r lowest-key ports
    lonely = ~adj.any(axis=1)
    adj[np.flatnonzero(lonely), rng.integers(0, R, size=int(lonely.sum()))] = True
    edge_port, edge_server = np.nonzero(adj)  # row-major: ordered by (port, server)
    return edge_port.astype(np.int64), edge_server.astype(np.int64)


def scale_demands(base: np.ndarray, capacity: np.ndarray, edge_port: np.ndarray, contention: float) -> np.ndarray:
    """a_l^k = contention × s_k × base_l^k with Σ_{(l,r)∈E} s_k base_l^k = Σ_r c_r^k / 4 (module doc)."""
    offered = base[edge_port].sum(axis=0)  # (K,) Σ_E base
    s = np.where(offered > 0, 0.25 * capacity.sum(axis=0) / np.where(offered > 0, offered, 1.0), 0.0)
    return contention * base * s[None, :]


def draw_utilities(rng: np.random.Generator, R: int, K: int, p: dict):
    """α_r^k ~ U(alpha_low, alpha_high) and the family of each f_r^k (eq. 27), β_k ~ U(beta_low, beta_high).

    Returns alpha (R, K), code (R, K) int64 (one family per (r, k) if ``p["utility"] == "mixed"``), beta (K,).
    """
    alpha = rng.uniform(p["alpha_low"], p["alpha_high"], size=(R, K))
    if p["utility"] == "mixed":
        code = rng.integers(0, len(UTILITY_FAMILIES), size=(R, K))
    else:
        code = np.full((R, K), UTILITY_FAMILIES.index(p["utility"]), dtype=np.int64)
    beta = rng.uniform(p["beta_low"], p["beta_high"], size=K)
    return alpha, code.astype(np.int64), beta


def check_demand_params(p: dict) -> None:
    """Validate, in place, the parameters the paper scenario and the trace preset share: contention,
    density, the utility family and the α, β ranges (eqs. 27, 5)."""
    p["contention"] = check_real("contention", p["contention"], 0.0, 1e6, lo_open=True)
    try:  # the upper end is num_ports (a server cannot connect to more ports than there are): name both
        p["density"] = check_real("density", p["density"], 1.0, float(p["num_ports"]))
    except ValueError as exc:
        raise ValueError(f"{exc} (density = Σ_r |L_r| / |R| is at most num_ports={p['num_ports']})") from None
    p["utility"] = check_choice("utility", p["utility"], (*UTILITY_FAMILIES, "mixed"))
    # α >= 1e-3: the reciprocal utility's slope 1/(y + α)² at 0 is 1/α², and the best-static LP (HiGHS) fails
    # from α = 1e-6 on (a model error, found by the fuzz suite); 1e-3 keeps the slopes <= 1e6
    p["alpha_low"] = check_real("alpha_low", p["alpha_low"], 1e-3, None)
    p["alpha_high"] = check_real("alpha_high", p["alpha_high"], p["alpha_low"], None)
    p["beta_low"] = check_real("beta_low", p["beta_low"], 0.0, 1.0)
    p["beta_high"] = check_real("beta_high", p["beta_high"], p["beta_low"], 1.0)

def _check_params(name: str, params: dict, allowed: dict) -> dict:
    check_known(params, allowed, name)
    return {**allowed, **params}


def make_allocation_scenario(name: str = "paper", seed: int | np.random.Generator | None = 0, **params) -> Scenario:
    """Build a P2 scenario by name; ``params`` override the named defaults (validated)."""
    if name == "toy":
        check_known(params, (), "toy")  # the toy scenario takes no parameters
        return _toy()
    if name in ALLOCATION_PRESETS:
        return load_entry_point(ALLOCATION_PRESETS[name])(seed=seed, **params)
    defaults = {"paper": PAPER_DEFAULTS, "fig2": FIG2_DEFAULTS, "large": LARGE_DEFAULTS}
    if name not in defaults:
        raise ValueError(f"scenario={name!r} is invalid: expected one of {', '.join(map(repr, ALLOCATION_SCENARIOS))}")
    p = _check_params(name, params, defaults[name])
    p = _validate(apply_setting(p, {k for k in params if k not in ("setting",)} |
                                (set(_SETTING_KEYS) & {k for k, v in defaults[name].items() if v is not None})))
    rng = as_generator(seed)
    L, R, K = p["num_ports"], p["num_servers"], p["num_device_types"]

    edge_port, edge_server = random_graph(rng, L, R, p["density"])
    if p["units"] == "device":
        present = _PRESENT[:K]
        has = rng.random((R, K)) < present[None, :]
        counts = rng.choice(np.array([1, 2, 4, 8]), size=(R, K)).astype(np.float64)
        counts[:, :min(K, 2)] = rng.integers(8, 33, size=(R, min(K, 2)))  # CPU cores, MEM in 8 GiB
        capacity = np.where(has, counts, 0.0)  # (R, K) device units

        wants = rng.random((L, K)) < present[None, :]
        base = np.where(wants, rng.uniform(0.5, 1.5, size=(L, K)), 0.0)
        demand = scale_demands(base, capacity, edge_port, p["contention"])  # (L, K) device units
    else:  # "code": the authors' ranges (ogasched/env.py generate_graph, non-simplified: all K types)
        low, high = _CODE_LOW[:K], _CODE_HIGH[:K]
        capacity = rng.integers(low, high, size=(R, K)).astype(np.float64)  # (R, K) cores, GiB, devices
        demand = (p["contention"] / CODE_CONTENTION_SCALE) * rng.uniform(low, high, size=(L, K))  # (L, K)
    alpha, code, beta = draw_utilities(rng, R, K, p)
    if p["reciprocal"] == "code":  # the authors' 1/(3α) − 1/(y + 3α) is eq. 27's reciprocal with α -> 3α
        alpha = np.where(code == UTILITY_FAMILIES.index("reciprocal"), 3.0 * alpha, alpha)

    problem = AllocationProblem(
        num_ports=L, num_servers=R, num_device_types=K, edge_port=freeze(edge_port), edge_server=freeze(edge_server),
        demand=freeze(demand), capacity=freeze(capacity), alpha=freeze(alpha), utility=freeze(code),
        beta=freeze(beta), device_names=DEVICE_NAMES[:K])
    truth = AllocationTruth(rho=freeze(np.full(L, p["rho"])))
    return Scenario(name=name, problem=problem, truth=truth, params=p)


def _toy() -> Scenario:
    """Two ports, two servers, one device type, linear utilities, both ports always have a job.

    Port 0 connects to servers 0 and 1, port 1 to server 1 only; a = (2, 2), c = (2, 2),
    α = (1.4, 1.0), β = 0.5. Every unit on server 0 is worth 1.4 − 0.5 = 0.9 and every unit on
    server 1 is worth 0.5 to whichever port holds it, so the best static allocation fills both servers:
    value 2·0.9 + 2·0.5 = 2.8 per slot (known optimum).
    """
    problem = AllocationProblem(
        num_ports=2, num_servers=2, num_device_types=1,
        edge_port=freeze(np.array([0, 0, 1])), edge_server=freeze(np.array([0, 1, 1])),
        demand=freeze(np.array([[2.0], [2.0]])), capacity=freeze(np.array([[2.0], [2.0]])),
        alpha=freeze(np.array([[1.4], [1.0]])), utility=freeze(np.zeros((2, 1), dtype=np.int64)),
        beta=freeze(np.array([0.5])), device_names=("CPU",))
    return Scenario(name="toy", problem=problem, truth=AllocationTruth(rho=freeze(np.ones(2))), params={})
