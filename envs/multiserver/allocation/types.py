"""The typed keys of the MultiServerAllocation env: its observation and ``info["feedback"]``.

Shapes: L ports, K device types, P observed channels (|E|, or ``max_edges`` when padded). The native
vector env returns the same keys with a leading (N,) batch axis.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

__all__ = ["AllocationObservation", "AllocationFeedback"]


class _AllocationObservationKeys(TypedDict):
    arrivals: np.ndarray  # (L,) int8: x_l(t), port l has a job this slot
    t: np.ndarray  # (1,) float32: slots elapsed
    edge_arrival: np.ndarray  # (P,) int8: the port's job flag per channel
    edge_demand: np.ndarray  # (P, K) float32: a_l^k / c_r^k of channel (l, r) (0 on padding)
    edge_alpha: np.ndarray  # (P, K) float32: α_r^k of the channel's server (eq. 27)
    edge_utility: np.ndarray  # (P·K,) int64, row-major (entry p·K + k): utility family (eq. 27): 0 linear, 1 log, 2 reciprocal, 3 poly
    beta: np.ndarray  # (K,) float32: β_k, the overhead weights of eq. 5
    arrival_share: np.ndarray  # (L,) float32: share of the slots port l had a job (estimates ρ_l)
    port_reward_mean: np.ndarray  # (L,) float32: mean realised x_l q_l over the slots port l had a job
    last_port_reward: np.ndarray  # (L,) float32: last slot's x_l q_l
    last_allocation: np.ndarray  # (P, K) float32: last slot's executed y, device units


class AllocationObservation(_AllocationObservationKeys, total=False):
    """The observation of ``clustergym/MultiServerAllocation-v0`` (the env docstring's table)."""

    edge_present: np.ndarray  # (P,) int8, padded env only (max_edges): 1 for the instance's channels e < |E|


class AllocationFeedback(TypedDict):
    """``info["feedback"]`` after a step: what a real scheduler observes of the slot."""

    allocation: np.ndarray  # (P, K) float64: the executed allocation y, device units (0 on padding)
    port_reward: np.ndarray  # (L,) float64: x_l q_l, each port's realised reward (eq. 5)
