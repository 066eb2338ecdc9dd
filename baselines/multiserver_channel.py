"""The ESDP paper's baselines for MultiServerChannel (esdp.md §4 "Baselines") and a random agent.

All three estimate Z̃_e by the historical mean of its observed values (0 while untried) and fill
the cluster greedily in their own order: "set the corresponding x as 1 in turn until (2) can not be
satisfied". Read literally, filling stops at the first channel that does not fit; that is the
default. ``skip_unfit=True`` skips such a channel and keeps going (first fit), an option.
Only channels of ports with a job are considered (constraint 4). Ties are broken by index.

The readings decide results (the sensitivity table in ``docs/esdp.md`` measures them
over instances): stop-at-first-unfit vs first fit (``skip_unfit``); for HAUF, ranking ports or
channels (``rank``) and how untried channels rank (``untried``); and for LCF, which "ranks each job
(non-empty port) in the ascending order of cost Σ_k f_k(a_k^(l,r))", whether channels or jobs are
ranked (``rank``).
"""

from __future__ import annotations

import numpy as np

from clustergym.core.agent import BaseAgent

__all__ = ["HAUF", "LCF", "LWTF", "RandomChannel", "greedy_fill"]


def greedy_fill(order: np.ndarray, demand: np.ndarray, capacity: np.ndarray, skip_unfit: bool, num_edges: int) -> np.ndarray:
    """Select channels in ``order`` while eq. 2 holds (stop at, or skip, the first that does not fit)."""
    x = np.zeros(num_edges, dtype=np.int8)
    if order.size == 0:
        return x
    if not skip_unfit:
        fits = np.all(np.cumsum(demand[order], axis=0) <= capacity[None, :], axis=1)
        n = order.size if fits.all() else int(np.argmin(fits))
        x[order[:n]] = 1
        return x
    left = capacity.astype(np.int64).copy()
    for e in order:  # first fit; |order| <= |E|, measured harmless (a few µs)
        if np.all(demand[e] <= left):
            x[e] = 1
            left -= demand[e]
    return x


class _ChannelHeuristic(BaseAgent):
    families = ("multiserver-channel",)

    def __init__(self, skip_unfit: bool = False):
        self.skip_unfit = bool(skip_unfit)

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        self.n = np.zeros(problem.num_edges, dtype=np.int64)
        self.sum_z = np.zeros(problem.num_edges)

    @property
    def v_hat(self) -> np.ndarray:
        return np.where(self.n > 0, self.sum_z / np.maximum(self.n, 1), 0.0)

    def update(self, obs, action, reward, next_obs, info) -> None:
        fb = info["feedback"]
        x = np.asarray(fb["executed"], dtype=bool)
        self.n[x] += 1
        self.sum_z[x] += np.asarray(fb["utilities"])[x]

    def _fill(self, order):
        return greedy_fill(order, self.problem.demand, self.problem.capacity, self.skip_unfit, self.problem.num_edges)

    def _by_port(self, port_key: np.ndarray, arrivals: np.ndarray) -> np.ndarray:
        """Channel order: active ports by descending ``port_key``, channels within by descending v̂."""
        pb = self.problem
        active = np.flatnonzero(arrivals[pb.edge_port])
        # lexsort: last key is primary. Primary −port_key[port], then port, then −v̂, then edge index.
        order = np.lexsort((active, -self.v_hat[active], pb.edge_port[active], -port_key[pb.edge_port[active]]))
        return active[order]


