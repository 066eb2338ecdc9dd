"""Hidden machine service-rate processes θ_i^t for ApproxJobs (opm.md §III, §VI).

Two models, both with per-machine speed factors s_i (our addition so machines differ in mean;
see ``scenario``):

* ``"gamma"`` (default, §VI): every machine alternates independently between available periods
  (AP) and unavailable periods (UP) whose lengths (in slots) are Gamma distributed — AP shape
  k=0.34, scale 94.35; UP shape k=0.19, scale 39.92 (Kondo et al. [10]). In a slot that starts in
  an AP the machine delivers θ_i^t = s_i·U[0.7, 1]; in an UP, θ_i^t = s_i·U[0, 0.1]. Periods are
  continuous: a period may end inside a slot (the Gamma shapes < 1 give many very short periods);
  the state of a slot is the state at its start. The first period of every machine is AP with the
  stationary probability π_A = E[AP]/(E[AP]+E[UP]) and has a fresh (not residual) Gamma length.
  Rates are highly correlated in time, as the paper notes (Remark 1 / §VI).
* ``"iid"`` (Assumption 1): θ_i^t i.i.d. over slots with the same marginal law (AP band with
  probability π_A, else UP band).

Mean rate of machine i (both models): θ_i = s_i (π_A·0.85 + (1−π_A)·0.05).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ServiceModel", "ServiceProcess", "mean_rate"]


@dataclass(frozen=True)
class ServiceModel:
    """Parameters of the service-rate law (hidden truth)."""

    kind: str = "gamma"  # "gamma" (alternating AP/UP) or "iid"
    ap_shape: float = 0.34  # §VI, AP length ~ Gamma(k, θ)
    ap_scale: float = 94.35
    up_shape: float = 0.19  # §VI, UP length ~ Gamma(k, θ)
    up_scale: float = 39.92
    ap_low: float = 0.7  # §VI: rate ~ U[0.7, 1] in an AP
    ap_high: float = 1.0
    up_low: float = 0.0  # §VI: rate ~ U[0, 0.1] in an UP
    up_high: float = 0.1

    @property
    def p_available(self) -> float:
        """π_A: long-run fraction of time in an available period."""
        ea, eu = self.ap_shape * self.ap_scale, self.up_shape * self.up_scale
        return ea / (ea + eu)

    @property
    def unit_mean(self) -> float:
        """Mean rate of a machine with speed factor 1."""
        pa = self.p_available
        return pa * 0.5 * (self.ap_low + self.ap_high) + (1 - pa) * 0.5 * (self.up_low + self.up_high)


def mean_rate(model: ServiceModel, speed: np.ndarray) -> np.ndarray:
    """θ_i = E[θ_i^t] for every machine, (M,)."""
    return model.unit_mean * np.asarray(speed, dtype=float)


class ServiceProcess:
    """Draws θ_i^t for all machines, a block of slots at a time.

    The realisation depends on the seed and on the block sizes requested (the env always asks for
    blocks of 256 slots, so a seed fixes it). Only the env owns one; it uses its own child generator, so agents cannot shift the stream.
    """

    def __init__(self, model: ServiceModel, speed: np.ndarray, rng: np.random.Generator):
        self.model = model
        self.speed = np.asarray(speed, dtype=float)  # (M,)
        self.rng = rng
        M = self.speed.size
        self.clock = 0.0  # start time of the next slot to draw
        if model.kind == "gamma":
            self.available = rng.random(M) < model.p_available  # (M,) state of the current period
            self.switch = np.where(self.available, rng.gamma(model.ap_shape, model.ap_scale, M),
                                   rng.gamma(model.up_shape, model.up_scale, M))  # (M,) time the period ends

    def states(self, n: int) -> np.ndarray:
        """(n, M) bool: machine in an available period at the start of each of the next n slots.

        Event driven: every period end inside the block toggles the state of the slots that start
        at or after it (a slot's state is the state at its start time).
        """
        m, rng = self.model, self.rng
        M = self.speed.size
        t0 = self.clock
        self.clock = t0 + n
        if m.kind == "iid":
            return rng.random((n, M)) < m.p_available
        toggles = np.zeros((n + 1) * M, dtype=np.int64)  # (n+1, M) flattened: toggles effective from slot k
        avail, switch = self.available, self.switch
        end = t0 + n - 1  # start time of the block's last slot
        due = np.flatnonzero(switch <= end)
        while due.size:
            k = np.maximum(np.ceil(switch[due] - t0), 0).astype(np.int64)  # first slot starting at/after the switch
            np.add.at(toggles, k * M + due, 1)
            avail[due] = ~avail[due]
            switch[due] += np.where(avail[due], rng.gamma(m.ap_shape, m.ap_scale, due.size),
                                    rng.gamma(m.up_shape, m.up_scale, due.size))
            due = due[switch[due] <= end]
        flips = np.cumsum(toggles.reshape(n + 1, M)[:n], axis=0) & 1  # (n, M) toggles so far, mod 2
        start = avail ^ (np.sum(toggles.reshape(n + 1, M)[:n], axis=0) & 1).astype(bool)  # state at t0
        self.available, self.switch = avail, switch
        return start[None, :] ^ flips.astype(bool)

    def block(self, n: int) -> np.ndarray:
        """(n, M) realised rates θ_i^t in [0, 1] for the next n slots."""
        m = self.model
        avail = self.states(n)
        u = self.rng.random(avail.shape)
        lo = np.where(avail, m.ap_low, m.up_low)
        hi = np.where(avail, m.ap_high, m.up_high)
        return self.speed[None, :] * (lo + (hi - lo) * u)
