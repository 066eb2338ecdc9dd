"""The typed keys of the MultiServerChannel env: its observation and ``info["feedback"]``.

Shapes: L ports, K device types, P observed channels (|E|, or ``max_edges`` when padded). The native
vector env returns the same keys with a leading (N,) batch axis.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

__all__ = ["ChannelObservation", "ChannelFeedback"]


class _ChannelObservationKeys(TypedDict):
    arrivals: np.ndarray  # (L,) int8: 1_l(t), port l has a job this slot
    t: np.ndarray  # (1,) float32: slots elapsed
    edge_arrival: np.ndarray  # (P,) int8: the port's job flag per channel (= the action mask)
    edge_demand: np.ndarray  # (P, K) float32: a_k^e / c_k (0 on padding)
    utility_mean: np.ndarray  # (P,) float32: v̂_e, mean realised Z̃_e over the slots channel e ran (eqs. 8-9)
    channel_share: np.ndarray  # (P,) float32: n_e / t
    arrival_share: np.ndarray  # (L,) float32: share of the slots port l had a job (estimates ρ_l)
    last_executed: np.ndarray  # (P,) int8: the channels that ran last slot
    last_utility: np.ndarray  # (P,) float32: their realised Z̃_e (0 elsewhere)


class ChannelObservation(_ChannelObservationKeys, total=False):
    """The observation of ``clustergym/MultiServerChannel-v0`` (the env docstring's table)."""

    edge_present: np.ndarray  # (P,) int8, padded env only (max_edges): 1 for the instance's channels e < |E|


class ChannelFeedback(TypedDict):
    """``info["feedback"]`` after a step: what a real scheduler observes of the slot."""

    executed: np.ndarray  # (P,) bool: the channels that ran
    utilities: np.ndarray  # (P,) float64: their realised utilities Z̃_e (0 elsewhere)
