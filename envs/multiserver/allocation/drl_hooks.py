"""DRL hooks of P2, read through the family's ``FamilySpec.drl_hooks`` by the observation pipeline
(``clustergym.learning.pipeline``) and by ``clustergym train``.

Only public quantities: the observation, ``info["feedback"]`` and the public problem; never metrics.

The constants are the family's data for the parameter pools, ``clustergym tune``, the hyperparameter files,
``clustergym bench`` and the docs gallery (each one's meaning: ``FamilySpec.drl_hooks``).
"""

from __future__ import annotations

import os

import numpy as np

from clustergym.envs.multiserver.allocation.actions import channel_high
from clustergym.envs.multiserver.allocation.learner_stats import STATS_KEYS

__all__ = ["BENCH_MEMORY", "BENCH_THROUGHPUT", "GALLERY", "HYPERPARAMS_DIR", "PARAM_RANGES", "STATS_KEYS",
           "TUNING_REFERENCE", "Stats", "box_bounds", "compact_keys", "legacy_keys", "privileged_features"]

# The generator parameters a parameter pool draws (clustergym.learning.pools): (low, high), drawn uniformly, each
# holding the default (in brackets): arrival probability per port [0.7]; the contention level of the communication
# overhead [10]; the graph density [2.5]
PARAM_RANGES: dict[str, tuple[float, float]] = {"rho": (0.4, 1.0), "contention": (5.0, 15.0), "density": (2.0, 3.0)}

# The reference agent of `clustergym tune`'s objective (clustergym.learning.tuning): the best simple rule of the
# family at the training horizon (docs/drl.md), the objective's "1"
TUNING_REFERENCE = "drf"

# `clustergym bench` (clustergym.bench.throughput): the "PPO training, env-steps/s" rows of the family's first env
# id, (extra env kwargs beside its ppo.yml entry's, vec mode) each
BENCH_THROUGHPUT: tuple[tuple[dict, str], ...] = (({}, "auto"),)
BENCH_MEMORY = True  # a memory row: 10^6 slots (10^5 quick), RSS and step rate flat

# The docs gallery (clustergym.experiments.gallery): (the baselines beside the paper policy, the comparison's
# horizon, the viewer frame's slot)
GALLERY: tuple[tuple[str, ...], int, int] = (("fairness", "drf", "binpacking", "spreading", "random"), 300, 60)

# The family's hyperparameter files (clustergym.learning.hyperparams): <algo>.yml with the entries of its env ids,
# each read over the algorithm file's `default` entry; defaults.yml (the algorithm `clustergym train` uses);
# tuning/ (the records of the tuning studies)
HYPERPARAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hyperparams")


class Stats:
    """The statistics the env's observation carries (``arrival_share``, ``port_reward_mean``;
    ``allocation/learner_stats.py``), computed outside the env from observations and feedback, for
    :class:`clustergym.learning.pipeline.EmpiricalStats`.

    Per port: the share of slots with a job (the hidden ρ_l, eq. 1) and the mean realised reward
    x_l q_l when it had a job."""

    def __init__(self, problem, pad: dict | None = None):  # pad: the env's padding kwargs (sizes do not depend on them)
        self.problem = problem
        self.size = 2 * problem.num_ports

    def reset(self) -> None:
        pb = self.problem
        self.jobs = np.zeros(pb.num_ports)  # (L,) slots with a job
        self.sum = np.zeros(pb.num_ports)  # (L,) sum of the port's realised reward

    def update(self, obs: dict, fb: dict) -> None:
        x = np.asarray(obs["arrivals"], dtype=np.float64)
        self.jobs += x
        self.sum += np.asarray(fb.get("port_reward", np.zeros_like(x)), dtype=np.float64) * x

    def parts(self, t: int) -> tuple[np.ndarray, ...]:
        mean = np.divide(self.sum, self.jobs, out=np.zeros_like(self.sum), where=self.jobs > 0)
        return (self.jobs / t, mean)


def legacy_keys(space) -> tuple[str, ...]:
    """The keys of the observation of earlier versions (before the statistics, feedback and public problem
    data joined it): ``arrivals``, ``t`` and, on a padded env (``edge_present``), the padded keys. A model
    trained then saw [flatten(these keys), the statistics ``STATS_KEYS``] (``clustergym.learning.pipeline``)."""
    padded = ("edge_present", "edge_arrival", "edge_demand") if "edge_present" in space.spaces else ()
    return ("arrivals", "t", *padded)


def box_bounds(problem, pad: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact (float64) bounds of the Box action, as the env's ``action_bounds()`` gives them: [0, a_l^k] of
    eq. 3 (the float32 space bounds can round a up by more than the env's feasibility tolerance; 1 on the
    entries with a_l^k = 0, which the env ignores); on a padded env (``pad={"max_edges": P}``) the action
    is a fraction of a_l^k: [0, 1] of shape (P, K); in the ``"port"`` / ``"port_device"`` action modes
    (``problem.action_mode``) request fractions [0, 1] of shape (L,) / (L, K)."""
    mode = getattr(problem, "action_mode", "channel")
    if mode != "channel":
        shape = (problem.num_ports,) if mode == "port" else (problem.num_ports, problem.num_device_types)
        return np.zeros(shape), np.ones(shape)
    if pad and pad.get("max_edges"):
        shape = (int(pad["max_edges"]), problem.num_device_types)
        return np.zeros(shape), np.ones(shape)
    hi = channel_high(problem)
    return np.zeros_like(hi), hi


def compact_keys(obs_space) -> tuple[str, ...]:
    """The observation keys of the ``"compact"`` flat layout (``clustergym.learning.pipeline``): the per-port
    ones and the scalars, without the per-channel parts (α, utility family, demands, last allocation: most
    of the 13,549 numbers at paper size), which the per-port action modes leave to the env's fill rule."""
    keep = ("arrivals", "t", "beta", "arrival_share", "port_reward_mean", "last_port_reward")
    return tuple(k for k in obs_space.spaces if k in keep)


def privileged_features(env) -> np.ndarray:
    """Training only (``clustergym train --privileged critic``, the critic's extra input; never the acting policy's):
    each port's true arrival probability ρ_l from the hidden truth, (L,). With the public demands, capacities and
    utilities it determines the expected slot utility of every static allocation, hence the hindsight optimum's
    target (eq. 6) up to the arrival noise."""
    return np.asarray(env.scenario.truth.rho, dtype=np.float32).reshape(-1)
