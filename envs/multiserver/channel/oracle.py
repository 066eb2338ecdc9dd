"""Exact multi-dimensional 0/1 knapsack by dynamic programming over the capacity grid.

Used by the P1 oracle (eq. 7: x*(t) = argmax_{x ∈ Ω(t)} ṽᵀx). With integer demands the DP over
all residual-capacity vectors c' ∈ [0, c] is exact for real values; it costs
O(n · Π_k (c_k + 1)) and every item step is one vectorised max over the whole grid.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["knapsack_max", "knapsack_value", "brute_force_knapsack"]

# knapsack_value's memo: a digest of the inputs -> the optimum. The per-slot oracle of an (instance, seed) is the
# same for every agent run on it (its inputs are the arrivals and the hidden means, never the agent's actions),
# so the runs of a comparison after the first one in a process pay a hash instead of the DP.
_MEMO: dict[bytes, float] = {}
_MEMO_MAX = 400_000  # entries (about 100 bytes each); the memo is cleared when it is full


def knapsack_max(values: np.ndarray, weights: np.ndarray, capacity: np.ndarray) -> tuple[float, np.ndarray]:
    """max Σ_i v_i x_i  s.t.  Σ_i w_ik x_i <= c_k, x ∈ {0,1}^n.

    Args:
        values: (n,) float item values (items with v <= 0 are never worth taking).
        weights: (n, K) int >= 0 item weights.
        capacity: (K,) int >= 0.

    Returns:
        (optimal value, (n,) bool optimal selection). Ties prefer leaving later items out.
    """
    values = np.asarray(values, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.int64)
    capacity = np.asarray(capacity, dtype=np.int64)
    n = values.shape[0]
    x = np.zeros(n, dtype=bool)
    items = [i for i in range(n) if values[i] > 0 and np.all(weights[i] <= capacity)]
    if not items:
        return 0.0, x
    grid = tuple(int(c) + 1 for c in capacity)
    V = np.zeros(grid)  # V[c'] = best value of the items seen so far within capacity c'
    take = np.zeros((len(items), *grid), dtype=bool)
    for j, i in enumerate(items):
        w = weights[i]
        tgt = tuple(slice(int(wk), None) for wk in w)
        src = tuple(slice(0, g - int(wk)) for g, wk in zip(grid, w))
        cand = V[src] + values[i]
        better = cand > V[tgt]
        key: tuple[int | slice, ...] = (j, *tgt)
        take[key] = better
        V[tgt] = np.where(better, cand, V[tgt])
    c = capacity.copy()
    for j in range(len(items) - 1, -1, -1):
        if take[(j, *c)]:
            i = items[j]
            x[i] = True
            c -= weights[i]
    return float(values[x].sum()), x


def knapsack_value(values: np.ndarray, weights: np.ndarray, capacity: np.ndarray) -> float:
    """The optimal value of :func:`knapsack_max`, memoised per process on the exact bytes of the inputs (a pure
    function: the memo changes no value, only the time)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    weights = np.ascontiguousarray(weights, dtype=np.int64)
    capacity = np.ascontiguousarray(capacity, dtype=np.int64)
    h = hashlib.blake2b(digest_size=20)
    h.update(np.array([values.shape[0], capacity.shape[0]], dtype=np.int64).tobytes())
    h.update(values.tobytes())
    h.update(weights.tobytes())
    h.update(capacity.tobytes())
    key = h.digest()
    opt = _MEMO.get(key)
    if opt is None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        opt = _MEMO[key] = knapsack_max(values, weights, capacity)[0]
    return opt


def brute_force_knapsack(values, weights, capacity) -> float:
    """Reference optimum by enumerating all 2^n selections (tests only; n <= ~16)."""
    values = np.asarray(values, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.int64)
    n = values.shape[0]
    masks = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.int64)  # (2^n, n)
    feasible = np.all(masks @ weights <= np.asarray(capacity)[None, :], axis=1)
    return float(np.max(np.where(feasible, masks @ values, -np.inf)))
