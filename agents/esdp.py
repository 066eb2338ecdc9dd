"""ESDP: Efficient Sampling-based Dynamic Programming (esdp.md §3, Algorithms 1–2).

Faithful to the paper's equations; the choices where the paper is silent or ambiguous are listed
in :class:`ESDP`'s docstring and tested in ``tests/agents/test_esdp.py``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from clustergym.agent import BaseAgent

__all__ = ["ESDP", "solve_p4_all", "DELTAS", "GS"]

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


def _grid_steps(capacity: np.ndarray):
    """The residual-capacity grid [0, c] flattened row-major: its shape, strides and every cell's coordinates."""
    grid = np.asarray(capacity, dtype=np.int64) + 1
    strides = np.ones(grid.size, dtype=np.int64)
    for k in range(grid.size - 2, -1, -1):
        strides[k] = strides[k + 1] * grid[k + 1]
    coords = np.stack(np.unravel_index(np.arange(int(np.prod(grid))), tuple(grid)), axis=1)  # (G, K)
    return grid, strides, coords


@numba.njit(cache=True, nogil=True)
def _dp_numba(upsilon, weights, offsets, valid, V, take):  # pragma: no cover - compiled
    n, G, S = take.shape
    reach = 0  # Σ_{j >= i} Υ̂_j: V(s, ·, i) = −∞ for every larger s, so those cells are skipped
    for i in range(n - 1, -1, -1):
        u = min(upsilon[i], S)
        w = weights[i]
        off = offsets[i]
        reach = min(reach + upsilon[i], S - 1)
        top = reach + 1
        for cf in range(G - 1, -1, -1):  # decreasing: the source row (cf − off < cf) is still V(·, i+1)
            if not valid[i, cf]:  # c' < a_i: edge i cannot be taken (backtracking checks this too)
                continue
            tk = take[i, cf]
            row = V[cf]
            src = V[cf - off]  # the same row when a_i = 0: hence the downward order over s
            head = src[0] + w
            if off > 0:  # distinct rows: ascending order vectorises
                for s in range(u, top):  # s >= Υ̂_i: V(s − Υ̂_i, c' − a_i, i+1) + Σ̂²_i
                    cand = src[s - u] + w
                    better = cand > row[s]
                    tk[s] = better
                    row[s] = max(row[s], cand)
            else:
                for s in range(top - 1, u - 1, -1):
                    cand = src[s - u] + w
                    better = cand > row[s]
                    tk[s] = better
                    row[s] = max(row[s], cand)
            for s in range(min(u, top)):  # s < Υ̂_i: V(0, c' − a_i, i+1) + Σ̂²_i
                better = head > row[s]
                tk[s] = better
                row[s] = max(row[s], head)
    return V


@numba.njit(cache=True, nogil=True)
def _tops(upsilon, offsets, valid, reach, S, tops):  # pragma: no cover - compiled
    """The per-cell reach bound, in the order the DP visits the cells: R_i(c') = the largest Σ_{j>=i} Υ̂_j x_j
    over x whose demands fit in c' (a knapsack over the capacity grid, without the s axis). V(s, c', i) = −∞ for
    every s > R_i(c'), so cell (c', i) needs s in [0, min(R_i(c'), S−1)]; ``tops[i, c']`` = that count (0 where
    c' is not reachable at layer i: :func:`_reachable`). Returns Σ tops over the cells the DP updates."""
    n, G = valid.shape
    R = np.zeros(G, dtype=np.int64)  # R_{i+1}(·), updated in place to R_i(·)
    cells = 0
    for i in range(n - 1, -1, -1):
        u = upsilon[i]
        off = offsets[i]
        for cf in range(G - 1, -1, -1):  # decreasing: R[cf − off] is still R_{i+1} when read
            if not reach[i, cf]:
                continue
            if valid[i, cf]:
                cand = R[cf - off] + u
                if cand > R[cf]:
                    R[cf] = cand
                top = min(R[cf], S - 1) + 1
                tops[i, cf] = top
                cells += top
            else:
                tops[i, cf] = min(R[cf], S - 1) + 1  # not updated at layer i (edge i does not fit)
    return cells


