"""DRL hooks of P4, read through the family's ``FamilySpec.drl_hooks`` by the observation pipeline
(``clustergym.learning.pipeline``) and by ``clustergym train``.

Only public quantities: ``info["feedback"]``; never metrics.

The constants are the family's data for the parameter pools, ``clustergym tune``, the hyperparameter files,
``clustergym bench`` and the docs gallery (each one's meaning: ``FamilySpec.drl_hooks``).
"""

from __future__ import annotations

import os

import numpy as np

from clustergym.envs.approxjobs.learner_stats import STATS_KEYS

__all__ = ["BENCH_PLAIN", "BENCH_THROUGHPUT", "GALLERY", "HYPERPARAMS_DIR", "PARAM_RANGES", "STATS_KEYS",
           "TUNING_REFERENCE", "Stats", "legacy_keys", "sb3_mask"]

# The generator parameters a parameter pool draws (clustergym.learning.pools): (low, high), drawn uniformly, each
# holding the default (in brackets): jobs per slot [0.015]; the approximation exponent beta [0.5]; the slowest
# machine's speed factor [0.3]
PARAM_RANGES: dict[str, tuple[float, float]] = {"arrival_rate": (0.0075, 0.03), "beta": (0.5, 0.7),
                                               "speed_low": (0.2, 0.5)}

# The reference agent of `clustergym tune`'s objective (clustergym.learning.tuning): the best simple rule of the
# family at the training horizon (docs/drl.md), the objective's "1"
TUNING_REFERENCE = "fair"

# `clustergym bench` (clustergym.bench.throughput): the "PPO training, env-steps/s" rows of the family's first env
# id, (extra env kwargs beside its ppo.yml entry's, vec mode) each
BENCH_THROUGHPUT: tuple[tuple[dict, str], ...] = (({}, "auto"),)
BENCH_PLAIN = True  # a "plain SB3 PPO" row: PPO(policy, gym.make(id)) on the default spaces

# The docs gallery (clustergym.experiments.gallery): (the baselines beside the paper policy, the comparison's
# horizon, the viewer frame's slot)
GALLERY: tuple[tuple[str, ...], int, int] = (("fair", "edf", "ops", "random"), 600, 200)

# The family's hyperparameter files (clustergym.learning.hyperparams): <algo>.yml with the entries of its env ids,
# each read over the algorithm file's `default` entry; defaults.yml (the algorithm `clustergym train` uses);
# tuning/ (the records of the tuning studies)
HYPERPARAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hyperparams")


class Stats:
    """The statistics the env's observation carries (``machine_rate``, ``machine_share``; ``approxjobs/learner_stats.py``),
    computed outside the env from feedback, for :class:`clustergym.learning.pipeline.EmpiricalStats`.

    Per machine: the mean work per used slot (the hidden service rate θ_i, §III) and the share of slots
    it was used."""

    def __init__(self, problem, pad: dict | None = None):  # pad: the env's padding kwargs (sizes do not depend on them)
        self.problem = problem
        self.size = 2 * problem.num_machines

    def reset(self) -> None:
        pb = self.problem
        self.n = np.zeros(pb.num_machines)  # (M,) slots each machine was used
        self.sum = np.zeros(pb.num_machines)  # (M,) work done r_j^i(t)

    def update(self, obs: dict, fb: dict) -> None:
        if "executed" in fb:  # per-machine feedback (M,)
            m = np.asarray(fb["executed"], dtype=bool)
            self.n[m] += 1.0
            self.sum[m] += np.asarray(fb["work"], dtype=np.float64)[m]

    def parts(self, t: int) -> tuple[np.ndarray, ...]:
        mean = np.divide(self.sum, self.n, out=np.zeros_like(self.sum), where=self.n > 0)
        return (mean, self.n / t)


def legacy_keys(space) -> tuple[str, ...]:
    """The keys of the observation of earlier versions (before the statistics, feedback and prices joined it).
    A model trained then saw [flatten(these keys), the statistics ``STATS_KEYS``] (``clustergym.learning.pipeline``)."""
    return ("jobs", "job_mask", "t")


def sb3_mask(m: np.ndarray) -> np.ndarray:
    """P4's ``info["action_mask"]`` is already MaskablePPO's flat mask: per machine [idle, slot 1..J]; in the
    ``"job"`` action mode per window slot [level 0..S]."""
    return m
