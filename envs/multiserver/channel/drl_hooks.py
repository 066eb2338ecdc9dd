"""DRL hooks of P1, read through the family's ``FamilySpec.drl_hooks`` by the observation pipeline
(``clustergym.learning.pipeline``) and by ``clustergym train``.

Only public quantities: the observation and ``info["feedback"]``; never metrics.

The constants are the family's data for the parameter pools, ``clustergym tune``, the hyperparameter files,
``clustergym bench`` and the docs gallery (each one's meaning: ``FamilySpec.drl_hooks``).
"""

from __future__ import annotations

import os

import numpy as np

from clustergym.envs.multiserver.channel.learner_stats import STATS_KEYS
from clustergym.envs.multiserver.channel.oracle import knapsack_max

__all__ = ["BENCH_MEMORY", "BENCH_THROUGHPUT", "GALLERY", "HYPERPARAMS_DIR", "PARAM_RANGES", "STATS_KEYS",
           "TUNING_REFERENCE", "Stats", "legacy_keys", "oracle_action", "privileged_features",
           "sb3_mask"]

# The generator parameters a parameter pool draws (clustergym.learning.pools): (low, high), drawn uniformly, each
# holding the default (in brackets): arrival probability per port [0.9]; the mean and spread of the per-unit cost
# f_k, which sets how strongly a channel's demand lowers its value [0.5, 0.1]; the capacity share [0.25]
PARAM_RANGES: dict[str, tuple[float, float]] = {"rho": (0.6, 1.0), "cost_mean": (0.25, 0.75), "cost_std": (0.05, 0.2),
                                               "capacity_ratio": (0.2, 0.3)}

# The reference agent of `clustergym tune`'s objective (clustergym.learning.tuning): the best simple rule of the
# family at the training horizon (docs/drl.md), the objective's "1"
TUNING_REFERENCE = "lcf"

# `clustergym bench` (clustergym.bench.throughput): the "PPO training, env-steps/s" rows of the family's first env
# id, (extra env kwargs beside its ppo.yml entry's, vec mode) each: the path `clustergym train` picks (auto) and
# the DummyVecEnv beside it
BENCH_THROUGHPUT: tuple[tuple[dict, str], ...] = (({}, "auto"), ({}, "dummy"))
BENCH_MEMORY = True  # a memory row: 10^6 slots (10^5 quick), RSS and step rate flat

# The docs gallery (clustergym.experiments.gallery): (the baselines beside the paper policy, the comparison's
# horizon, the viewer frame's slot)
GALLERY: tuple[tuple[str, ...], int, int] = (("hauf", "lcf", "lwtf", "random"), 300, 60)

# The family's hyperparameter files (clustergym.learning.hyperparams): <algo>.yml with the entries of its env ids,
# each read over the algorithm file's `default` entry; defaults.yml (the algorithm `clustergym train` uses);
# tuning/ (the records of the tuning studies)
HYPERPARAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hyperparams")


class Stats:
    """The statistics the env's observation carries (``utility_mean``, ``channel_share``, ``arrival_share``;
    ``channel/learner_stats.py``), computed outside the env from observations and feedback, for
    :class:`clustergym.learning.pipeline.EmpiricalStats`.

    Per channel: mean realised utility v̂_e (0 if untried) and the share of slots it was used n_e / t
    (eqs. 8–9's statistics); per port: the share of slots with a job (the hidden ρ_l).

    ``pad``: the env's padding kwargs (``{"max_edges": P}`` on a padded env, whose feedback has P entries):
    the per-channel parts then have P entries, 0 on padding (a fixed size across instances)."""

    def __init__(self, problem, pad: dict | None = None):
        self.problem = problem
        self.num_entries = int((pad or {}).get("max_edges") or problem.num_edges)  # |E|, or max_edges
        self.size = 2 * self.num_entries + problem.num_ports

    def reset(self) -> None:
        pb = self.problem
        self.n = np.zeros(self.num_entries)  # (|E|,) slots each channel was executed
        self.sum = np.zeros(self.num_entries)  # (|E|,) sum of realised Z̃_e
        self.jobs = np.zeros(pb.num_ports)  # (L,) slots with a job

    def update(self, obs: dict, fb: dict) -> None:
        if "executed" in fb:  # per-channel feedback (|E|,)
            x = np.asarray(fb["executed"], dtype=bool)
            self.n[x] += 1.0
            self.sum[x] += np.asarray(fb["utilities"], dtype=np.float64)[x]
        self.jobs += np.asarray(obs["arrivals"], dtype=np.float64)

    def parts(self, t: int) -> tuple[np.ndarray, ...]:
        mean = np.divide(self.sum, self.n, out=np.zeros_like(self.sum), where=self.n > 0)
        return (mean, self.n / t, self.jobs / t)


def legacy_keys(space) -> tuple[str, ...]:
    """The keys of the observation of earlier versions (before the statistics, feedback and public problem
    data joined it): ``arrivals``, ``t`` and, on a padded env (``edge_present``), the padded keys. A model
    trained then saw [flatten(these keys), the statistics ``STATS_KEYS``] (``clustergym.learning.pipeline``)."""
    padded = ("edge_present", "edge_arrival", "edge_demand") if "edge_present" in space.spaces else ()
    return ("arrivals", "t", *padded)


def sb3_mask(m: np.ndarray) -> np.ndarray:
    """Per-channel mask (|E|,) bool -> MaskablePPO's flat per-value mask [0 allowed, 1 allowed] per channel
    (equals ``env.action_masks()``)."""
    return np.stack([np.ones_like(m), m], axis=1).reshape(-1)


def privileged_features(env) -> np.ndarray:
    """Training only (``clustergym train --privileged critic``, the critic's extra input; never the acting policy's):
    each channel's true mean utility ṽ_e from the hidden truth, (P,) with P = |E| or ``max_edges`` (0 on padding).
    With ṽ and the public arrivals, demands and capacities the per-slot oracle's choice is determined."""
    v = np.zeros(int(env.action_space.n), dtype=np.float32)
    mu = np.asarray(env.scenario.truth.mean_utility, dtype=np.float32)
    v[:mu.size] = mu
    return v


def oracle_action(env) -> np.ndarray:
    """Training only (``clustergym train --warm-start oracle``, a behaviour-cloning teacher; never an agent): the
    per-slot oracle's decision for the current slot of the unpadded ``env``, the channels of max ṽᵀx over the
    slot's arrivals (eq. 7, the exact knapsack of ``oracle.py`` on the hidden ṽ), (|E|,) int8."""
    E = env.problem.num_edges
    active = np.flatnonzero(np.asarray(env.action_masks()).reshape(-1, 2)[:E, 1])  # the slot's arriving channels
    x = np.zeros(E, dtype=np.int8)
    if active.size:
        _, sel = knapsack_max(env.scenario.truth.mean_utility[active], env.problem.demand[active],
                              env.problem.capacity)
        x[active[sel]] = 1
    return x