@numba.njit(cache=True, nogil=True)
def _dp_pruned(upsilon, weights, offsets, valid, reach, tops, starts, V, bits):  # pragma: no cover - compiled
    """Eq. 27 over the cells that can matter: the cells reachable at each layer (``reach``) and, per cell, s below
    its reach bound (``tops``); a taken edge sets bit ``starts[i, c'] + s`` of ``bits`` (zeroed by the caller)."""
    n, G = valid.shape
    S = V.shape[1]
    for i in range(n - 1, -1, -1):
        u = min(upsilon[i], S)
        w = weights[i]
        off = offsets[i]
        for cf in range(G - 1, -1, -1):  # decreasing: the source row (cf − off < cf) is still V(·, i+1)
            if not reach[i, cf] or not valid[i, cf]:
                continue
            top = tops[i, cf]
            base = starts[i, cf]
            row = V[cf]
            src = V[cf - off]  # the same row when a_i = 0: hence the downward order over s
            head = src[0] + w
            if off > 0:
                for s in range(u, top):  # s >= Υ̂_i: V(s − Υ̂_i, c' − a_i, i+1) + Σ̂²_i
                    cand = src[s - u] + w
                    if cand > row[s]:
                        row[s] = cand
                        b = base + s
                        bits[b >> 3] |= np.uint8(1 << (b & 7))
            else:
                for s in range(top - 1, u - 1, -1):
                    cand = src[s - u] + w
                    if cand > row[s]:
                        row[s] = cand
                        b = base + s
                        bits[b >> 3] |= np.uint8(1 << (b & 7))
            for s in range(min(u, top)):  # s < Υ̂_i: V(0, c' − a_i, i+1) + Σ̂²_i
                if head > row[s]:
                    row[s] = head
                    b = base + s
                    bits[b >> 3] |= np.uint8(1 << (b & 7))
    return V


@numba.njit(cache=True, nogil=True)
def _masks(coords, demand, fits, valid):  # pragma: no cover - compiled
    """``valid[i, c']``: edge i fits in c' (c' >= a_i and a_i <= c). One pass over (i, c', k) instead of an
    (n, G, K) comparison in numpy."""
    n, K = demand.shape
    G = coords.shape[0]
    for i in range(n):
        for cf in range(G):
            fit = fits[i]
            for k in range(K):
                if coords[cf, k] < demand[i, k]:
                    fit = False
            valid[i, cf] = fit


@numba.njit(cache=True, nogil=True)
def _reachable(offsets, valid, root, reach):  # pragma: no cover - compiled
    """``reach[i, c']``: residual capacity c' can be met at layer i by backtracking from the full capacity
    (``root``), i.e. c' = c − Σ_{j<i} a_j x_j for some x whose demands fit step by step. The sets grow with i
    (not taking edge i keeps c'), so a cell reachable at layer i was updated at every deeper layer."""
    n, G = valid.shape
    reach[0, :] = False
    reach[0, root] = True
    for i in range(n - 1):
        off = offsets[i]
        for cf in range(G):
            reach[i + 1, cf] = reach[i, cf]
        for cf in range(G):
            if reach[i, cf] and valid[i, cf]:
                reach[i + 1, cf - off] = True


def _scratch(workspace, name: str, size: int, dtype) -> np.ndarray:
    """A flat buffer of at least ``size`` items kept in ``workspace`` between decisions (no workspace: a new one).
    Reusing it matters at large sizes: a fresh 100 MB table costs page faults on every decision."""
    buf = None if workspace is None else workspace.get(name)
    if buf is None or buf.size < size or buf.dtype != dtype:
        buf = np.empty(max(size, 1), dtype=dtype)
        if workspace is not None:
            workspace[name] = buf
    return buf[:max(size, 1)]