class HAUF(_ChannelHeuristic):
    """Historical Accumulative Utility First (HAUF, also called HSWF in the paper).

    esdp.md §4, "Baselines": "With the estimate, HSWF ranks each port in the descending order of
    Σ_{r∈R_l} x_(l,r)(t)(Z_(l,r)(t) − Σ_k f_k(a_k^(l,r))), and set the corresponding x_(l,r)(t) as 1
    in turn until (2) can not be satisfied", Z estimated as "the average of historical
    observations". Our utilities Z̃ are already net of the supply cost (eq. 7), so the ranked
    quantity is the historical mean v̂ of each channel. The sentence leaves three things open; each
    is an option:

    * ``rank="ports"`` (default, the sentence's "ranks each port"): ports with a job in descending
      Σ_{r∈R_l} v̂_(l,r) over all their channels, their channels selected in turn (within a port:
      descending v̂). ``rank="channels"``: the summand x_(l,r)(Z − f) is per channel, so channels of
      ports with a job are ranked by their own v̂, descending (ties by index).
    * ``untried="zero"`` (default): a channel never executed has v̂ = 0 (the average of no
      observation, read as 0). ``untried="first"``: untried channels rank above every tried one (in
      index order; in ``rank="ports"`` a port with an untried channel ranks first), the usual way a
      greedy historical-average policy gets its first observation of each channel.
    * ``skip_unfit`` (shared with LCF/LWTF): "until (2) can not be satisfied" read as stop at the first
      channel that does not fit (default) or as first fit (skip it and keep going).
    """

    name = "hauf"

    def __init__(self, skip_unfit: bool = False, rank: str = "ports", untried: str = "zero"):
        super().__init__(skip_unfit=skip_unfit)
        if rank not in ("ports", "channels"):
            raise ValueError(f"rank={rank!r} is invalid: expected 'ports' or 'channels'")
        if untried not in ("zero", "first"):
            raise ValueError(f"untried={untried!r} is invalid: expected 'zero' or 'first'")
        self.rank, self.untried = rank, untried

    def _score(self) -> np.ndarray:
        """(E,) the ranked value of each channel: v̂, with untried channels at 0 or +inf."""
        return self.v_hat if self.untried == "zero" else np.where(self.n > 0, self.v_hat, np.inf)

    def act(self, obs, info):
        pb = self.problem
        arrivals = np.asarray(obs["arrivals"]).astype(bool)
        score = self._score()
        active = np.flatnonzero(arrivals[pb.edge_port])
        if self.rank == "channels":
            return self._fill(active[np.lexsort((active, -score[active]))])
        port_value = np.bincount(pb.edge_port, weights=score, minlength=pb.num_ports)  # inf if one is untried
        # lexsort: last key primary. −port value, then port, then −score, then edge index.
        order = np.lexsort((active, -score[active], pb.edge_port[active], -port_value[pb.edge_port[active]]))
        return self._fill(active[order])


class LCF(_ChannelHeuristic):
    """Lowest Cost First (esdp.md §4, "Baselines").

    ``rank="channels"`` (default): channels of ports with a job in ascending supply cost
    Σ_k f_k(a_k^e), the quantity the paper names. ``rank="jobs"``: the paper's "ranks each job
    (non-empty port)" read literally: ports with a job in ascending total cost of their channels
    Σ_{r∈R_l} Σ_k f_k(a_k^(l,r)) (the port-level sum, as HAUF's ranking sums over R_l), and within
    a port its channels in ascending cost. Ties by index. Costs are public; LCF never uses its
    estimates.
    """

    name = "lcf"

    def __init__(self, skip_unfit: bool = False, rank: str = "channels"):
        super().__init__(skip_unfit=skip_unfit)
        if rank not in ("channels", "jobs"):
            raise ValueError(f"rank={rank!r} is invalid: expected 'channels' or 'jobs'")
        self.rank = rank

    def act(self, obs, info):
        pb = self.problem
        arrivals = np.asarray(obs["arrivals"]).astype(bool)
        active = np.flatnonzero(arrivals[pb.edge_port])
        if self.rank == "channels":
            order = active[np.lexsort((active, pb.cost[active]))]
        else:
            port_cost = np.bincount(pb.edge_port, weights=pb.cost, minlength=pb.num_ports)  # Σ_{r∈R_l} cost
            port = pb.edge_port[active]
            # lexsort: last key primary. Port cost ascending, then port, then channel cost, then index.
            order = active[np.lexsort((active, pb.cost[active], port, port_cost[port]))]
        return self._fill(order)


class LWTF(_ChannelHeuristic):
    """Longest Waiting Time First.

    A port's waiting time is the number of slots since it last got a channel while it had a job
    (slots without a job do not count). Ports with a job are ranked by descending waiting time,
    their channels selected in turn (within a port: descending v̂).
    """

    name = "lwtf"

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        self.wait = np.zeros(problem.num_ports, dtype=np.int64)

    def act(self, obs, info):
        arrivals = np.asarray(obs["arrivals"]).astype(bool)
        return self._fill(self._by_port(self.wait.astype(float), arrivals))

    def update(self, obs, action, reward, next_obs, info) -> None:
        super().update(obs, action, reward, next_obs, info)
        had_job = np.asarray(obs["arrivals"]).astype(bool)
        served = np.zeros(self.problem.num_ports, dtype=bool)
        served[self.problem.edge_port[np.asarray(info["feedback"]["executed"], dtype=bool)]] = True
        self.wait = np.where(served, 0, self.wait + had_job)


class RandomChannel(BaseAgent):
    """Feasible random: channels of ports with a job, each kept with probability ``p`` in random
    order, skipping those that do not fit."""

    name = "random"
    families = ("multiserver-channel",)

    def __init__(self, p: float = 0.5):
        self.p = float(p)

    def act(self, obs, info):
        pb = self.problem
        arrivals = np.asarray(obs["arrivals"]).astype(bool)
        active = np.flatnonzero(arrivals[pb.edge_port])
        order = self.rng.permutation(active)
        order = order[self.rng.random(order.size) < self.p]
        return greedy_fill(order, pb.demand, pb.capacity, True, pb.num_edges)
