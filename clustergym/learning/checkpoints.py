"""Checkpoints of a training run: the model saved at given step counts, each folder an ``sb3:`` run folder."""

from __future__ import annotations

import json
import os
import time

from clustergym.learning.algos import SIDE_CAR
from clustergym.learning.hp_checks import check_finite_weights
from clustergym.learning.train_envs import save_normalization

__all__ = ["Checkpoints"]


class Checkpoints:
    """Saves the model (and its normalisation statistics) once training has passed each asked step count.

    The save happens at the start of a rollout, i.e. after the update that used the steps so far (a save in
    the middle of a rollout would hold the weights from before that rollout's update); the side-car records
    the steps actually trained (``timesteps_trained``, at or a rollout beyond the asked count).
    """

    def __init__(self, steps: list[int], out: str, normalize: bool, t0: float, final: int):
        self.steps, self.out, self.normalize, self.t0 = steps, out, normalize, t0
        self.final = final  # counts >= the training budget are the final model (saved by finish)
        self.saved: dict[int, tuple[float, int]] = {}  # asked steps -> (training wall time (s), steps trained)
        self.pause = 0.0  # time spent saving, not counted as training time

    def dir(self, n: int) -> str:
        return os.path.join(self.out, "checkpoints", str(n))

    def save_now(self, model, n: int, wall: float | None = None) -> None:
        if n not in self.steps or n in self.saved:
            return
        check_finite_weights(model, f"the checkpoint at {n:,} steps was not saved")
        t = time.perf_counter()
        self.saved[n] = (t - self.t0 - self.pause if wall is None else wall, int(model.num_timesteps))
        d = self.dir(n)
        os.makedirs(d, exist_ok=True)
        model.save(os.path.join(d, "model.zip"))
        if self.normalize:
            save_normalization(model.get_env(), d)
        self.pause += time.perf_counter() - t

    def callback(self):
        from stable_baselines3.common.callbacks import BaseCallback

        saver = self

        class _Save(BaseCallback):
            def _on_rollout_start(self) -> None:
                for n in saver.steps:
                    if n <= self.num_timesteps and n < saver.final:
                        saver.save_now(self.model, n)

            def _on_step(self) -> bool:
                return True

        return _Save()

    def finish(self, model, meta: dict, wall: float) -> None:
        """Counts at or beyond the budget are the final model; then every checkpoint gets its side-car."""
        for n in self.steps:
            if n >= self.final:
                self.save_now(model, n, wall=wall - self.pause)
        for n, (w, done) in self.saved.items():
            with open(os.path.join(self.dir(n), SIDE_CAR), "w") as f:
                json.dump({**meta, "timesteps_trained": done, "train_wall_s": w,
                           "checkpoint_of": os.path.abspath(self.out)}, f, indent=1)