def _solve_pruned(upsilon, sigma2, demand, capacity, S, dtype, neg, grid, strides, coords, offsets, workspace):
    """The pruned, bit-packed DP (``backend="pruned"``): same values and same decisions as the dense kernel.

    Two prunings, each exact (they skip only cells whose value cannot reach the answer):

    * **reach bound** — cell (s, c', i) is −∞ when s > R_i(c'), the largest Σ_{j>=i} Υ̂_j x_j that fits in c'
      (:func:`_tops`); those cells are never written, so they keep the −∞ they were filled with, exactly the
      value the dense recursion computes for them;
    * **top-down reachability** — backtracking starts at the full capacity c, so at layer i only the residual
      capacities c' = c − Σ_{j<i} a_j x_j that some choice of the earlier edges leaves (:func:`_reachable`) are
      on a path from c; the others are skipped. A reachable cell reads only reachable cells of layer i+1
      (c' itself and c' − a_i), and the reachable sets grow with i, so every cell read holds the dense value.
      (This refines the box c' >= c − Σ_{j<i} a_j, which holds every reachable cell; at the |R| = 80 scenario
      it keeps about 1 cell in 7 of the box's.)

    The decision of cell (c', i) at s is bit ``starts[i, c'] + s`` of one byte array holding only the cells
    the DP updates, R_i(c') + 1 bits each: 8x less than a bool table before the pruning, far less after it.
    With a ``workspace``, the value table, the decision bits and the per-cell arrays are buffers reused from one
    decision to the next (refilled, never read stale: tested with one workspace over DPs of changing sizes).
    """
    n = upsilon.shape[0]
    G = int(np.prod(grid))
    fits = np.all(demand <= capacity, axis=1)  # edges that can be taken at all
    valid = _scratch(workspace, "valid", n * G, np.bool_).reshape(n, G)
    _masks(coords, demand, fits, valid)
    reach = _scratch(workspace, "reach", n * G, np.bool_).reshape(n, G)
    _reachable(offsets, valid, int(capacity @ strides), reach)
    tops = _scratch(workspace, "tops", n * G, np.int64).reshape(n, G)
    tops[:] = 0
    cells = _tops(upsilon, offsets, valid, reach, S, tops)
    sizes = np.where(reach & valid, tops, 0).ravel()
    starts = (np.cumsum(sizes) - sizes).reshape(n, G)
    nbytes = (int(sizes.sum()) + 7) // 8
    V = _scratch(workspace, "V", G * S, np.dtype(dtype)).reshape(G, S)
    V.fill(neg)
    V[:, 0] = 0  # base case i = |E|: s = 0 feasible with value 0
    bits = _scratch(workspace, "bits", nbytes, np.uint8)
    bits[:] = 0
    _dp_pruned(upsilon, sigma2.astype(dtype), offsets, valid, reach, tops, starts, V, bits)
    if workspace is not None:
        workspace["cells"] = int(cells)  # DP cells (s, c', i) evaluated: the decision's deterministic cost
        workspace["table_bytes"] = int(nbytes)

    def taken(i: int, cf: int, s: int) -> bool:
        b = int(starts[i, cf]) + s
        return bool(bits[b >> 3] >> (b & 7) & 1)

    return V, taken


def _grid(capacity: np.ndarray, workspace: dict | None):
    """:func:`_grid_steps` of ``capacity``, kept in ``workspace`` while the capacity stays the same."""
    key = tuple(int(c) for c in capacity)
    if workspace is not None and workspace.get("grid_key") == key:
        return workspace["grid"]
    out = _grid_steps(capacity)
    if workspace is not None:
        workspace["grid_key"], workspace["grid"] = key, out
    return out


