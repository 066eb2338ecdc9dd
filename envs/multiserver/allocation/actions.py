"""P2 action modes (``MultiServerAllocationEnv(action_mode=...)``): how an action becomes the allocation y.

* ``"channel"`` (default, the paper's decision): y itself, ``Box(0, a, (|E|, K))`` in device units.
  Entries of a device type a port does not request (a_l^k = 0) have nothing to decide; their bound
  is 1 instead of a zero-width [0, 0] (which ``gymnasium.wrappers.RescaleAction`` cannot rescale) and
  the env ignores their value (:attr:`ActionMode.open`, (E, K) bool, False there).
* ``"port"``: ``Box(0, 1, (L,))``, one request fraction u_l per port;
* ``"port_device"``: ``Box(0, 1, (L, K))``, a request fraction u_l^k per port and device type.

The compact modes are completed by one stated rule (:class:`PortFill`): every channel (l, r) of a port
with a job requests d_(l,r)^k = u_l^k a_l^k (u_l^k = u_l in ``"port"`` mode; ports without a job
request nothing); on every (r, k) the ports of L_r are served in DRF order — ascending dominant share
s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k (ogasched.md §4, public problem data), ties by port index — and
each takes min(d_(l,r)^k, what is left of c_r^k). The result lies in Y (eqs. 3–4) by construction.
With u = 1 everywhere this is DRF's allocation, bit for bit (``baselines.multiserver_allocation.DRF``), so the
mode reaches at least DRF's total; smaller fractions leave capacity to the ports served later.
"""

from __future__ import annotations

import numba
import numpy as np

from clustergym.envs.multiserver.projection import AllocationLayout

__all__ = ["ACTION_MODES", "PortFill", "channel_high", "drf_order", "dominant_share", "fill_kernel", "zero_ignored"]

ACTION_MODES = ("channel", "port", "port_device")


def channel_high(problem) -> np.ndarray:
    """(E, K) float64 upper bound of the ``"channel"`` action: a_l^k of eq. 3, and 1 on the entries with
    a_l^k = 0 (nothing to decide there: the env ignores them), so that no bound is zero-width."""
    a = np.asarray(problem.edge_demand, dtype=np.float64)
    return np.where(a > 0, a, 1.0)


def zero_ignored(y: np.ndarray, open_: np.ndarray) -> np.ndarray:
    """y (..., E, K) with the ``"channel"`` action's ignored entries set to 0 (``open_`` (E, K) 1/0, see
    ``AllocationDynamics.open``): 0 · y there, so a NaN or inf stays NaN and is still refused."""
    with np.errstate(invalid="ignore"):  # inf · 0
        return y * open_


def dominant_share(problem) -> np.ndarray:
    """(L,) DRF's dominant share s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k (0 for a type l does not request,
    inf for a requested type its servers lack)."""
    pb = problem
    reach = np.zeros((pb.num_ports, pb.num_device_types))
    np.add.at(reach, pb.edge_port, pb.capacity[pb.edge_server])  # Σ_{r∈R_l} c_r^k
    share = np.divide(pb.demand, reach, out=np.full_like(reach, np.inf), where=reach > 0)
    share[(pb.demand == 0)] = 0.0
    return share.max(axis=1)


def drf_order(problem) -> np.ndarray:
    """(L,) rank of each port in DRF order: ascending dominant share, ties by port index."""
    s = dominant_share(problem)
    rank = np.empty(problem.num_ports)
    rank[np.lexsort((np.arange(problem.num_ports), s))] = np.arange(problem.num_ports)
    return rank


@numba.njit(cache=True, nogil=True)
def fill_kernel(u, x, port, upper, cap, edge, out):  # pragma: no cover - compiled
    """The fill rule for N envs: u (N, L, K) fractions, x (N, L) bool arrivals -> out (N, E, K).

    ``port`` (R, D) the port of each slot of server r in DRF order (−1 on padding, which comes last),
    ``upper`` (R, D, K) its a_l^k, ``cap`` (R, K) c_r^k, ``edge`` (R, D) its channel. Per (r, k), in
    DRF order: d = u a (0 for a port without a job), S = Σ of the d so far (this one included),
    y = min(max(c − (S − d), 0), d): numpy's ``clip(c − (cumsum(d) − d), 0, d)``, the ``drf``
    baseline's arithmetic, so u = 1 gives its allocation bit for bit.
    """
    N = u.shape[0]
    R, D, K = upper.shape
    for i in range(N):
        for r in range(R):
            for k in range(K):
                c = cap[r, k]
                s = 0.0
                for j in range(D):
                    l = port[r, j]
                    if l < 0:
                        break
                    d = u[i, l, k] * upper[r, j, k] if x[i, l] else 0.0
                    s = d if j == 0 else s + d  # numpy's cumsum starts from the first element
                    out[i, edge[r, j], k] = min(max(c - (s - d), 0.0), d)


