"""The OGASched paper's baselines for MultiServerAllocation (ogasched.md §4 "Baselines") and random.

Every baseline sees the arrivals x(t) at the start of the slot and gives resources only to ports
with a job. Readings of the paper's one-line descriptions:

* **DRF**: ports with a job are served in ascending order of the dominant share
  s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k (the paper's formula, fixed per instance; ties by port index);
  on every (r, k) each port in turn takes min(a_l^k, what is left) (partial fills): eq. 3 caps
  each channel at a_l^k, so a port reaching several servers may get up to |R_l| · a_l^k of type k.
  ``drf[total_cap=true]`` is the authors' reading (their code): "a port's
  **total** allocation of type k is capped at a_l^k" — each port in DRF order takes, on its
  channels in server order, min(what is left on r, what is left of a_l^k), so
  Σ_{r∈R_l} y_(l,r)^k <= a_l^k.
* **FAIRNESS**: y_(l,r)^k = x_l · min(a_l^k, c_r^k a_l^k / Σ_{l'∈L_r, x_l'(t)=1} a_l'^k) — the
  share's denominator runs over the active ports of L_r (default, ``active_share=True``): §4.1,
  "FAIRNESS adopts a proportional allocation strategy and allocates resources to each non-empty port
  *without bias*", and the authors' code (``ogasched/baselines/fairness.py``) divide among the ports
  with a job. ``active_share=False`` (the earlier reading of §4's one-line description, "according to
  the job's share a_l^k / Σ_{l∈L_r} a_l^k") divides over all of L_r, so the shares of idle ports stay
  unused. Both readings are reported beside each other (docs/ogasched.md).
* **BINPACKING / SPREADING** (Kubernetes MostAllocated / LeastAllocated, Volcano binpack): on node r
  the request of port l is q_lr^k = min(a_l^k, c_r^k); a pod is placed only if its whole request fits
  (all k). The Kubernetes score of placing l on r is the node's utilisation after placement,
  mean_k (used_r^k + q_lr^k) / c_r^k over the types r has. Channels are independent across nodes
  (eq. 3 caps each channel), so the greedy "best-scored feasible (pod, node) pair next" decomposes
  per node: BINPACKING places the ports of each node in descending order of their normalised request
  (highest post-placement utilisation first), SPREADING in ascending order; ties by port index;
  a port whose request no longer fits is skipped (first fit). Each port may so be placed on every
  node of R_l that still fits it.
  ``binpacking[single_node=true]`` / ``spreading[single_node=true]`` are the authors' reading
  (their code): "each request is placed on a **single** node" — ports with a job, in
  index order, each take q_lr on the one node r ∈ R_l where it fits (all k) with the highest
  (BINPACKING) / lowest (SPREADING) post-placement utilisation, ties by server index; a port
  that fits no node gets nothing this slot.
* **random**: y = U(0, 1) · a on the channels of ports with a job, projected onto Y.
"""

from __future__ import annotations

import numpy as np

from clustergym.core.agent import BaseAgent
from clustergym.envs.multiserver.allocation.actions import dominant_share, drf_order
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


def _check_bool(name: str, v) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{name}={v!r} is invalid: expected true or false")
    return bool(v)


