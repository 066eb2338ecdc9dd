"""Scenarios for P3, RingAllReduce (GADGET paper, gadget.md §VI.1 "Experiment Settings").

Public problem (:class:`RingProblem`): the fat-tree :class:`Topology` and the per-job caps the
spaces need. Job attributes (N_i, F_i, ζ_i, b_i, λ_i) are public *once a job has arrived* (the
env shows them for the visible window). Hidden truth (:class:`RingTruth`): the arrival process, the
laws of the job attributes and the seed of the instance's job stream (``job_seed``), i.e. everything
about future jobs.

**An instance is a cluster and a workload.** The scenario seed draws the topology and then
``job_seed``; the job stream (Poisson arrival counts and every job's attributes, §VI.1's laws) is
drawn from ``job_seed`` alone, so two instances differ in their jobs even where the topology does
not bind (at the default load every job gets its full size on any drawn topology, so instances
that shared one job list would give every agent the same total). Given the jobs, the model of
§IV has no run-time randomness: the dynamics seed of ``reset`` leaves the episode unchanged and
reaches only randomised agents (``agent.reset(problem, seed)``).

Paper defaults (§VI.1), field by field: T = 200; S = 50 servers split at random into racks, the
number of racks uniform in {2..5}; GPUs per server from {1, 2, 4, 8}; server–ToR bandwidth
U[10, 100] Gbps and ToR–core U[200, 3200] Gbps (full duplex, same per direction); integer job
parameters uniform in N_i ∈ [1, 5], F_i ∈ [1000, 6000], ζ_i ∈ [50, 500]; b_i ∈ [100 Mbps, 5 Gbps]
(integer Mbps); sigmoid utility with λ1 ∈ [1, 100], λ2 ∈ (0, 1), λ3 ∈ [300, 3000].

Modelling choices where the paper is ambiguous:

* **Budget (eq. 3 as specialised in §VI).** F_i is "the maximum number of iterations" while eq. 3
  is written Σ_t Σ_s y_is[t] ≤ F_i in worker-slots. With T = 200 and N_i ≤ 5 a job can use at most
  1000 worker-slots, so the literal reading never binds. We read eq. 3 with l_i = ζ_i (iterations
  per worker-slot, the same units as λ3 and the utility's argument ζ_i z): a job may run
  ``budget_i = max(1, floor(F_i / ζ_i))`` worker-slots (``budget_mode="iterations"``, default).
  ``budget_mode="worker_slots"`` is the literal reading (budget_i = F_i).
* **Arrivals.** The paper uses "the job arrival pattern from the Google Cluster data", which we do
  not have. Default: Poisson with ``arrival_rate`` jobs per slot. Scenario ``"philly"`` uses the
  submit times of a Philly window (shipped preset) rescaled so that its mean rate is
  ``arrival_rate``, and its GPU counts as N_i (capped at ``workers_max``); the other attributes
  are drawn as in the paper.
* **Racks.** "Randomly divided": a uniformly random permutation of the servers cut at uniformly
  random distinct points into ``num_racks`` non-empty racks.
* **Capacity scaling (Figs. 5–6).** ``gpu_scale`` multiplies every C_s (rounded, at least 1),
  ``bw_scale`` every link bandwidth.
* **tiresias-60.** The 60 jobs of Tiresias' ``60_job.csv`` on its ``n32g4`` cluster (1 rack,
  32 servers × 4 GPUs): a_i = floor(submit / ``slot_seconds``), N_i = num_gpu, F_i = iterations,
  ζ_i = iterations / (num_gpu · ceil(duration / slot_seconds)) so that the budget F_i/ζ_i is the
  job's GPU-time in worker-slots, λ3 = 0.9 F_i (most of the requested iterations), and λ1, λ2,
  b_i and link bandwidths drawn as in the paper.
* **gpu-short.** The paper scenario on 10 servers instead of 50 (every other parameter the paper's):
  a cluster short of GPUs. On the paper's cluster GADGET gives every visible job its cap in every
  slot at every load tried, so no policy can beat it there (docs/drl.md, P3); on this one the GPUs
  bind, GADGET falls below the window bound (``oracle.run_upper_bound``) and LAS beats it. For a
  given scenario seed the instance is that of ``"paper"`` with ``num_servers=10``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from clustergym.core.scenario import Scenario, check_known, as_generator, check_choice, check_int, check_real, freeze
from clustergym.envs.ringallreduce.topology import Topology

__all__ = ["RingProblem", "RingTruth", "JobBatch", "make_ring_scenario", "draw_jobs", "sigmoid_utility",
           "RING_SCENARIOS", "PAPER_DEFAULTS", "GPU_SHORT_SERVERS"]

GPU_SHORT_SERVERS = 10  # servers of the "gpu-short" preset (the paper's 50 with the GPUs short at its load)
RING_SCENARIOS = ("paper", "philly", "tiresias-60", "toy", "gpu-short")
_PRESETS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "traces", "presets")


def sigmoid_utility(x, lam1, lam2, lam3):
    """μ_i(x) = λ1 / (1 + exp(−λ2 (x − λ3))) of §VI, x = ζ_i z (iterations). Overflow-safe."""
    a = -lam2 * (x - lam3)
    return lam1 * np.exp(-np.logaddexp(0.0, a))


@dataclass(frozen=True, eq=False)
class RingProblem:
    """What a scheduler knows about a P3 instance (the cluster; jobs are shown as they arrive)."""

    topology: Topology
    workers_max: int  # largest N_i any job can have (bounds the action space)
    budget_mode: str  # "iterations" (budget F_i/ζ_i worker-slots) or "worker_slots" (budget F_i)
    max_jobs: int = 0  # J_max, the visible window (set by the env)
    action_mode: str = "placement"  # set by the env: "placement" or "ring_size"

    @property
    def num_servers(self) -> int:
        return self.topology.num_servers


@dataclass(frozen=True, eq=False)
class RingTruth:
    """Future arrivals: a Poisson rate or fixed trace arrivals, and the attribute laws."""

    arrival_rate: float  # jobs per slot (Poisson), when ``trace_slot`` is None
    params: dict  # attribute ranges (validated generator parameters)
    trace_slot: np.ndarray | None = None  # (N,) int arrival slot of each trace job, sorted
    trace_workers: np.ndarray | None = None  # (N,) int N_i of each trace job
    trace_budget_iters: np.ndarray | None = None  # (N,) F_i, or None to draw
    trace_zeta: np.ndarray | None = None  # (N,) ζ_i, or None to draw
    trace_lambda3: np.ndarray | None = None  # (N,) λ3, or None to draw
    # seed of the instance's job stream (arrival counts and attributes, ``dynamics.job_generators``): drawn
    # from the scenario seed's generator, so the jobs are part of the instance, as its topology
    job_seed: int = 0


@dataclass
class JobBatch:
    """Jobs as a structure of arrays."""

    arrival: np.ndarray  # (n,) int slot a_i
    workers: np.ndarray  # (n,) int N_i
    budget_iters: np.ndarray  # (n,) float F_i
    zeta: np.ndarray  # (n,) float ζ_i iterations per worker-slot
    bw: np.ndarray  # (n,) float b_i Gbps
    lam1: np.ndarray  # (n,)
    lam2: np.ndarray  # (n,)
    lam3: np.ndarray  # (n,)
    budget: np.ndarray  # (n,) int worker-slots (eq. 3 / 11)


PAPER_DEFAULTS = dict(
    num_servers=50,  # §VI.1: S = 50
    num_racks=0,  # §VI.1: random in [2, 5] (0 = draw)
    gpu_choices=(1, 2, 4, 8),  # §VI.1, following Themis
    gpu_scale=1.0,  # Figs. 5–6 sweeps (ours)
    bw_scale=1.0,
    server_bw_min=10.0, server_bw_max=100.0,  # §VI.1 Gbps
    rack_bw_min=200.0, rack_bw_max=3200.0,  # §VI.1 Gbps
    arrival_rate=2.0,  # jobs per slot (Poisson; our default load, see docs/gadget.md)
    workers_min=1, workers_max=5,  # N_i ∈ [1, 5]
    budget_min=1000, budget_max=6000,  # F_i ∈ [1000, 6000]
    zeta_min=50, zeta_max=500,  # ζ_i ∈ [50, 500]
    bw_min=0.1, bw_max=5.0,  # b_i ∈ [100 Mbps, 5 Gbps]
    lambda1_min=1.0, lambda1_max=100.0,
    lambda2_max=1.0,  # λ2 ∈ (0, λ2_max)
    lambda3_min=300.0, lambda3_max=3000.0,
    budget_mode="iterations",
    slot_seconds=60.0,  # tiresias-60 only
)


def _validate(p: dict) -> dict:
    p["num_servers"] = check_int("num_servers", p["num_servers"], 1, 10_000)
    p["num_racks"] = check_int("num_racks", p["num_racks"], 0, p["num_servers"])
    gc = p["gpu_choices"]
    if not isinstance(gc, (list, tuple)) or not gc or not all(isinstance(g, (int, np.integer)) and g >= 1 for g in gc):
        raise ValueError(f"gpu_choices={gc!r} is invalid: expected a non-empty list of integers >= 1")
    p["gpu_choices"] = tuple(int(g) for g in gc)
    p["gpu_scale"] = check_real("gpu_scale", p["gpu_scale"], 0.0, 100.0, lo_open=True)
    p["bw_scale"] = check_real("bw_scale", p["bw_scale"], 0.0, 100.0, lo_open=True)
    for a in ("server_bw", "rack_bw"):
        p[f"{a}_min"] = check_real(f"{a}_min", p[f"{a}_min"], 0.0, None, lo_open=True)
        p[f"{a}_max"] = check_real(f"{a}_max", p[f"{a}_max"], p[f"{a}_min"], None)
    p["arrival_rate"] = check_real("arrival_rate", p["arrival_rate"], 0.0, 1000.0, lo_open=True)
    p["workers_min"] = check_int("workers_min", p["workers_min"], 1, 64)
    p["workers_max"] = check_int("workers_max", p["workers_max"], p["workers_min"], 64)
    p["budget_min"] = check_int("budget_min", p["budget_min"], 1, 10**9)
    p["budget_max"] = check_int("budget_max", p["budget_max"], p["budget_min"], 10**9)
    p["zeta_min"] = check_int("zeta_min", p["zeta_min"], 1, 10**9)
    p["zeta_max"] = check_int("zeta_max", p["zeta_max"], p["zeta_min"], 10**9)
    p["bw_min"] = check_real("bw_min", p["bw_min"], 0.0, None)
    p["bw_max"] = check_real("bw_max", p["bw_max"], p["bw_min"], None)
    p["lambda1_min"] = check_real("lambda1_min", p["lambda1_min"], 0.0, None, lo_open=True)
    p["lambda1_max"] = check_real("lambda1_max", p["lambda1_max"], p["lambda1_min"], None)
    p["lambda2_max"] = check_real("lambda2_max", p["lambda2_max"], 0.0, None, lo_open=True)
    p["lambda3_min"] = check_real("lambda3_min", p["lambda3_min"], 0.0, None)
    p["lambda3_max"] = check_real("lambda3_max", p["lambda3_max"], p["lambda3_min"], None)
    p["budget_mode"] = check_choice("budget_mode", p["budget_mode"], ("iterations", "worker_slots"))
    p["slot_seconds"] = check_real("slot_seconds", p["slot_seconds"], 0.0, None, lo_open=True)
    return p


def _topology(rng: np.random.Generator, p: dict, num_servers: int, num_racks: int, gpus: np.ndarray | None = None,
              rack_of: np.ndarray | None = None) -> Topology:
    S = num_servers
    if rack_of is None:
        perm = rng.permutation(S)
        cuts: np.ndarray | list[int] = np.sort(rng.choice(np.arange(1, S), size=num_racks - 1, replace=False)) if num_racks > 1 else []
        rack_of = np.empty(S, dtype=np.int64)
        for r, part in enumerate(np.split(perm, cuts)):
            rack_of[part] = r
    if gpus is None:
        gpus = rng.choice(np.asarray(p["gpu_choices"]), size=S)
    gpus = np.maximum(1, np.rint(gpus * p["gpu_scale"])).astype(np.int64)
    sbw = rng.uniform(p["server_bw_min"], p["server_bw_max"], size=S) * p["bw_scale"]
    rbw = rng.uniform(p["rack_bw_min"], p["rack_bw_max"], size=num_racks) * p["bw_scale"]
    return Topology(rack_of=freeze(rack_of), gpus=freeze(gpus), server_bw=freeze(np.repeat(sbw[:, None], 2, axis=1)),
                    rack_bw=freeze(np.repeat(rbw[:, None], 2, axis=1)))


def draw_jobs(rng: np.random.Generator, arrival: np.ndarray, p: dict, workers: np.ndarray | None = None,
              budget_iters: np.ndarray | None = None, zeta: np.ndarray | None = None,
              lam3: np.ndarray | None = None) -> JobBatch:
    """Attributes of jobs arriving at ``arrival`` (§VI.1 laws; given arrays override draws).

    Every attribute is drawn for every job whether overridden or not, so the stream (and hence
    the jobs) does not depend on which attributes a trace provides.
    """
    n = arrival.shape[0]
    w = rng.integers(p["workers_min"], p["workers_max"] + 1, size=n)
    f = rng.integers(p["budget_min"], p["budget_max"] + 1, size=n).astype(np.float64)
    z = rng.integers(p["zeta_min"], p["zeta_max"] + 1, size=n).astype(np.float64)
    b = np.asarray(rng.integers(int(round(p["bw_min"] * 1000)), int(round(p["bw_max"] * 1000)) + 1, size=n),
                   dtype=np.float64) / 1000.0
    l1 = rng.uniform(p["lambda1_min"], p["lambda1_max"], size=n)
    l2 = p["lambda2_max"] * (1.0 - rng.random(size=n))  # (0, λ2_max]: never 0
    l3 = rng.uniform(p["lambda3_min"], p["lambda3_max"], size=n)
    if workers is not None:
        w = np.minimum(np.asarray(workers, dtype=np.int64), p["workers_max"])
    if budget_iters is not None:
        f = np.asarray(budget_iters, dtype=np.float64)
    if zeta is not None:
        z = np.asarray(zeta, dtype=np.float64)
    if lam3 is not None:
        l3 = np.asarray(lam3, dtype=np.float64)
    if p["budget_mode"] == "iterations":
        budget = np.maximum(1, np.floor(f / z)).astype(np.int64)  # eq. 3 with l_i = ζ_i
    else:
        budget = f.astype(np.int64)
    return JobBatch(arrival=arrival.astype(np.int64), workers=w.astype(np.int64), budget_iters=f, zeta=z, bw=b,
                    lam1=l1, lam2=l2, lam3=l3, budget=budget)


def _load_preset(name: str) -> dict:
    with open(os.path.join(_PRESETS, name)) as fh:
        return json.load(fh)


def make_ring_scenario(name: str = "paper", seed: int | np.random.Generator | None = 0, **params) -> Scenario:
    """Build a P3 scenario by name; ``params`` override the defaults (validated)."""
    if name == "toy":
        check_known(params, (), "toy")  # the toy scenario takes no parameters
        return _toy(seed)
    if name not in RING_SCENARIOS:
        raise ValueError(f"scenario={name!r} is invalid: expected one of {', '.join(map(repr, RING_SCENARIOS))}")
    check_known(params, PAPER_DEFAULTS, name)
    # Parameters a preset takes from its trace: giving one is an error, never a value silently recorded in
    # results.json but not applied.
    fixed = {"tiresias-60": ("num_racks", "gpu_choices", "arrival_rate", "workers_min", "workers_max", "budget_min",
                             "budget_max", "zeta_min", "zeta_max", "lambda3_min", "lambda3_max"),
             "philly": ("workers_min", "slot_seconds"),  # workers_max caps the trace's GPU counts
             "paper": ("slot_seconds",),
             "gpu-short": ("num_servers", "slot_seconds")}[name]  # gpu-short: the paper's on 10 servers
    given = sorted(set(fixed) & set(params))
    if given:
        why = {"paper": "tiresias-60 only",
               "gpu-short": f"the preset fixes num_servers={GPU_SHORT_SERVERS} (slot_seconds: tiresias-60 only)"}
        raise ValueError(f"{', '.join(given)} cannot be set for scenario {name!r}: "
                         + why.get(name, "its trace fixes them"))
    defaults = dict(PAPER_DEFAULTS)
    if name == "tiresias-60":
        defaults.update(num_servers=32, num_racks=1)
    if name == "gpu-short":
        defaults.update(num_servers=GPU_SHORT_SERVERS)
    p = _validate({**defaults, **params})
    rng = as_generator(seed)
    truth_kw: dict = {}
    if name == "tiresias-60":
        pre = _load_preset("tiresias-60.json")
        cl = pre["cluster"]
        S = cl["num_switch"] * cl["num_node_p_switch"]
        if p["num_servers"] != S:
            raise ValueError(f"num_servers={p['num_servers']} is invalid for 'tiresias-60': the trace cluster has {S}")
        rack_of = np.repeat(np.arange(cl["num_switch"]), cl["num_node_p_switch"])
        topo = _topology(rng, p, S, cl["num_switch"], gpus=np.full(S, cl["num_gpu_p_node"]), rack_of=rack_of)
        slot = float(p["slot_seconds"])
        g = np.asarray(pre["num_gpu"], dtype=np.int64)
        it = np.asarray(pre["iterations"], dtype=np.float64)
        dur_slots = np.maximum(1, np.ceil(np.asarray(pre["duration_seconds"]) / slot))
        truth_kw = dict(trace_slot=np.floor(np.asarray(pre["submit_seconds"]) / slot).astype(np.int64),
                        trace_workers=g, trace_budget_iters=it, trace_zeta=it / (g * dur_slots),
                        trace_lambda3=0.9 * it)
        p["workers_max"] = max(p["workers_max"], int(g.max()))
    else:
        R = p["num_racks"] or int(rng.integers(2, 6))
        R = min(R, p["num_servers"])
        topo = _topology(rng, p, p["num_servers"], R)
        if name == "philly":
            pre = _load_preset("philly.json")
            sub = np.asarray(pre["submit_seconds"], dtype=np.float64)
            rate_trace = (sub.size - 1) / max(sub[-1], 1e-9)  # jobs per second
            truth_kw = dict(trace_slot=np.floor(sub * rate_trace / p["arrival_rate"]).astype(np.int64),
                            trace_workers=np.maximum(1, np.asarray(pre["num_gpus"], dtype=np.int64)))
    # drawn after the topology, so an instance's topology does not depend on how its jobs are drawn
    job_seed = int(rng.integers(0, 2**63 - 1))
    truth = RingTruth(arrival_rate=p["arrival_rate"], params=dict(p), job_seed=job_seed,
                      **{k: freeze(v) for k, v in truth_kw.items()})
    problem = RingProblem(topology=topo, workers_max=p["workers_max"], budget_mode=p["budget_mode"])
    return Scenario(name=name, problem=problem, truth=truth, params=p)


def _toy(seed: int | np.random.Generator | None = 0) -> Scenario:
    """Four servers in two racks, GPUs (2, 2, 4, 1); server links 10 Gbps, rack links 10 Gbps.

    Used in tests and docs with hand-made jobs (the env's ``jobs`` argument is not needed: toy
    arrivals are Poisson(0.5) with the paper's attribute laws). The cluster is fixed; the scenario
    seed draws the job stream (``RingTruth.job_seed``).
    """
    p = _validate({**PAPER_DEFAULTS, "num_servers": 4, "num_racks": 2, "arrival_rate": 0.5})
    topo = Topology(rack_of=freeze(np.array([0, 0, 1, 1])), gpus=freeze(np.array([2, 2, 4, 1])),
                    server_bw=freeze(np.full((4, 2), 10.0)), rack_bw=freeze(np.full((2, 2), 10.0)))
    problem = RingProblem(topology=topo, workers_max=p["workers_max"], budget_mode=p["budget_mode"])
    truth = RingTruth(arrival_rate=0.5, params=dict(p), job_seed=int(as_generator(seed).integers(0, 2**63 - 1)))
    return Scenario(name="toy", problem=problem, truth=truth, params=p)
