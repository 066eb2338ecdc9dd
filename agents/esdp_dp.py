"""ESDP's dynamic program (esdp.md §3, Algorithm 2): every P4(s, t) (eq. 20) for s = 0..s_max at once by the
recursion of eq. 27, over the residual-capacity grid.

:func:`solve_p4_all` is the entry point; its three kernels give identical values and identical decisions:
``"pruned"`` (the default, :func:`_solve_pruned`), ``"numba"`` (every cell, one compiled pass) and ``"numpy"``
(the array reference).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["solve_p4_all"]


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

    ``backend="numpy"`` updates the whole (c', s) grid per edge with array slices (the reference,
    :func:`_p4_numpy`); ``"numba"`` runs the same recursion in one fused compiled pass over every cell (about 5x
    faster, :func:`_p4_dense`); ``"pruned"`` (what ``"auto"`` picks, :func:`_p4_pruned`) skips the cells that
    cannot matter and packs the decisions into bits (:func:`_solve_pruned`: a reach bound per cell and, per layer,
    only the cells reachable from the full capacity; both exact). All three return identical values and identical
    decisions (tested). With a ``workspace`` dict, the pruned kernel records ``workspace["cells"]``, the number of
    cells (s, c', i) it evaluated: the decision's cost, the same on every machine.

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
    S = int(s_max) + 1
    total = int(sigma2.sum())
    dtype = np.int32 if total < 2**29 else np.int64
    neg = np.iinfo(dtype).min // 2  # "−∞" that stays far below 0 after adding any Σ̂² sums
    if backend == "auto":
        backend = "pruned"
    if backend == "pruned":
        return _p4_pruned(upsilon, sigma2, demand, capacity, S, dtype, neg, workspace)
    grid, strides, coords = _grid_steps(capacity)
    if backend == "numba":
        V, take = _p4_dense(upsilon, sigma2, demand, capacity, S, dtype, neg, grid, strides, coords, workspace)
    elif backend == "numpy":
        V, take = _p4_numpy(upsilon, sigma2, demand, capacity, S, dtype, neg, grid)
    else:
        raise ValueError(f"backend={backend!r} is invalid: expected 'auto', 'pruned', 'numba' or 'numpy'")
    return _dense_answer(V, take, upsilon, demand, capacity)


def _p4_pruned(upsilon, sigma2, demand, capacity, S: int, dtype, neg: int, workspace):
    """``backend="pruned"``: :func:`_solve_pruned`, then V*(s) at the full capacity (−1 where infeasible) and
    x*(s, t, c, 0) (line 21 of Algorithm 2) rebuilt from its bit-packed decisions (lines 11–12)."""
    n = upsilon.shape[0]
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


def _p4_dense(upsilon, sigma2, demand, capacity, S: int, dtype, neg: int, grid, strides, coords, workspace):
    """``backend="numba"``: eq. 27 over every cell (s, c', i) in one compiled pass (:func:`_dp_numba`). Returns
    V (*grid, S) and the decisions ``take`` (n, *grid, S) (a buffer reused through ``workspace``)."""
    n = upsilon.shape[0]
    G = int(np.prod(grid))
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
    return V.reshape(*grid, S), take.reshape(n, *grid, S)


def _p4_numpy(upsilon, sigma2, demand, capacity, S: int, dtype, neg: int, grid):
    """``backend="numpy"``, the reference: eq. 27 edge by edge on the whole (c', s) grid with array slices. Returns
    V (*grid, S) and the decisions ``take`` (n, *grid, S)."""
    n = upsilon.shape[0]
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
        key: tuple[int | slice, ...] = (i, *tgt)
        take[key] = better
        np.maximum(cur, cand, out=cur)
    return V, take


def _dense_answer(V, take, upsilon, demand, capacity):
    """V*(s) at the full capacity (−1 where infeasible) and x*(s, t, c, 0) (line 21 of Algorithm 2) rebuilt from
    the dense decisions ``take`` (n, *grid, S) (lines 11–12)."""
    n = upsilon.shape[0]
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