class DRF(_AllocationBaseline):
    """Dominant Resource Fairness order (ogasched.md §4): ascending s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k.

    ``total_cap=True``: the authors' reading, a port's total allocation of each type is capped at
    a_l^k (module docstring)."""

    name = "drf"

    def __init__(self, total_cap: bool = False):
        self.total_cap = _check_bool("total_cap", total_cap)

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        pb = problem
        self.dominant_share = dominant_share(pb)  # (L,) s_l, once per reset
        rank = drf_order(pb)  # (L,) ascending s_l, ties by port index (the env's port modes use this order)
        self.slot_priority = np.append(rank, np.inf)[self.slot_port]  # (R, D)
        self.port_order = np.argsort(rank, kind="stable")  # ports in DRF order
        starts = np.searchsorted(pb.edge_port, np.arange(pb.num_ports + 1))  # edges are ordered by (port, server)
        self.port_edges = [np.arange(starts[l], starts[l + 1]) for l in range(pb.num_ports)]

    def act(self, obs, info):
        if not self.total_cap:
            return self._to_edges(priority_fill(self.layout, self._active_slots(obs), self.slot_priority))
        pb = self.problem
        x = np.asarray(obs["arrivals"]).astype(bool)
        left = np.array(pb.capacity, dtype=np.float64)  # (R, K)
        out = np.zeros((pb.num_edges, pb.num_device_types))
        for l in self.port_order[x[self.port_order]]:  # |L| ports; vectorised over the port's channels and types
            e = self.port_edges[l]
            avail = left[pb.edge_server[e]]  # (n_l, K), distinct servers
            before = np.cumsum(avail, axis=0) - avail
            y = np.clip(pb.demand[l][None, :] - before, 0.0, avail)  # Σ_r y <= a_l^k, in server order
            out[e] = y
            left[pb.edge_server[e]] -= y
        return out


class Fairness(_AllocationBaseline):
    """Proportional share a_l^k / Σ_{l∈L_r, x_l=1} a_l^k of every (r, k) to each port with a job.

    ``active_share=True`` (default): the sum runs over the ports of L_r with a job — §4.1, "allocates
    resources to each non-empty port *without bias*", and the authors' code. ``active_share=False``:
    over all of L_r (idle ports' shares stay unused; the earlier default).
    """

    name = "fairness"

    def __init__(self, active_share: bool = True):
        self.active_share = _check_bool("active_share", active_share)

    def act(self, obs, info):
        act = self._active_slots(obs)
        u = self.layout.upper  # (R, D, K)
        w = np.where(act[:, :, None], u, 0.0) if self.active_share else u
        denom = w.sum(axis=1, keepdims=True)
        share = np.divide(self.layout.capacity[:, None, :] * u, denom, out=np.zeros_like(u), where=denom > 0)
        return self._to_edges(np.where(act[:, :, None], np.minimum(u, share), 0.0))


class _NodeScoring(_AllocationBaseline):
    descending = True

    def __init__(self, single_node: bool = False):
        self.single_node = _check_bool("single_node", single_node)

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
        pb = problem
        starts = np.searchsorted(pb.edge_port, np.arange(pb.num_ports + 1))
        self.port_edges = [np.arange(starts[l], starts[l + 1]) for l in range(pb.num_ports)]
        self.edge_request = self._to_edges(self.request)  # (E, K) q_lr^k on each channel

    def _act_single_node(self, obs) -> np.ndarray:
        """Each port with a job on one node of R_l (module docstring, the authors' reading)."""
        pb = self.problem
        x = np.asarray(obs["arrivals"]).astype(bool)
        cap = np.asarray(pb.capacity, dtype=np.float64)
        has = cap > 0
        used = np.zeros_like(cap)
        out = np.zeros((pb.num_edges, pb.num_device_types))
        for l in np.flatnonzero(x):  # |L| ports; vectorised over the port's channels and types
            e = self.port_edges[l]
            r = pb.edge_server[e]
            q = self.edge_request[e]  # (n_l, K)
            fits = np.all(q <= cap[r] - used[r] + 1e-12, axis=1)
            if not fits.any():
                continue
            util = np.divide(used[r] + q, cap[r], out=np.zeros_like(q), where=has[r])
            score = util.sum(axis=1) / np.maximum(has[r].sum(axis=1), 1)
            score = np.where(fits, score if self.descending else -score, -np.inf)
            j = int(np.argmax(score))  # first maximum: ties by server index (edges ordered by server)
            out[e[j]] = q[j]
            used[r[j]] += q[j]
        return out

    def act(self, obs, info):
        if self.single_node:
            return self._act_single_node(obs)
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
    """Kubernetes MostAllocated: the highest post-placement node utilisation first
    (``single_node=True``: each request on one node, the authors' reading)."""

    name = "binpacking"
    descending = True


class Spreading(_NodeScoring):
    """Kubernetes LeastAllocated: the lowest post-placement node utilisation first
    (``single_node=True``: each request on one node, the authors' reading)."""

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
