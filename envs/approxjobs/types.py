"""The typed keys of the ApproxJobs env: its observation and ``info["feedback"]``.

Shapes: J = J_max window slots, M machines. The native vector env returns the same keys with a leading
(N,) batch axis.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

__all__ = ["ApproxObservation", "ApproxFeedback"]


class ApproxObservation(TypedDict):
    """The observation of ``clustergym/ApproxJobs-v0`` (the env docstring's table)."""

    jobs: np.ndarray  # (J, 8) float64: job_id, a_j, d_j, B_j, spent, v_j, β_j, X_j (0 if empty)
    job_mask: np.ndarray  # (J,) int8: window slot occupied
    t: np.ndarray  # (1,) float32: slots elapsed (the next slot is t+1)
    machine_rate: np.ndarray  # (M,) float32: mean work per slot machine i ran (estimates θ_i)
    machine_share: np.ndarray  # (M,) float32: share of the slots machine i ran a task
    last_executed: np.ndarray  # (M,) int8: the machines that ran last slot
    last_work: np.ndarray  # (M,) float32: their work r_j^i(t) (0 elsewhere)


class ApproxFeedback(TypedDict):
    """``info["feedback"]`` after a step: what a real scheduler observes of the slot."""

    executed: np.ndarray  # (M,) bool: the machines that ran a task
    slot: np.ndarray  # (M,) int64: the window slot k it served, 1-based (0 = idle)
    job_id: np.ndarray  # (M,) int64: the job it served (-1 = idle)
    work: np.ndarray  # (M,) float64: its work r_j^i(t) (0 when idle)
    cost: np.ndarray  # (M,) float64: p_i if it ran, else 0
