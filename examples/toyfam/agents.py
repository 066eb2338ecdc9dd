"""The toy family's agents: random (the normalised score's 0) and greedy (its reference: the tuning objective's 1)."""

import numpy as np

from clustergym.core.agent import BaseAgent


class RandomToy(BaseAgent):
    name = "random"
    families = ("toy-two-machine",)

    def act(self, obs, info):
        return int(self.rng.integers(2))


class GreedyToy(BaseAgent):
    """Tries each machine once, then runs the one with the higher mean work so far (from ``info["feedback"]``)."""

    name = "greedy"
    families = ("toy-two-machine",)

    def reset(self, problem, *, seed=None):
        super().reset(problem, seed=seed)
        self.n, self.sum = np.zeros(2), np.zeros(2)

    def act(self, obs, info):
        if (self.n == 0).any():
            return int(np.flatnonzero(self.n == 0)[0])
        return int(np.argmax(self.sum / self.n))

    def update(self, obs, action, reward, next_obs, info):
        fb = info["feedback"]
        self.n[fb["machine"]] += 1
        self.sum[fb["machine"]] += fb["work"]
