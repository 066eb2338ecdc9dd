"""P4's learner observation parts: statistics from public feedback and public problem data, per machine.

The single env, the native vector env and, through the single env, the PettingZoo env put the same
entries in their observation, computed here once (arrays with a leading N axis: the vector env's N
sub-envs, the single env's one):

* ``machine_rate`` (M,): the mean work r_j^i(t) machine i delivered per slot it ran (the estimate of
  its hidden service rate θ_i, §III; 0 while unused);
* ``machine_share`` (M,): the share of slots machine i ran a task;
* ``last_executed`` (M,) and ``last_work`` (M,): the last slot's feedback (the machines that ran and
  the work they delivered; 0 before the first step).

The machines' prices p_i are public but not in the observation: constant over an episode and different
in every instance, they are an instance fingerprint a learner fits instead of the state (measured: a
policy cloned from ``fair`` on instances 100–199 was 10% below its teacher on held-out instances with
them, 1% without); they are in ``problem.price`` (and each PettingZoo machine's ``price``).

Only ``info["feedback"]`` enters; never the hidden rates or the metrics.
t is the number of slots played in the episode (1 at t = 0).
"""

from __future__ import annotations

import numba
import numpy as np
from gymnasium import spaces

__all__ = ["STATS_KEYS", "MachineStats", "learner_spaces", "record_slot"]

# The statistics in the order earlier versions appended them to the flat observation (FlattenWithStats).
STATS_KEYS = ("machine_rate", "machine_share")


def learner_spaces(M: int) -> dict:
    """The observation spaces of the statistics and the last slot's feedback."""
    unit = spaces.Box(0.0, 1.0, shape=(M,), dtype=np.float32)
    return {"machine_rate": unit, "machine_share": unit, "last_executed": spaces.MultiBinary(M), "last_work": unit}


class MachineStats:
    """Running per-machine statistics of N envs (the single env uses N = 1). The envs' compiled slot step
    (``dynamics.slot_step`` / ``slot_step_batch``) updates each env's rows in place with :func:`record_slot`."""

    def __init__(self, num_envs: int, num_machines: int):
        N, M = num_envs, num_machines
        self.M = M
        self.count = np.zeros((N, M))  # (N, M) slots machine i ran
        self.total = np.zeros((N, M))  # (N, M) Σ work r_j^i(t) over those slots
        self.last_executed = np.zeros((N, M), dtype=np.int8)  # (N, M) the last slot's executed machines
        self.last_work = np.zeros((N, M))  # (N, M) their work (0 elsewhere)

    def reset(self, i) -> None:
        """Zero the statistics of env(s) ``i`` (an index, slice or mask): a new episode."""
        for a in (self.count, self.total, self.last_executed, self.last_work):
            a[i] = 0

    def observe(self, t: np.ndarray) -> dict:
        """The statistics and feedback entries (N, M) after t (N,) slots (fresh arrays)."""
        M = self.M
        out = np.empty((self.count.shape[0], 3 * M), dtype=np.float32)
        # a machine never used has total 0: 0 / max(n, 1) = 0; else the float64 ratio, then float32
        np.divide(self.total, np.maximum(self.count, 1.0), out=out[:, :M])
        np.divide(self.count, np.maximum(t, 1)[:, None], out=out[:, M:2 * M])
        out[:, 2 * M:] = self.last_work
        return {"machine_rate": out[:, :M], "machine_share": out[:, M:2 * M], "last_executed": self.last_executed.copy(),
                "last_work": out[:, 2 * M:]}


@numba.njit(cache=True, nogil=True)
def record_slot(count, total, last_executed, last_work, slot, work):  # pragma: no cover - compiled
    """One env's statistics after a slot, in place: ``count``, ``total``, ``last_work`` (M,) float64,
    ``last_executed`` (M,) int8; from the slot's feedback: ``slot`` (M,) the window slot machine i ran
    (0 = idle) and ``work`` (M,) its work r_j^i(t) (0 where idle)."""
    for i in range(count.shape[0]):
        if slot[i] > 0:
            count[i] += 1.0
            total[i] += work[i]
            last_executed[i] = 1
        else:
            last_executed[i] = 0
        last_work[i] = work[i]
