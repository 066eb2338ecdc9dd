"""P2's learner observation parts: statistics from public feedback and public problem data, for N envs.

The single env (N = 1), the native vector env (N sub-envs) and, through the single env, the
PettingZoo env put the same entries in their observation, computed here once:

* ``arrival_share`` (L,): the share of slots port l had a job (the estimate of the hidden ρ_l, eq. 1);
* ``port_reward_mean`` (L,): the mean realised reward x_l q_l of port l over the slots it had a job
  (eq. 5; 0 before its first job);
* ``last_port_reward`` (L,) and ``last_allocation`` (P, K): the last slot's feedback (x_l q_l and the
  executed y in device units; 0 before the first step);
* the public problem data OGASched's gradient reads (eqs. 9–10, 27), per channel and aligned with the
  action rows: ``edge_alpha`` (P, K) α_r^k and ``edge_utility`` (P·K,) the eq. 27 family code of the
  channel's server (row-major: entry p·K + k is channel p, device type k; a 1-D ``MultiDiscrete``, the
  shape every standard policy takes) (``scenario.UTILITY_FAMILIES``: 0 linear, 1 log, 2 reciprocal, 3 poly), ``beta``
  (K,) β_k of eq. 5, and ``edge_demand`` (P, K) a_l^k / c_r^k (0 where c_r^k = 0).

Only ``info["feedback"]``, the arrivals already observed and the public problem enter; never the hidden
ρ or the metrics. t is the number of slots played in the episode (1 at t = 0). P = |E|, or
``max_edges`` on a padded env (0 on padding).
"""

from __future__ import annotations

import numba
import numpy as np
from gymnasium import spaces

from clustergym.envs.multiserver.allocation.scenario import UTILITY_FAMILIES

__all__ = ["STATS_KEYS", "AllocationStats", "learner_spaces", "static_parts"]

# The statistics in the order earlier versions appended them to the flat observation (FlattenWithStats).
STATS_KEYS = ("arrival_share", "port_reward_mean")


def learner_spaces(P: int, L: int, K: int) -> dict:
    """The observation spaces of the statistics, the last slot's feedback and the public problem data."""
    real = lambda *shape: spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float32)  # noqa: E731
    nonneg = lambda *shape: spaces.Box(0.0, np.inf, shape=shape, dtype=np.float32)  # noqa: E731
    return {"arrival_share": spaces.Box(0.0, 1.0, shape=(L,), dtype=np.float32), "port_reward_mean": real(L),
            "last_port_reward": real(L), "last_allocation": nonneg(P, K), "edge_alpha": nonneg(P, K),
            "edge_utility": spaces.MultiDiscrete(np.full(P * K, len(UTILITY_FAMILIES), dtype=np.int64)),
            "beta": nonneg(K), "edge_demand": nonneg(P, K)}


def static_parts(problem, P: int) -> dict:
    """The public problem data of one instance, padded to P channels (float32 / int64 arrays)."""
    pb = problem
    E, K = pb.num_edges, pb.num_device_types
    up = np.asarray(pb.edge_demand, dtype=np.float64)  # (E, K) a of eq. 3
    cap = np.asarray(pb.capacity, dtype=np.float64)[pb.edge_server]  # (E, K) c_r^k of each channel's server
    demand = np.zeros((P, K), dtype=np.float32)
    demand[:E] = np.divide(up, cap, out=np.zeros_like(cap), where=cap > 0)
    alpha = np.zeros((P, K), dtype=np.float32)
    alpha[:E] = np.asarray(pb.alpha)[pb.edge_server]
    code = np.zeros((P, K), dtype=np.int64)
    code[:E] = np.asarray(pb.utility)[pb.edge_server]
    return {"edge_demand": demand, "edge_alpha": alpha, "edge_utility": code.reshape(-1),
            "beta": np.asarray(pb.beta, dtype=np.float32).copy()}


@numba.njit(cache=True, nogil=True)
def _update(port_reward, arrivals, stepping, state):  # pragma: no cover - compiled
    """state (N, 3L) = [jobs_l | Σ x_l q_l | last x_l q_l]; rows with ``stepping`` False unchanged."""
    N, L = arrivals.shape
    for i in range(N):
        if not stepping[i]:
            continue
        for l in range(L):
            r = port_reward[i, l]
            if arrivals[i, l]:
                state[i, l] += 1.0
                state[i, L + l] += r
            state[i, 2 * L + l] = r


@numba.njit(cache=True, nogil=True)
def _observe(t, state, out):  # pragma: no cover - compiled
    """out (N, 3L) float32 = [jobs_l / t | mean x_l q_l | last x_l q_l]."""
    N, W = state.shape
    L = W // 3
    for i in range(N):
        tt = float(max(t[i], 1))
        for l in range(L):
            n = state[i, l]
            out[i, l] = n / tt
            out[i, L + l] = state[i, L + l] / n if n > 0 else 0.0  # the float64 ratio, then float32
            out[i, 2 * L + l] = state[i, 2 * L + l]


class AllocationStats:
    """Running statistics of N envs (arrays with a leading N axis; the single env uses N = 1)."""

    def __init__(self, num_envs: int, num_entries: int, num_ports: int, num_device_types: int):
        N, P, L, K = num_envs, num_entries, num_ports, num_device_types
        self.L = L
        self.state = np.zeros((N, 3 * L))  # (N, 3L) slots with a job, Σ x_l q_l, the last x_l q_l per port
        self.last_allocation = np.zeros((N, P, K), dtype=np.float32)  # (N, P, K) the last executed y (device units)
        self._handed_out = False  # last_allocation is in an observation: replace it before writing

    def reset(self, i) -> None:
        """Zero the statistics of sub-env(s) ``i`` (an index, slice or mask): a new episode. The last
        allocation array may have been handed out in an observation: it is replaced, never written."""
        self.state[i] = 0.0
        if self._handed_out:
            self.last_allocation = self.last_allocation.copy()
            self._handed_out = False
        self.last_allocation[i] = 0.0

    def update(self, port_reward: np.ndarray, arrivals: np.ndarray, allocation: np.ndarray,
               stepping: np.ndarray) -> None:
        """After a slot: ``port_reward`` (N, L) x_l q_l, ``arrivals`` (N, L) bool, ``allocation`` (N, P, K)
        the executed y (feedback); rows with ``stepping`` False unchanged."""
        _update(port_reward, arrivals, stepping, self.state)
        last = allocation.astype(np.float32)  # a new array: the previous observation keeps its own
        if not stepping.all():
            last[~stepping] = self.last_allocation[~stepping]
        self.last_allocation = last
        self._handed_out = False

    def observe(self, t: np.ndarray, squeeze: bool = False) -> dict:
        """The statistics and feedback entries (N, ...) after t (N,) slots; ``squeeze``: sub-env 0's without
        the N axis (the single env). ``last_allocation`` is the array the last update made (one per step)."""
        L = self.L
        out = np.empty((self.state.shape[0], 3 * L), dtype=np.float32)
        _observe(t, self.state, out)
        last = self.last_allocation
        self._handed_out = True
        if squeeze:
            out, last = out[0], last[0]
        return {"arrival_share": out[..., :L], "port_reward_mean": out[..., L:2 * L],
                "last_port_reward": out[..., 2 * L:], "last_allocation": last}
