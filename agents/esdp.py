"""ESDP: Efficient Sampling-based Dynamic Programming (esdp.md §3, Algorithms 1–2).

Faithful to the paper's equations; the choices where the paper is silent or ambiguous are listed
in :class:`ESDP`'s docstring and tested in ``tests/agents/test_esdp.py``. The dynamic program of
Algorithm 2 (eq. 27) is :mod:`clustergym.agents.esdp_dp`.
"""

from __future__ import annotations

import math

import numpy as np

from clustergym.core.agent import BaseAgent
from clustergym.agents.esdp_dp import solve_p4_all

__all__ = ["ESDP", "DELTAS", "GS"]

# δ(t) sequences (eq. 14 / "Default Algorithmic Settings"; the alternatives of Fig. 7).
DELTAS = {
    "default": lambda t: 1.0 / (math.log(math.log(t + 1) + 1) + 1),
    "log": lambda t: 1.0 / (math.log(t + 1) + 1),
    "loglog": lambda t: 1.0 / math.log(math.log(t + 1) + 1),
    # Fig. 7's third sequence, (ln(ln(ln(t+1)+1))+1)^-1 (esdp.md §4.2); positive for every t >= 1
    # since ln(ln(ln 2 + 1)) = −0.64 > −1.
    "logloglog": lambda t: 1.0 / (math.log(math.log(math.log(t + 1) + 1)) + 1),
}
# g(t) sequences (eq. 11 as set in "Default Algorithmic Settings"; the alternatives of Fig. 8).
# m = max_{x∈Ω} ||x||_1, taken as α|E|.
GS = {
    "default": lambda t, m: math.log(t + 1) + 4 * math.log(math.log(t + 1) + 1) * m,
    "loglog": lambda t, m: 4 * math.log(math.log(t + 1) + 1) * m,
    "log": lambda t, m: math.log(t + 1),
}


def untried_weight(finite_total: int, s_max: int, n: int) -> int:
    """Finite stand-in M for Σ̂² = +∞ (an untried channel, eq. 10).

    What the code guarantees, and no more: **more untried channels always win; otherwise M is
    arbitrary.** With F = total finite Σ̂² and M > max(2F, 16 s_max² n):

    (i) in every P4(s, t) (eq. 20), M > F, so an optimum has the most untried channels any x with
        Υ̂ᵀx >= s can have, then (among those) the largest finite Σ̂²ᵀx;
    (ii) in eq. 21, for k < n untried channels, √((k+1)M) − √(kM + F) >= (M − F)/(2√(nM)) > s_max,
        so an s whose P4 optimum has one more untried channel beats every s with fewer.

    Among values of s whose optima have the *same* number k >= 1 of untried channels, eq. 21
    compares s + √(kM + F_s): the trade between s and the finite part F_s depends on the value of
    M chosen here, not on the paper (with a true +∞ all these scores are +∞ and eq. 21 does not
    decide). So ESDP's choice there is a consequence of M, not an exact reading of eq. 21.
    """
    return max(2 * finite_total, 16 * s_max * s_max * max(n, 1)) + 1


