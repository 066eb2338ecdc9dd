"""The OGASched paper's baselines for MultiServerAllocation (ogasched.md §4 "Baselines") and random.

Every baseline sees the arrivals x(t) at the start of the slot and gives resources only to ports
with a job (SPEC §5). Readings of the paper's one-line descriptions:

* **DRF**: ports with a job are served in ascending order of the dominant share
  s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k (the paper's formula, fixed per instance; ties by port index);
  on every (r, k) each port in turn takes min(a_l^k, what is left) (partial fills).
* **FAIRNESS**: y_(l,r)^k = x_l · min(a_l^k, c_r^k a_l^k / Σ_{l'∈L_r} a_l'^k) — the share's
  denominator runs over all of L_r (default, ``active_share=False``); the shares of idle ports stay
  unused. ``active_share=True`` divides among the active ports of L_r only,
  Σ_{l'∈L_r, x_l'(t)=1} a_l'^k: the authors' code (``ogasched/baselines/fairness.py``) and the
  paper's §4.1 wording "allocates resources to each non-empty port without bias". Both readings are
  reported beside each other (docs/ogasched.md).
* **BINPACKING / SPREADING** (Kubernetes MostAllocated / LeastAllocated, Volcano binpack): on node r
  the request of port l is q_lr^k = min(a_l^k, c_r^k); a pod is placed only if its whole request fits
  (all k). The Kubernetes score of placing l on r is the node's utilisation after placement,
  mean_k (used_r^k + q_lr^k) / c_r^k over the types r has. Channels are independent across nodes
  (eq. 3 caps each channel), so the greedy "best-scored feasible (pod, node) pair next" decomposes
  per node: BINPACKING places the ports of each node in descending order of their normalised request
  (highest post-placement utilisation first), SPREADING in ascending order; ties by port index;
  a port whose request no longer fits is skipped (first fit).
* **random**: y = U(0, 1) · a on the channels of ports with a job, projected onto Y.
"""

from __future__ import annotations

import numpy as np

from clustergym.agent import BaseAgent
from clustergym.envs.multiserver.projection import AllocationLayout

__all__ = ["DRF", "Fairness", "BinPacking", "Spreading", "RandomAllocation", "priority_fill"]


