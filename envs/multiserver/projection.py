"""Exact Euclidean projection onto the P2 solution space Y (ogasched.md eqs. 3–4, 11–13).

Y = {y : 0 <= y_(l,r)^k <= a_l^k (eq. 3), Σ_{l∈L_r} y_(l,r)^k <= c_r^k (eq. 4)} is a product over
the pairs (r, k) of *capped simplices* {0 <= v <= u, Σ v <= c}. The projection of z therefore splits
into one independent problem per (r, k) (the "do in parallel" of Algorithm 1, lines 6–31). Its KKT
conditions (eq. 12) give, with τ = ρ_r^k / 2 >= 0 the multiplier of eq. 4,

    ŷ_i = clip(z_i − τ, 0, u_i),   τ = 0 if Σ_i clip(z_i, 0, u_i) <= c, else the root of
    g(τ) = Σ_i clip(z_i − τ, 0, u_i) = c,

and eq. 13 is the same root written on the set B³ of coordinates strictly inside (0, u):
τ = (Σ_{B³} z_i − c + Σ_{B¹} u_i) / |B³|. g is continuous, piecewise linear and non-increasing with
breakpoints {z_i − u_i} ∪ {z_i}; we sort the breakpoints of every group at once, evaluate g at all of
them by a cumulative sum of slopes, find the bracketing interval and interpolate (exact on a linear
piece). Cost O(G·D log D) for G = |R|·K groups of at most D ports each, all groups vectorised
(Algorithm 1's sort, line 7, without its repeat loop).

Groups use a padded layout: ``index`` (R, D) holds the edge ids of the ports of server r, padded
with E (a dummy row whose cap is 0, so padding never receives mass).
"""

from __future__ import annotations

import numpy as np

__all__ = ["project_groups", "AllocationLayout", "SegmentSum", "project"]


