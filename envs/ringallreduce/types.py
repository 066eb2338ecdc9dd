"""The typed keys of the RingAllReduce env: its observation and ``info["feedback"]``.

Shapes: J = J_max visible jobs, S servers, R racks (``max_racks`` when padded). The native vector env
returns the same keys with a leading (N,) batch axis.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

__all__ = ["RingObservation", "RingFeedback"]


class _RingObservationKeys(TypedDict):
    jobs: np.ndarray  # (J, 10) float32: per visible job, JOB_FEATURES (0 if absent)
    job_mask: np.ndarray  # (J,) int8: 1 where a visible job sits
    servers: np.ndarray  # (S, 3) float32: C_s, rack, GPUs used last slot
    links: np.ndarray  # (S + R, 4) float32: capacity up/down, load up/down last slot (Gbps)
    t: np.ndarray  # (1,) float32: slots elapsed


class RingObservation(_RingObservationKeys, total=False):
    """The observation of ``clustergym/RingAllReduce-v0`` (the env docstring's table)."""

    link_present: np.ndarray  # (S + R_max,) int8, padded env only (max_racks): 1 for the instance's links


class RingFeedback(TypedDict):
    """``info["feedback"]`` after a step: what a real scheduler observes of the slot."""

    allocation: np.ndarray  # (J, S) int64: the executed allocation y (workers per job and server)
    workers: np.ndarray  # (J,) int64: workers per job
    job_ids: np.ndarray  # (J,) int64: the job in each window slot (-1 where none)
    gain: np.ndarray  # (J,) float64: each job's utility increment this slot
    rings: np.ndarray  # (J, S) int64: the servers of each job's ring in ring order (topology.ring_order), -1 padded