class PortFill:
    """The completion rule of the ``"port"`` and ``"port_device"`` modes for one problem (module docstring).

    Static per problem: the padded per-server layout (R, D) of :class:`AllocationLayout` with each
    server's ports sorted in DRF order. :meth:`fill_batch` (N envs at once; :meth:`fill` for one) runs
    the compiled :func:`fill_kernel` over it; :meth:`fill_numpy` states the same rule on whole numpy
    arrays (a gather, a cumulative sum along the ports of every server, a clip, a gather back to the
    channels) and gives the same bits (tested).
    """

    def __init__(self, problem):
        pb = problem
        layout = AllocationLayout(pb.edge_port, pb.edge_server, pb.edge_demand, pb.capacity, pb.num_servers)
        L = pb.num_ports
        ext = np.append(np.asarray(pb.edge_port, dtype=np.int64), L)
        slot_port = ext[layout.index]  # (R, D) port of each slot, L on padding
        priority = np.append(drf_order(pb), np.inf)[slot_port]  # (R, D) DRF rank, padding last
        order = np.argsort(priority, axis=1, kind="stable")  # (R, D) slots of each server in DRF order
        self.num_ports = L
        self.port = np.take_along_axis(slot_port, order, axis=1)  # (R, D) port of each sorted slot
        self.upper = np.take_along_axis(layout.upper, order[:, :, None], axis=1)  # (R, D, K) a_l^k, sorted
        self.capacity = layout.capacity[:, None, :]  # (R, 1, K) c_r^k
        pos = np.empty_like(order)  # sorted position of every slot
        np.put_along_axis(pos, order, np.broadcast_to(np.arange(order.shape[1]), order.shape), axis=1)
        self.edge_server = layout.edge_server  # (E,)
        self.edge_pos = pos[layout.edge_server, layout.edge_slot]  # (E,) sorted position of channel e
        # the compiled kernel's inputs: port −1 and edge 0 on padding (never read past the first −1)
        self._port = np.ascontiguousarray(np.where(self.port == L, -1, self.port))  # (R, D)
        self._edge = np.ascontiguousarray(np.take_along_axis(np.where(layout.pad_mask, 0, layout.index), order,
                                                            axis=1))  # (R, D) channel of each sorted slot
        self._upper = np.ascontiguousarray(self.upper)
        self._cap = np.ascontiguousarray(layout.capacity)  # (R, K)
        self.num_edges = layout.num_edges

    def fill(self, u: np.ndarray, x: np.ndarray) -> np.ndarray:
        """(E, K) float64 allocation for request fractions ``u`` ((L,) or (L, K), in [0, 1]) and arrivals ``x`` (L,)."""
        return self.fill_batch(u[None], x[None])[0]

    def fill_batch(self, u: np.ndarray, x: np.ndarray) -> np.ndarray:
        """(N, E, K) float64 allocations for ``u`` (N, L) or (N, L, K) and arrivals ``x`` (N, L) bool
        (compiled: :func:`fill_kernel`; :meth:`fill_numpy` is the same rule on whole numpy arrays)."""
        N, K = x.shape[0], self.upper.shape[2]
        uk = np.ascontiguousarray(np.broadcast_to(u[:, :, None], u.shape + (K,)) if u.ndim == 2 else u,
                                  dtype=np.float64)
        out = np.empty((N, self.num_edges, K))
        fill_kernel(uk, np.ascontiguousarray(x, dtype=np.bool_), self._port, self._upper, self._cap, self._edge, out)
        return out

    def fill_numpy(self, u: np.ndarray, x: np.ndarray) -> np.ndarray:
        """:meth:`fill_batch` in numpy (gather, cumulative sum along each server's ports, clip, gather back)."""
        N, L = x.shape
        K = self.upper.shape[2]
        frac = np.zeros((N, L + 1, K))  # row L: padding slots request nothing
        frac[:, :L] = np.where(x[:, :, None], u if u.ndim == 3 else u[:, :, None], 0.0)  # idle ports: 0
        d = frac[:, self.port] * self.upper  # (N, R, D, K) requests d = u a, DRF order within each server
        before = np.cumsum(d, axis=2) - d  # requested by the ports served earlier
        alloc = np.clip(self.capacity - before, 0.0, d)  # min(d, what is left), never below 0
        return alloc[:, self.edge_server, self.edge_pos]  # (N, E, K)