def project_groups(z: np.ndarray, upper: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Project every row of ``z`` onto {0 <= v <= upper, Σ v <= cap}.

    Args:
        z: (G, D) points, one group per row (padding entries must have ``upper`` 0).
        upper: (G, D) caps u >= 0 (eq. 3).
        cap: (G,) capacities c >= 0 (eq. 4).

    Returns:
        (G, D) projections (float64).
    """
    z = np.asarray(z, dtype=np.float64)
    u = np.asarray(upper, dtype=np.float64)
    c = np.asarray(cap, dtype=np.float64)
    G, D = z.shape
    box = np.clip(z, 0.0, u)  # τ = 0 candidate
    over = box.sum(axis=1) > c  # groups where eq. 4 binds (ρ_r^k > 0)
    if not over.any():
        return box
    zi, ui, ci = z[over], u[over], c[over]
    n = zi.shape[0]
    # Breakpoints: at z−u the slope of term i drops by 1 (it leaves its cap), at z it rises by 1 (hits 0).
    bp = np.concatenate([zi - ui, zi], axis=1)  # (n, 2D)
    dslope = np.concatenate([-np.ones_like(zi), np.ones_like(zi)], axis=1)
    dslope[:, :D][ui == 0] = 0.0  # a zero cap never moves
    dslope[:, D:][ui == 0] = 0.0
    order = np.argsort(bp, axis=1, kind="stable")
    bps = np.take_along_axis(bp, order, axis=1)
    slope_after = np.cumsum(np.take_along_axis(dslope, order, axis=1), axis=1)  # slope on (b_j, b_{j+1})
    # g(b_0) = Σ u (every term at its cap); g(b_j) = g(b_{j-1}) + slope(b_{j-1}, b_j)·(b_j − b_{j-1}).
    gaps = np.diff(bps, axis=1)
    g = np.empty_like(bps)
    g[:, 0] = ui.sum(axis=1)
    g[:, 1:] = g[:, :1] + np.cumsum(slope_after[:, :-1] * gaps, axis=1)
    g[:, -1] = 0.0  # exactly: past the last breakpoint every term is 0 (the cumsum leaves ~1e-16)
    # First breakpoint with g <= c (exists: g at the last breakpoint is 0 <= c); g(b_0) = Σu > c since
    # the group binds, so the root lies in (b_{j−1}, b_j].
    j = np.argmax(g <= ci[:, None], axis=1)
    j = np.maximum(j, 1)
    rows = np.arange(n)
    b0, b1 = bps[rows, j - 1], bps[rows, j]
    g0, g1 = g[rows, j - 1], g[rows, j]
    denom = g0 - g1
    frac = np.where(denom > 0, (g0 - ci) / np.where(denom > 0, denom, 1.0), 0.0)
    tau = b0 + frac * (b1 - b0)
    tau = np.maximum(tau, 0.0)
    out = box
    out[over] = np.clip(zi - tau[:, None], 0.0, ui)
    out[c <= 0] = 0.0  # exactly (the interpolation leaves ~1e-16 there)
    return out


class AllocationLayout:
    """Index maps between the (E, K) allocation and the per-(r, k) groups of Y.

    Attributes:
        index: (R, D) int, edge ids of the ports of server r, padded with E.
        pad_mask: (R, D) bool, True where ``index`` is padding.
        upper: (R, D, K) float, a_l^k of the port of each slot (0 on padding), eq. 3.
        capacity: (R, K) float, c_r^k, eq. 4.
    """

    def __init__(self, edge_port: np.ndarray, edge_server: np.ndarray, demand: np.ndarray,
                 capacity: np.ndarray, num_servers: int):
        edge_server = np.asarray(edge_server, dtype=np.int64)
        E = edge_server.shape[0]
        K = capacity.shape[1]
        deg = np.bincount(edge_server, minlength=num_servers)
        D = max(int(deg.max()) if E else 0, 1)
        order = np.lexsort((np.arange(E), edge_server))  # by server, then edge id (port order)
        starts = np.concatenate([[0], np.cumsum(deg)[:-1]])
        slot = np.arange(E) - starts[edge_server[order]]
        index = np.full((num_servers, D), E, dtype=np.int64)
        index[edge_server[order], slot] = order
        self.num_edges = E
        self.index = index
        self.pad_mask = index == E
        dem = np.vstack([np.asarray(demand, dtype=np.float64), np.zeros((1, K))])  # (E+1, K)
        self.upper = dem[index]  # (R, D, K)
        self.capacity = np.asarray(capacity, dtype=np.float64)  # (R, K)
        self._upper_g = np.ascontiguousarray(self.upper.transpose(0, 2, 1)).reshape(-1, D)  # (R·K, D)
        self._cap_g = self.capacity.reshape(-1)
        # Edge e sits at (server_e, slot_e) of the padded layout.
        self.edge_slot = np.empty(E, dtype=np.int64)
        self.edge_slot[order] = slot
        self.edge_server = edge_server
        self._sums = SegmentSum(edge_server, num_servers)

    def gather(self, y: np.ndarray) -> np.ndarray:
        """(E, K) -> (R, D, K) with zeros on padding."""
        ext = np.vstack([y, np.zeros((1, y.shape[1]))])
        return ext[self.index]

    def server_sums(self, y: np.ndarray) -> np.ndarray:
        """(E, K) -> (R, K): Σ_{l∈L_r} y_(l,r)^k (left side of eq. 4)."""
        return self._sums(y)

    def project(self, z: np.ndarray) -> np.ndarray:
        """Π_Y(z) for z of shape (E, K) (eq. 11), all (r, k) groups at once."""
        R, D = self.index.shape
        K = z.shape[1]
        zg = np.ascontiguousarray(self.gather(z).transpose(0, 2, 1)).reshape(-1, D)  # (R·K, D)
        yg = project_groups(zg, self._upper_g, self._cap_g).reshape(R, K, D)
        return yg[self.edge_server, :, self.edge_slot]  # (E, K)


def project(z: np.ndarray, edge_port, edge_server, demand, capacity, num_servers: int) -> np.ndarray:
    """Convenience: Π_Y(z) for one call (builds the layout; use :class:`AllocationLayout` in loops)."""
    return AllocationLayout(edge_port, edge_server, demand, capacity, num_servers).project(z)


class SegmentSum:
    """Fast Σ over the items of each group: (n,) or (n, w) -> (num_groups,) or (num_groups, w).

    One ``np.bincount`` over flat indices group·w + column (no Python loop, no ``np.add.at``); the
    per-step sums of eq. 4 (over L_r) and eq. 5 (over R_l) use it. Empty groups sum to 0.
    """

    def __init__(self, group_of: np.ndarray, num_groups: int):
        self.group_of = np.asarray(group_of, dtype=np.int64)
        self.num_groups = int(num_groups)
        self._flat: dict[int, np.ndarray] = {}

    def flat_index(self, w: int) -> np.ndarray:
        idx = self._flat.get(w)
        if idx is None:
            idx = (self.group_of[:, None] * w + np.arange(w)[None, :]).ravel()
            self._flat[w] = idx
        return idx

    def __call__(self, v: np.ndarray) -> np.ndarray:
        if v.ndim == 1:
            return np.bincount(self.group_of, weights=v, minlength=self.num_groups)
        w = v.shape[1]
        return np.bincount(self.flat_index(w), weights=v.ravel(), minlength=self.num_groups * w).reshape(-1, w)