class ESDP(BaseAgent):
    """ESDP as an agent for MultiServerChannel (Algorithm 1 with Algorithm 2 per slot).

    Per slot t (1-based): statistics n_e, v̂_e (eqs. 8–9, from the semi-bandit feedback of the
    executed channels), σ̂²_e = g(t)/(2 n_e) (eq. 10; +∞ when n_e = 0), δ(t) (eq. 14), ξ(t) (eq. 18),
    Υ̂ = ⌈ξ v̂⌉ and Σ̂² = ⌈ξ² σ̂²⌉ (eqs. 16–17), S(t) (eq. 19), all P4(s, t) by one DP (Algorithm 2,
    eq. 27), s* by eq. 21, then channels of ports without a job are zeroed (Algorithm 1, lines 10–16).

    Choices where the paper is silent (each tested):

    * The DP's tables (the values, Π(c_k+1)·|S(t)| integers, and the decision bits of the cells the pruned DP
      updates; |E|·Π(c_k+1)·|S(t)| bytes with the dense kernels) are scratch reused between slots; they are not
      part of the agent's state: pickling or deep-copying the agent leaves them out and the next decision
      rebuilds them (same decisions, tested).
    * ``max_{x∈Ω} ||x||_1`` is α|E| (paper's default settings), used in g(t) (eq. 11), ξ(t) (eq. 18)
      and S(t) (eq. 19); S(t) = {0, ..., ⌊ξ(t) α|E|⌋}.
    * **Untried channels** (σ̂² = +∞, eq. 10). Any x containing one has P4 objective +∞ (and eq. 21
      score +∞), where the paper's comparisons do not decide. Each untried channel gets a finite
      weight M (:func:`untried_weight`) that guarantees: more untried channels always win, in every
      P4(s, t) and in eq. 21; otherwise (between choices with the same number of untried channels)
      the outcome depends on M and is arbitrary. So ESDP first selects a maximum-cardinality
      feasible set of untried channels, and tries every channel before trusting its estimates.
    * s values above Σ_e Υ̂_e are infeasible for every x; they are left out of the DP (exact), and so
      are, at edge i, the s above Σ_{j>=i} Υ̂_j. The DP visits channels in descending Υ̂ (the paper
      leaves the order of E free; it changes only which of several equal optima is returned).
    * Ties in eq. 21 go to the smallest s; in the DP an edge is taken only if it strictly improves.
    * Faithful mode solves P4 over Φ(t) (capacity only, eq. 29) and zeroes empty ports afterwards,
      as Algorithm 1 does. ``only_active=True`` solves over Ω(t) instead (channels of ports with a
      job only): a documented improvement, off by default.

    Options: ``alpha`` (0.5), ``delta`` (one of DELTAS, default per the paper), ``g`` (one of GS),
    ``backend`` of the DP ("auto" = "pruned", "numba" (every cell), "numpy": identical decisions).
    ``last_dp_cells`` / ``dp_cells``: the DP cells of the last decision / of the episode (pruned kernel).
    """

    name = "esdp"
    families = ("multiserver-channel",)

    def __init__(self, alpha: float = 0.5, delta: str = "default", g: str = "default", only_active: bool = False,
                 backend: str = "auto"):
        if not 0.0 < float(alpha) <= 1.0:
            raise ValueError(f"alpha={alpha!r} is invalid: expected a number in (0, 1]")
        if delta not in DELTAS:
            raise ValueError(f"delta={delta!r} is invalid: expected one of {', '.join(DELTAS)}")
        if g not in GS:
            raise ValueError(f"g={g!r} is invalid: expected one of {', '.join(GS)}")
        if backend not in ("auto", "pruned", "numba", "numpy"):
            raise ValueError(f"backend={backend!r} is invalid: expected 'auto', 'pruned', 'numba' or 'numpy'")
        self.alpha, self.delta_name, self.g_name, self.only_active = float(alpha), delta, g, bool(only_active)
        self.backend = backend
        self._workspace: dict = {}

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_workspace"] = {}  # DP scratch: rebuilt lazily by the next decision
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_workspace", {})

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        E = problem.num_edges
        self.n = np.zeros(E, dtype=np.int64)  # eq. 8
        self.sum_z = np.zeros(E)  # Σ x_e Z̃_e, numerator of eq. 9
        self.t = 0
        self.m = self.alpha * E  # max_{x∈Ω} ||x||_1 ≈ α|E|
        self.last_s_star = 0
        self.last_dp_cells = 0  # DP cells (s, c', i) of the last decision (pruned kernel; 0 with the others)
        self.dp_cells = 0  # their sum over the episode: a machine-independent measure of the computation

    def statistics(self, t: int) -> dict:
        """Eqs. 9–11 and 14–19 at slot t (before acting), from the counts so far."""
        with np.errstate(divide="ignore", invalid="ignore"):
            v_hat = np.where(self.n > 0, self.sum_z / np.maximum(self.n, 1), 0.0)  # eq. 9
        g = GS[self.g_name](t, self.m)
        sigma2 = np.where(self.n > 0, g / (2.0 * np.maximum(self.n, 1)), np.inf)  # eq. 10
        delta = DELTAS[self.delta_name](t)  # eq. 14
        xi = math.ceil(self.m / delta)  # eq. 18
        upsilon = np.ceil(xi * np.clip(v_hat, 0.0, 1.0)).astype(np.int64)  # eq. 16
        Sigma2 = np.where(np.isfinite(sigma2), np.ceil(xi * xi * np.where(np.isfinite(sigma2), sigma2, 0.0)), np.inf)  # eq. 17
        s_max = int(math.floor(xi * self.m))  # eq. 19
        return dict(v_hat=v_hat, sigma2=sigma2, delta=delta, xi=xi, upsilon=upsilon, Sigma2=Sigma2, s_max=s_max, g=g)

    def p4_inputs(self, arrivals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The DP's inputs for the next slot: the channels (E, or Ω(t)'s with ``only_active``) in DP order,
        Υ̂ (eq. 16), the weights Σ̂² (eq. 17, untried channels at :func:`untried_weight`) and the largest s
        (eq. 19, capped at Σ Υ̂)."""
        pb = self.problem
        st = self.statistics(self.t + 1)
        edges = np.arange(pb.num_edges)
        if self.only_active:
            edges = edges[arrivals[pb.edge_port].astype(bool)]
        Sig = st["Sigma2"][edges]
        untried = ~np.isfinite(Sig)
        finite = np.where(untried, 0.0, Sig).astype(np.int64)
        ups = st["upsilon"][edges]
        s_cap = min(st["s_max"], int(ups.sum()))
        weights = np.where(untried, untried_weight(int(finite.sum()), s_cap, edges.size), finite).astype(np.int64)
        # DP order: descending Υ̂ (stable). E's order is free in the paper; every P4(s, t) optimum is
        # the same in any order, and the reachable-s pruning then skips the most cells.
        perm = np.argsort(-ups, kind="stable")
        return edges[perm], ups[perm], weights[perm], s_cap

    def decide(self, arrivals: np.ndarray) -> np.ndarray:
        pb = self.problem
        edges, ups, weights, s_max = self.p4_inputs(arrivals)
        self._workspace.pop("cells", None)
        values, solution = solve_p4_all(ups, weights, pb.demand[edges], pb.capacity, s_max,
                                        backend=self.backend, workspace=self._workspace)
        self.last_dp_cells = int(self._workspace.get("cells", 0))
        self.dp_cells += self.last_dp_cells
        s_grid = np.arange(s_max + 1)
        score = np.where(values >= 0, s_grid + np.sqrt(np.maximum(values, 0)), -np.inf)  # eq. 21
        s_star = int(np.argmax(score))
        self.last_s_star = s_star
        x = np.zeros(pb.num_edges, dtype=np.int8)
        x[edges[solution(s_star)]] = 1
        x[~arrivals[pb.edge_port].astype(bool)] = 0  # Algorithm 1, lines 10–16 (constraint 4)
        return x

    def act(self, obs, info) -> np.ndarray:
        return self.decide(np.asarray(obs["arrivals"]))

    def run_statistics(self) -> dict[str, float]:
        """``dp_cells_per_decision``: the DP cells (s, c', i) evaluated per decision over the episode so far (the
        pruned kernel's count; a machine-independent measure of the computation, eqs. 18–19 and 27)."""
        return {"dp_cells_per_decision": self.dp_cells / max(self.t, 1)}

    def update(self, obs, action, reward, next_obs, info) -> None:
        fb = info["feedback"]
        x = np.asarray(fb["executed"], dtype=bool)  # the executed channels, x_e(t) = 1
        self.n[x] += 1  # eq. 8
        self.sum_z[x] += np.asarray(fb["utilities"])[x]
        self.t += 1
