"""The expected length of a training run, from its own measured step rate.

SB3 collects a rollout, then updates the policy; the rate that counts is the one of whole iterations (steps and
updates). :func:`estimate_callback` takes the time of the first iteration after the warm-up steps an off-policy
algorithm takes before its first update (``learning_starts``), and reports the time the whole run should take,
before the remaining iterations start."""

from __future__ import annotations

import time
from typing import Callable

from clustergym.core.eta import describe_duration

__all__ = ["estimate_callback", "training_estimate"]


def training_estimate(timesteps: int, done: int, elapsed_s: float, measured_steps: int, measured_s: float) -> str:
    """The line printed: ``done`` of ``timesteps`` steps took ``elapsed_s``; the rate is ``measured_steps`` in
    ``measured_s`` (whole iterations, updates included)."""
    rate = measured_steps / measured_s if measured_s > 0 else float("inf")
    total = elapsed_s + max(int(timesteps) - int(done), 0) / rate
    return (f"expected training time: about {describe_duration(total)} for {int(timesteps):,} steps (measured: "
            f"{rate:,.0f} steps/s over the first {measured_steps:,} steps, updates included)")


def estimate_callback(timesteps: int, report: Callable[[str], None], learning_starts: int = 0):
    """An SB3 callback calling ``report`` once with :func:`training_estimate`'s line, at the start of the first
    rollout after one whole iteration past ``learning_starts`` (not at all when the run ends first)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Estimate(BaseCallback):
        def _on_training_start(self) -> None:
            self.t0 = time.perf_counter()
            self.mark: tuple[int, float] | None = None
            self.done = False

        def _on_rollout_start(self) -> None:
            if self.done:
                return
            now = time.perf_counter()
            if self.mark is None:
                if self.num_timesteps >= learning_starts:
                    self.mark = (self.num_timesteps, now)
                return
            steps, t = self.num_timesteps - self.mark[0], now - self.mark[1]
            if steps > 0 and self.num_timesteps < timesteps:
                report(training_estimate(timesteps, self.num_timesteps, now - self.t0, steps, t))
                self.done = True

        def _on_step(self) -> bool:
            return True

    return Estimate()
