"""Bring your own scheduler: a 42-line agent for P1 that clustergym runs beside the paper agents.

    clustergym run clustergym/MultiServerChannel-v0 --agents examples/my_agent.py:MyAgent,esdp,hauf \\
        --seeds 0-2 --workers 2 --out runs/mine

``MyAgent`` is epsilon-greedy on the empirical mean of each channel's realised utility (learned from
``info["feedback"]``), filling the capacity of eq. 2 greedily. Options work like the built-ins':
``examples/my_agent.py:MyAgent[epsilon=0.05]``.
"""

import numpy as np

from clustergym.core.agent import BaseAgent


class MyAgent(BaseAgent):
    families = ("multiserver-channel",)  # P1

    def __init__(self, epsilon: float = 0.1):
        self.epsilon = float(epsilon)

    def reset(self, problem, *, seed=None):
        super().reset(problem, seed=seed)  # self.problem (public), self.rng (seeded)
        self.sum = np.zeros(problem.num_edges)
        self.n = np.zeros(problem.num_edges)

    def act(self, obs, info):
        mask = np.asarray(info["action_mask"], dtype=bool)  # channels of ports with a job (eq. 4)
        score = np.where(self.n > 0, self.sum / np.maximum(self.n, 1), np.inf)  # untried first
        if self.rng.random() < self.epsilon:
            score = self.rng.random(score.size)
        x, used = np.zeros(mask.size, dtype=np.int8), np.zeros(self.problem.capacity.size)
        for e in np.argsort(-score):  # greedy fill under the capacities (eq. 2)
            if mask[e] and np.all(used + self.problem.demand[e] <= self.problem.capacity):
                x[e], used = 1, used + self.problem.demand[e]
        return x

    def update(self, obs, action, reward, next_obs, info):
        fb = info["feedback"]  # semi-bandit feedback: realised utility of each executed channel
        x = fb["executed"]  # (|E|,) bool; utilities are 0 where not executed
        self.sum[x] += fb["utilities"][x]
        self.n[x] += 1