def priority_fill(layout: AllocationLayout, active_slot: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """Per (r, k): ports in ascending ``priority`` take min(a, what is left) in turn (partial fills).

    Args:
        layout: the (R, D) padded layout of Y.
        active_slot: (R, D) bool, the port in that slot has a job.
        priority: (R, D) float, lower is served first.

    Returns:
        (R, D, K) allocation on the padded layout.
    """
    u = np.where(active_slot[:, :, None], layout.upper, 0.0)  # (R, D, K)
    order = np.argsort(priority, axis=1, kind="stable")  # (R, D)
    us = np.take_along_axis(u, order[:, :, None], axis=1)
    before = np.cumsum(us, axis=1) - us  # requested by higher-priority ports
    alloc_sorted = np.clip(layout.capacity[:, None, :] - before, 0.0, us)
    out = np.empty_like(alloc_sorted)
    np.put_along_axis(out, order[:, :, None], alloc_sorted, axis=1)
    return out


class _AllocationBaseline(BaseAgent):
    families = ("multiserver-allocation",)

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        pb = problem
        self.layout = AllocationLayout(pb.edge_port, pb.edge_server, pb.edge_demand, pb.capacity, pb.num_servers)
        ext = np.append(np.asarray(pb.edge_port), -1)
        self.slot_port = ext[self.layout.index]  # (R, D) port of each slot, −1 on padding

    def _active_slots(self, obs) -> np.ndarray:
        x = np.append(np.asarray(obs["arrivals"]).astype(bool), False)
        return x[self.slot_port]  # padding maps to index −1 -> False

    def _to_edges(self, padded: np.ndarray) -> np.ndarray:
        return padded[self.layout.edge_server, self.layout.edge_slot]  # (E, K)


class DRF(_AllocationBaseline):
    """Dominant Resource Fairness order (ogasched.md §4): ascending s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k."""

    name = "drf"

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        pb = problem
        reach = np.zeros((pb.num_ports, pb.num_device_types))
        np.add.at(reach, pb.edge_port, pb.capacity[pb.edge_server])  # Σ_{r∈R_l} c_r^k, once per reset
        share = np.divide(pb.demand, reach, out=np.full_like(reach, np.inf), where=reach > 0)
        share[(pb.demand == 0)] = 0.0
        self.dominant_share = share.max(axis=1)  # (L,) s_l
        rank = np.empty(pb.num_ports)
        rank[np.lexsort((np.arange(pb.num_ports), self.dominant_share))] = np.arange(pb.num_ports)
        self.slot_priority = np.append(rank, np.inf)[self.slot_port]  # (R, D)

    def act(self, obs, info):
        return self._to_edges(priority_fill(self.layout, self._active_slots(obs), self.slot_priority))


class Fairness(_AllocationBaseline):
    """Proportional share a_l^k / Σ_{l∈L_r} a_l^k of every (r, k) to each port with a job."""

    name = "fairness"

    def __init__(self, active_share: bool = False):
        if not isinstance(active_share, (bool, np.bool_)):
            raise ValueError(f"active_share={active_share!r} is invalid: expected true or false")
        self.active_share = bool(active_share)

    def act(self, obs, info):
        act = self._active_slots(obs)
        u = self.layout.upper  # (R, D, K)
        w = np.where(act[:, :, None], u, 0.0) if self.active_share else u
        denom = w.sum(axis=1, keepdims=True)
        share = np.divide(self.layout.capacity[:, None, :] * u, denom, out=np.zeros_like(u), where=denom > 0)
        return self._to_edges(np.where(act[:, :, None], np.minimum(u, share), 0.0))


class _NodeScoring(_AllocationBaseline):
    descending = True

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        cap = self.layout.capacity[:, None, :]  # (R, 1, K)
        self.request = np.minimum(self.layout.upper, cap)  # (R, D, K) q_lr^k
        has = cap > 0
        frac = np.divide(self.request, cap, out=np.zeros_like(self.request), where=has)
        score = frac.sum(axis=2) / np.maximum(has.sum(axis=2), 1)  # (R, D) mean_k q/c
        key = -score if self.descending else score
        D = key.shape[1]
        # Stable order by key, ties by slot (= port index within the server).
        self.order = np.lexsort((np.broadcast_to(np.arange(D), key.shape), key), axis=1)  # (R, D)

    def act(self, obs, info):
        act = self._active_slots(obs)
        R, D = act.shape
        left = self.layout.capacity.copy()  # (R, K)
        out = np.zeros_like(self.request)
        rows = np.arange(R)
        for j in range(D):  # D = max ports per server (≈ density); vectorised over all servers
            slot = self.order[:, j]
            q = self.request[rows, slot]  # (R, K)
            fits = act[rows, slot] & np.all(q <= left + 1e-12, axis=1)
            out[rows[fits], slot[fits]] = q[fits]
            left -= np.where(fits[:, None], q, 0.0)
        return self._to_edges(out)


class BinPacking(_NodeScoring):
    """Kubernetes MostAllocated: the highest post-placement node utilisation first."""

    name = "binpacking"
    descending = True


class Spreading(_NodeScoring):
    """Kubernetes LeastAllocated: the lowest post-placement node utilisation first."""

    name = "spreading"
    descending = False


class RandomAllocation(_AllocationBaseline):
    """Feasible random: U(0, 1) · a on channels of ports with a job, projected onto Y."""

    name = "random"

    def act(self, obs, info):
        pb = self.problem
        x = np.asarray(obs["arrivals"]).astype(bool)[pb.edge_port]
        z = self.rng.random((pb.num_edges, pb.num_device_types)) * pb.edge_demand * x[:, None]
        return self.layout.project(z)
