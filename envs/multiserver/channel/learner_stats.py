"""P1's learner statistics: what a scheduler can estimate from public feedback, for N envs on arrays.

The single env (N = 1), the native vector env (N sub-envs) and, through the single env, the
PettingZoo env put the same statistics in their observation, computed here once:

* ``utility_mean`` (P,): v̂_e, the mean realised net utility Z̃_e of channel e over the slots it ran
  (0 while untried; eqs. 8–9's estimate of the hidden ṽ_e);
* ``channel_share`` (P,): n_e / t, the share of slots channel e ran (n_e of eq. 8);
* ``arrival_share`` (L,): the share of slots port l had a job (the estimate of the hidden ρ_l);
* ``last_executed`` (P,) and ``last_utility`` (P,): the last slot's feedback (the channels that ran and
  their realised Z̃_e; 0 before the first step).

Only ``info["feedback"]`` and the arrivals already observed enter; never the hidden truth or the
metrics. t is the number of slots played in the episode (1 at t = 0, so every share is 0 then).
P = |E|, or ``max_edges`` on a padded env (0 on padding: padding channels never run).
"""

from __future__ import annotations

import numba
import numpy as np
from gymnasium import spaces

__all__ = ["STATS_KEYS", "FEEDBACK_KEYS", "ChannelStats", "stats_spaces"]

# The statistics in the order earlier versions appended them to the flat observation (FlattenWithStats).
STATS_KEYS = ("utility_mean", "channel_share", "arrival_share")
FEEDBACK_KEYS = ("last_executed", "last_utility")


def stats_spaces(P: int, L: int) -> dict:
    """The observation spaces of the statistics and the last slot's feedback."""
    unit = lambda n: spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32)  # noqa: E731
    return {"utility_mean": unit(P), "channel_share": unit(P), "arrival_share": unit(L),
            "last_executed": spaces.MultiBinary(P), "last_utility": unit(P)}


@numba.njit(cache=True, nogil=True)
def _update(executed, utilities, arrivals, stepping, state):  # pragma: no cover - compiled
    """state (N, 4P + L) = [n_e | Σ Z̃_e | last executed | last Z̃_e | jobs_l]; rows with ``stepping`` False unchanged."""
    N, P = executed.shape
    L = arrivals.shape[1]
    for i in range(N):
        if not stepping[i]:
            continue
        for e in range(P):
            x = executed[i, e]
            if x:
                state[i, e] += 1.0
                state[i, P + e] += utilities[i, e]
            state[i, 2 * P + e] = 1.0 if x else 0.0
            state[i, 3 * P + e] = utilities[i, e]
        for l in range(L):
            if arrivals[i, l]:
                state[i, 4 * P + l] += 1.0


@numba.njit(cache=True, nogil=True)
def _observe(t, state, out, executed):  # pragma: no cover - compiled
    """out (N, 3P + L) float32 = [v̂_e | n_e / t | last Z̃_e | jobs_l / t]; executed (N, P) int8 = last executed."""
    N, W = state.shape
    P = executed.shape[1]
    L = W - 4 * P
    for i in range(N):
        tt = float(max(t[i], 1))
        for e in range(P):
            n = state[i, e]
            out[i, e] = state[i, P + e] / n if n > 0 else 0.0  # the float64 ratio, then float32
            out[i, P + e] = n / tt
            out[i, 2 * P + e] = state[i, 3 * P + e]
            executed[i, e] = 1 if state[i, 2 * P + e] > 0 else 0
        for l in range(L):
            out[i, 3 * P + l] = state[i, 4 * P + l] / tt


@numba.njit(cache=True, nogil=True)
def _update_observe(executed, utilities, arrivals, stepping, t, state, out, out_executed):  # pragma: no cover
    """:func:`_update` then :func:`_observe` in one call (the single env's step)."""
    _update(executed, utilities, arrivals, stepping, state)
    _observe(t, state, out, out_executed)


class ChannelStats:
    """Running statistics of N envs (arrays with a leading N axis; the single env uses N = 1)."""

    def __init__(self, num_envs: int, num_entries: int, num_ports: int):
        self.P, self.L = num_entries, num_ports
        # (N, 4P + L) float64: n_e, Σ realised Z̃_e, the last slot's executed flags and Z̃_e, slots with a job per port
        self.state = np.zeros((num_envs, 4 * num_entries + num_ports))

    def reset(self, i) -> None:
        """Zero the statistics of sub-env(s) ``i`` (an index, slice or mask): a new episode."""
        self.state[i] = 0.0

    def update(self, executed: np.ndarray, utilities: np.ndarray, arrivals: np.ndarray,
               stepping: np.ndarray) -> None:
        """After a slot: ``executed`` (N, P) bool and ``utilities`` (N, P) the feedback (0 where not run),
        ``arrivals`` (N, L) bool the jobs of the slot just played; rows with ``stepping`` False unchanged."""
        _update(executed, utilities, arrivals, stepping, self.state)

    def observe(self, t: np.ndarray, squeeze: bool = False, update: tuple | None = None) -> dict:
        """The observation entries (N, ...) after t (N,) slots of each sub-env's episode (fresh arrays);
        ``squeeze``: those of sub-env 0 without the N axis (the single env); ``update``: the arguments of
        :meth:`update`, applied first (one compiled call instead of two)."""
        N, P, L = self.state.shape[0], self.P, self.L
        out = np.empty((N, 3 * P + L), dtype=np.float32)
        executed = np.empty((N, P), dtype=np.int8)
        if update is None:
            _observe(t, self.state, out, executed)
        else:
            _update_observe(*update, t, self.state, out, executed)
        if squeeze:
            o = out[0]
            return {"utility_mean": o[:P], "channel_share": o[P:2 * P], "arrival_share": o[3 * P:],
                    "last_executed": executed[0], "last_utility": o[2 * P:3 * P]}
        return {"utility_mean": out[:, :P], "channel_share": out[:, P:2 * P], "arrival_share": out[:, 3 * P:],
                "last_executed": executed, "last_utility": out[:, 2 * P:3 * P]}
