"""Alibaba cluster-trace-gpu-v2023 (``openb_*`` CSV files) and the ``alibaba-v2023`` preset.

Data: Alibaba Cluster Trace Program, cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata,
``cluster-trace-gpu-v2023/csv/``), published for research and study use; cite Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC 2023.
Users pass paths; nothing downloads.

* node lists ``openb_node_list_*.csv``: ``sn, cpu_milli, memory_mib, gpu, model`` (model empty for
  CPU-only nodes);
* pod lists ``openb_pod_list_*.csv``: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and, in all
  but ``multigpu50``, ``gpu_spec`` (allowed GPU models separated by ``|``; empty = any),
  ``creation_time`` (s), ...

The compact preset ``presets/alibaba-v2023.json`` (derived by ``benchmarks/derive_alibaba_preset.py``
with :func:`derive_preset`) holds the node configurations with their counts and the job types
(clustered pod requests, GPU-model locality, arrival probability per slot); the scenarios for P1 and
P2 are built from it, so they work without the raw files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources

import numpy as np

from clustergym.core.scenario import Scenario, as_generator, check_int, check_known, check_real, freeze
from clustergym.envs.multiserver.allocation.scenario import (AllocationProblem, AllocationTruth, check_demand_params,
                                                             draw_utilities)
from clustergym.envs.multiserver.channel.scenario import ChannelProblem, channel_truth, check_grid_memory
from clustergym.envs.traces.csvread import Column, read_csv

__all__ = ["NodeList", "PodList", "load_nodes", "load_pods", "derive_preset", "load_preset",
           "allocation_scenario_from_preset", "channel_scenario_from_preset", "PRESET_NAME"]

PRESET_NAME = "alibaba-v2023"
MEM_UNIT_GIB = 8.0  # P2 memory device unit


@dataclass(frozen=True)
class NodeList:
    sn: np.ndarray  # (N,) object, node names
    cpu: np.ndarray  # (N,) float, CPU cores
    mem: np.ndarray  # (N,) float, GiB
    gpu: np.ndarray  # (N,) int, GPUs
    model: np.ndarray  # (N,) object, GPU model ("" for CPU-only nodes)
    source: str

    def __len__(self) -> int:
        return int(self.cpu.shape[0])


@dataclass(frozen=True)
class PodList:
    name: np.ndarray  # (N,) object
    cpu: np.ndarray  # (N,) float, CPU cores requested
    mem: np.ndarray  # (N,) float, GiB requested
    gpu: np.ndarray  # (N,) float, GPUs requested (gpu_milli / 1000 of one GPU when num_gpu == 1)
    gpu_spec: np.ndarray  # (N,) object, allowed GPU models joined by "|" ("" = any)
    creation: np.ndarray  # (N,) float, creation time (s); NaN when the file has no such column
    source: str

    def __len__(self) -> int:
        return int(self.cpu.shape[0])


def load_nodes(path) -> NodeList:
    """Read an ``openb_node_list_*.csv`` file (errors name file, line and column)."""
    c = read_csv(path, [Column("sn", "str"), Column("cpu_milli", "float", lo=0, lo_open=True),
                        Column("memory_mib", "float", lo=0, lo_open=True), Column("gpu", "int", lo=0), Column("model", "str", required=False, default="")])
    n = c["cpu_milli"].shape[0]
    model = c.get("model", np.full(n, "", dtype=object))
    return NodeList(sn=c["sn"], cpu=c["cpu_milli"] / 1000.0, mem=c["memory_mib"] / 1024.0, gpu=c["gpu"],
                    model=model, source=str(path))


def load_pods(path) -> PodList:
    """Read an ``openb_pod_list_*.csv`` file (errors name file, line and column)."""
    c = read_csv(path, [Column("name", "str"), Column("cpu_milli", "float", lo=0),
                        Column("memory_mib", "float", lo=0), Column("num_gpu", "int", lo=0), Column("gpu_milli", "float", lo=0),
                        Column("gpu_spec", "str", required=False, default=""),
                        Column("creation_time", "float", required=False, lo=0)])
    n = c["cpu_milli"].shape[0]
    num = c["num_gpu"].astype(np.float64)
    gpu = np.where(num == 1, c["gpu_milli"] / 1000.0, num)
    return PodList(name=c["name"], cpu=c["cpu_milli"] / 1000.0, mem=c["memory_mib"] / 1024.0, gpu=gpu,
                   gpu_spec=c.get("gpu_spec", np.full(n, "", dtype=object)),
                   creation=c.get("creation_time", np.full(n, np.nan)), source=str(path))


def _kmeans(x: np.ndarray, k: int, seed: int = 0, iters: int = 100) -> np.ndarray:
    """Deterministic k-means (k-means++ init from ``seed``); returns labels."""
    rng = np.random.default_rng(seed)
    centers = [x[rng.integers(len(x))]]
    for _ in range(1, k):
        d = np.min(((x[:, None, :] - np.array(centers)[None]) ** 2).sum(-1), axis=1)
        centers.append(x[rng.choice(len(x), p=d / d.sum())] if d.sum() > 0 else x[rng.integers(len(x))])
    c = np.array(centers)
    labels = np.zeros(len(x), dtype=np.int64)
    for _ in range(iters):
        labels = np.argmin(((x[:, None, :] - c[None]) ** 2).sum(-1), axis=1)
        new = np.array([x[labels == j].mean(axis=0) if np.any(labels == j) else c[j] for j in range(k)])
        if np.allclose(new, c):
            break
        c = new
    return labels


def derive_preset(nodes: NodeList, pods: PodList, *, num_types: int = 10, num_constrained: int = 3,
                  slot_seconds: float = 3600.0, window_quantile: float = 0.05) -> dict:
    """The compact preset from the raw lists (see the module docstring and docs/ogasched.md).

    * node configurations: distinct (CPU cores, GiB, GPUs, model) with their counts;
    * job types: the ``num_constrained`` most frequent non-empty ``gpu_spec`` values each make one
      type (service locality: it connects only to nodes of those models); the other pods (any
      model, or rarer constraints, treated as unconstrained) are clustered by k-means on
      log(1 + request) into ``num_types − num_constrained`` types. A type's request is the median of
      its pods'; CPU-only types have GPU request 0;
    * arrival probability of type l: the share of slots of ``slot_seconds`` in the trace window
      [``window_quantile`` quantile of creation times, last creation] with at least one pod of type l.
    """
    if np.all(np.isnan(pods.creation)):
        raise ValueError(f"{pods.source}: the pod list has no creation_time column; use openb_pod_list_default.csv "
                         "or openb_pod_list_gpuspec33.csv")
    keys = list(zip(nodes.cpu.tolist(), nodes.mem.tolist(), nodes.gpu.tolist(), nodes.model.tolist()))
    uniq, counts = np.unique(np.array([f"{a}|{b}|{c}|{d}" for a, b, c, d in keys]), return_counts=True)
    node_cfg = []
    for u, n in sorted(zip(uniq.tolist(), counts.tolist()), key=lambda t: (-t[1], t[0])):
        a, b, c, d = u.split("|")
        node_cfg.append({"cpu": float(a), "mem_gib": float(b), "gpu": int(c), "model": d, "count": int(n)})

    spec = pods.gpu_spec.astype(str)
    gpu_pod = pods.gpu > 0
    vals, cnt = np.unique(spec[gpu_pod & (spec != "")], return_counts=True)
    top = [v for v, _ in sorted(zip(vals.tolist(), cnt.tolist()), key=lambda t: (-t[1], t[0]))[:num_constrained]]
    label = np.full(len(pods), -1, dtype=np.int64)
    for j, v in enumerate(top):
        label[gpu_pod & (spec == v)] = j
    rest = np.flatnonzero(label < 0)
    feats = np.log1p(np.stack([pods.cpu, pods.mem, 4.0 * pods.gpu], axis=1))
    label[rest] = len(top) + _kmeans(feats[rest], num_types - len(top), seed=0)

    t = pods.creation
    lo, hi = float(np.quantile(t, window_quantile)), float(t.max())
    n_slots = int(np.floor((hi - lo) / slot_seconds)) + 1
    inside = t >= lo
    slot = np.floor((t[inside] - lo) / slot_seconds).astype(np.int64)
    types = []
    for j in range(num_types):
        m = label == j
        if not m.any():
            continue
        occupied = np.unique(slot[label[inside] == j]).size
        req_gpu = float(np.median(pods.gpu[m]))
        types.append({
            "cpu": float(np.median(pods.cpu[m])), "mem_gib": float(np.median(pods.mem[m])), "gpu": req_gpu,
            "gpu_models": top[j].split("|") if j < len(top) else [],
            "needs_gpu": bool(req_gpu > 0), "pods": int(m.sum()), "rho": occupied / n_slots,
        })
    types.sort(key=lambda d: -d["pods"])
    return {
        "name": PRESET_NAME,
        "source": "Alibaba Cluster Trace Program, cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata, "
                  "cluster-trace-gpu-v2023/csv/): " + os.path.basename(nodes.source) + ", " + os.path.basename(pods.source),
        "licence": "Published by Alibaba for research and study use (see github.com/alibaba/clusterdata); cite "
                   "Weng et al., 'Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation "
                   "Gradient Descent', USENIX ATC 2023.",
        "derived_by": "benchmarks/derive_alibaba_preset.py (clustergym.envs.traces.alibaba.derive_preset)",
        "slot_seconds": slot_seconds,
        "window": [lo, hi],
        "units": {"cpu": "cores", "mem_gib": "GiB", "gpu": "GPUs (fractions for shared GPUs)"},
        "nodes": node_cfg,
        "job_types": types,
    }


def load_preset() -> dict:
    """The shipped preset (works without the raw files)."""
    text = resources.files("clustergym.envs").joinpath("traces/presets/alibaba-v2023.json").read_text()
    return json.loads(text)


def _sample_servers(preset: dict, rng: np.random.Generator, num_servers: int):
    cfg = preset["nodes"]
    p = np.array([c["count"] for c in cfg], dtype=float)
    pick = rng.choice(len(cfg), size=num_servers, p=p / p.sum())
    cpu = np.array([cfg[i]["cpu"] for i in pick])
    mem = np.array([cfg[i]["mem_gib"] for i in pick])
    gpu = np.array([cfg[i]["gpu"] for i in pick], dtype=float)
    model = np.array([cfg[i]["model"] for i in pick], dtype=object)
    return cpu, mem, gpu, model


def _compatible(types: list[dict], gpu: np.ndarray, model: np.ndarray) -> np.ndarray:
    """(L, R) service locality: GPU types need a GPU node of an allowed model; CPU-only types fit anywhere."""
    L, R = len(types), gpu.shape[0]
    ok = np.ones((L, R), dtype=bool)
    for l, t in enumerate(types):  # once per scenario, L <= a few dozen
        if t["needs_gpu"]:
            ok[l] = gpu > 0
            if t["gpu_models"]:
                ok[l] &= np.isin(model, t["gpu_models"])
    return ok


def _graph(rng: np.random.Generator, compat: np.ndarray, density: float) -> tuple[np.ndarray, np.ndarray]:
    """Each server keeps d_r of its compatible ports (mean ``density``); lonely ports get a compatible server."""
    L, R = compat.shape
    base = int(np.floor(density))
    d = np.asarray(rng.random(R) < density - base, dtype=np.int64) + base  # (R,)
    keys = np.where(compat.T, rng.random((R, L)), np.inf)  # (R, L)
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)
    adj = ((rank < d[:, None]) & compat.T).T  # (L, R)
    for l in np.flatnonzero(~adj.any(axis=1)):  # rare; ports whose models were not sampled fall back
        cand = np.flatnonzero(compat[l])
        adj[l, rng.choice(cand) if cand.size else rng.integers(R)] = True
    ep, es = np.nonzero(adj)
    return ep.astype(np.int64), es.astype(np.int64)


ALLOCATION_DEFAULTS = dict(num_servers=128, num_ports=10, contention=10.0, density=2.5, utility="mixed",
                           alpha_low=1.0, alpha_high=1.5, beta_low=0.3, beta_high=0.5, rho=None)


def allocation_scenario_from_preset(seed=0, preset: dict | None = None, **params) -> Scenario:
    """P2 scenario ``alibaba-v2023``: servers sampled from the trace's node configurations, job types
    from the preset, a_l^k = contention × the type's median request (CPU cores, MEM in 8 GiB units,
    GPUs), locality from ``gpu_spec``, ρ_l from creation times (``rho`` overrides with one value)."""
    check_known(params, ALLOCATION_DEFAULTS, PRESET_NAME)
    preset = preset or load_preset()
    p = {**ALLOCATION_DEFAULTS, **params}
    n_types = len(preset["job_types"])
    p["num_servers"] = check_int("num_servers", p["num_servers"], 1, 100_000)
    p["num_ports"] = check_int("num_ports", p["num_ports"], 1, n_types)
    check_demand_params(p)
    if p["rho"] is not None:
        p["rho"] = check_real("rho", p["rho"], 0.0, 1.0)
    rng = as_generator(seed)
    types = preset["job_types"][:p["num_ports"]]
    cpu, mem, gpu, model = _sample_servers(preset, rng, p["num_servers"])
    capacity = np.stack([cpu, mem / MEM_UNIT_GIB, gpu], axis=1)  # (R, 3)
    edge_port, edge_server = _graph(rng, _compatible(types, gpu, model), p["density"])
    base = np.array([[t["cpu"], t["mem_gib"] / MEM_UNIT_GIB, t["gpu"]] for t in types])
    demand = p["contention"] * base
    alpha, code, beta = draw_utilities(rng, p["num_servers"], 3, p)
    rho = np.array([t["rho"] for t in types]) if p["rho"] is None else np.full(len(types), p["rho"])
    problem = AllocationProblem(
        num_ports=len(types), num_servers=p["num_servers"], num_device_types=3, edge_port=freeze(edge_port),
        edge_server=freeze(edge_server), demand=freeze(demand), capacity=freeze(capacity), alpha=freeze(alpha),
        utility=freeze(code), beta=freeze(beta), device_names=("CPU", "MEM", "GPU"))
    return Scenario(name=PRESET_NAME, problem=problem, truth=AllocationTruth(rho=freeze(rho)), params=p)


CHANNEL_DEFAULTS = dict(num_servers=40, num_ports=8, channel_prob=0.1, capacity_ratio=0.25, demand_max=3,
                        utility_low=0.1, utility_high=1.0, cost_mean=0.5, cost_std=0.1, rho=None)


def channel_scenario_from_preset(seed=0, preset: dict | None = None, **params) -> Scenario:
    """P1 scenario ``alibaba-v2023``: servers sampled from the trace's node configurations, ports = the
    ``num_ports`` most frequent job types, a channel (l, r) for each locality-compatible pair with
    probability ``channel_prob`` (every port keeps one), integer demands a_k^e = clip(round(request /
    median request over types), 1, demand_max) for CPU, MEM, GPU (GPU demand 1 for CPU-only types:
    P1 needs a_k^e >= 1), capacity and utilities as in the P1 paper scenario, ρ_l from the trace."""
    check_known(params, CHANNEL_DEFAULTS, PRESET_NAME)
    preset = preset or load_preset()
    p = {**CHANNEL_DEFAULTS, **params}
    p["num_servers"] = check_int("num_servers", p["num_servers"], 1, 100_000)
    p["num_ports"] = check_int("num_ports", p["num_ports"], 1, len(preset["job_types"]))
    p["channel_prob"] = check_real("channel_prob", p["channel_prob"], 0.0, 1.0, lo_open=True)
    p["capacity_ratio"] = check_real("capacity_ratio", p["capacity_ratio"], 0.0, 1.0, lo_open=True)
    p["demand_max"] = check_int("demand_max", p["demand_max"], 1, 1000)
    p["utility_low"] = check_real("utility_low", p["utility_low"], 0.0, None)
    p["utility_high"] = check_real("utility_high", p["utility_high"], p["utility_low"], None)
    p["cost_mean"] = check_real("cost_mean", p["cost_mean"], None, None)
    p["cost_std"] = check_real("cost_std", p["cost_std"], 0.0, None)
    if p["rho"] is not None:
        p["rho"] = check_real("rho", p["rho"], 0.0, 1.0)
    rng = as_generator(seed)
    types = preset["job_types"][:p["num_ports"]]
    L, R, K = len(types), p["num_servers"], 3
    cpu, mem, gpu, model = _sample_servers(preset, rng, R)
    compat = _compatible(types, gpu, model)
    adj = compat & (rng.random((L, R)) < p["channel_prob"])
    for l in np.flatnonzero(~adj.any(axis=1)):
        cand = np.flatnonzero(compat[l])
        adj[l, rng.choice(cand) if cand.size else rng.integers(R)] = True
    edge_port, edge_server = np.nonzero(adj)
    E = edge_port.size
    req = np.array([[t["cpu"], t["mem_gib"], t["gpu"]] for t in types])
    med = np.array([np.median(req[req[:, k] > 0, k]) if np.any(req[:, k] > 0) else 1.0 for k in range(K)])
    a_type = np.clip(np.round(req / med), 1, p["demand_max"]).astype(np.int64)  # (L, K)
    demand = a_type[edge_port]
    capacity = np.maximum(np.ceil(p["capacity_ratio"] * demand.sum(axis=0)), demand.max(axis=0)).astype(np.int64)
    check_grid_memory(capacity, E, p)
    A = p["demand_max"]
    f = np.sort(rng.normal(p["cost_mean"], p["cost_std"], size=(K, A)), axis=1)
    cost_table = np.concatenate([np.zeros((K, 1)), f], axis=1)
    cost = cost_table[np.arange(K)[None, :], demand].sum(axis=1)
    mu = rng.uniform(p["utility_low"], p["utility_high"], size=E)
    raw = mu - cost
    span = max(raw.max() - raw.min(), 1e-9)
    v = 0.05 + 0.9 * (raw - raw.min()) / span
    std = (mu / 2.0) * 0.9 / span
    rho = np.array([t["rho"] for t in types]) if p["rho"] is None else np.full(L, p["rho"])
    problem = ChannelProblem(
        num_ports=L, num_servers=R, num_device_types=K, edge_port=freeze(edge_port.astype(np.int64)),
        edge_server=freeze(edge_server.astype(np.int64)), demand=freeze(demand), capacity=freeze(capacity),
        cost=freeze(cost), cost_table=freeze(cost_table), device_names=("CPU", "MEM", "GPU"))
    truth = channel_truth(rho, v, std)
    return Scenario(name=PRESET_NAME, problem=problem, truth=truth, params=p)