def solve_p4_all(upsilon: np.ndarray, sigma2: np.ndarray, demand: np.ndarray, capacity: np.ndarray,
                 s_max: int, backend: str = "auto", workspace: dict | None = None):
    """Solve P4(s, t) (eq. 20) for every s = 0..s_max by the DP of Algorithm 2 (eq. 27).

    V(s, c', i) = max{ V(s, c', i+1),  V(max(s − Υ̂_i, 0), c' − a_i, i+1) + Σ̂²_i  if c' >= a_i }
    with V(s, c', |E|) = 0 if s == 0 else −∞. Taking edge i is allowed only when c' >= a_i
    componentwise: this is what lines 13–16 of Algorithm 2 enforce after eq. 27's max{c − A, 0}.
    An edge is recorded as taken only where it strictly improves V (line 10).

    ``backend="numpy"`` updates the whole (c', s) grid per edge with array slices (the reference);
    ``"numba"`` runs the same recursion in one fused compiled pass over every cell (about 5x faster);
    ``"pruned"`` (what ``"auto"`` picks) skips the cells that cannot matter and packs the decisions into
    bits (:func:`_solve_pruned`: a reach bound per cell and, per layer, only the cells reachable from the full
    capacity; both exact). All three return identical values and identical decisions (tested). With a ``workspace`` dict, the pruned
    kernel records ``workspace["cells"]``, the number of cells (s, c', i) it evaluated: the decision's
    cost, the same on every machine.

    Args:
        upsilon: (n,) int >= 0, Υ̂ (eq. 16).
        sigma2: (n,) int >= 0, Σ̂² (eq. 17), already finite.
        demand: (n, K) int >= 0.
        capacity: (K,) int.
        s_max: largest s of S(t) (eq. 19).

    Returns:
        values: (s_max+1,) int64, V*(s) = optimum of P4(s, t) (−1 where infeasible), and
        solution(s) -> (n,) bool, a maximiser of P4(s, t) (backtracking the stored decisions).
    """
    upsilon = np.asarray(upsilon, dtype=np.int64)
    sigma2 = np.asarray(sigma2, dtype=np.int64)
    demand = np.asarray(demand, dtype=np.int64)
    capacity = np.asarray(capacity, dtype=np.int64)
    n = upsilon.shape[0]
    S = int(s_max) + 1
    total = int(sigma2.sum())
    dtype = np.int32 if total < 2**29 else np.int64
    neg = np.iinfo(dtype).min // 2  # "−∞" that stays far below 0 after adding any Σ̂² sums
    if backend == "auto":
        backend = "pruned"
    if backend == "pruned":
        grid, strides, coords = _grid(capacity, workspace)
        offsets = demand @ strides
        Vflat, taken = _solve_pruned(upsilon, sigma2, demand, capacity, S, dtype, neg, grid, strides, coords,
                                     offsets, workspace)
        values = Vflat[int(capacity @ strides)].astype(np.int64)
        values[values < 0] = -1

        def solution_pruned(s: int) -> np.ndarray:
            x = np.zeros(n, dtype=bool)
            c = capacity.copy()
            for i in range(n):
                if np.all(c >= demand[i]) and taken(i, int(c @ strides), s):
                    x[i] = True
                    c -= demand[i]
                    s = max(s - int(upsilon[i]), 0)
            return x

        return values, solution_pruned
    grid, strides, coords = _grid_steps(capacity)
    G = int(np.prod(grid))
    if backend == "numba":
        V = np.full((G, S), neg, dtype=dtype)
        V[:, 0] = 0  # base case i = |E|: s = 0 feasible with value 0
        need = n * G * S  # decision bits; reused across calls through ``workspace`` (no 10s of MB per slot)
        buf = None if workspace is None else workspace.get("take")
        if buf is None or buf.size < need:
            buf = np.empty(need, dtype=np.bool_)
            if workspace is not None:
                workspace["take"] = buf
        take = buf[:need].reshape(n, G, S)
        valid = np.all(coords[None, :, :] >= demand[:, None, :], axis=2) & np.all(demand <= capacity, axis=1)[:, None]
        offsets = demand @ strides
        _dp_numba(upsilon, sigma2.astype(dtype), offsets, valid, V, take)
        take = take.reshape(n, *grid, S)
        V = V.reshape(*grid, S)
    elif backend == "numpy":
        shape = tuple(int(g) for g in grid)
        V = np.full((*shape, S), neg, dtype=dtype)
        V[..., 0] = 0
        take = np.zeros((n, *shape, S), dtype=bool)
        for i in range(n - 1, -1, -1):
            a = demand[i]
            if np.any(a > capacity):
                continue
            tgt = tuple(slice(int(ak), None) for ak in a)
            src = tuple(slice(0, g - int(ak)) for g, ak in zip(shape, a))
            u = min(int(upsilon[i]), S)
            vs = V[src]
            cand = np.empty(vs.shape, dtype=dtype)
            cand[..., u:] = vs[..., : S - u]  # s >= Υ̂_i: V(s − Υ̂_i, ...)
            cand[..., :u] = vs[..., :1]  # s < Υ̂_i: V(0, ...)
            cand += dtype(sigma2[i])
            cur = V[tgt]
            better = cand > cur
            take[(i, *tgt)] = better
            np.maximum(cur, cand, out=cur)
    else:
        raise ValueError(f"backend={backend!r} is invalid: expected 'auto', 'pruned', 'numba' or 'numpy'")
    full = tuple(int(c) for c in capacity)
    values = V[full].astype(np.int64)
    values[values < 0] = -1

    def solution(s: int) -> np.ndarray:
        x = np.zeros(n, dtype=bool)
        c = np.array(full, dtype=np.int64)
        for i in range(n):
            if np.all(c >= demand[i]) and take[(i, *c, s)]:
                x[i] = True
                c -= demand[i]
                s = max(s - int(upsilon[i]), 0)
        return x

    return values, solution


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
