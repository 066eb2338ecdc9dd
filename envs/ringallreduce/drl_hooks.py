"""DRL hooks of P3 (read through the family's ``FamilySpec.drl_hooks``): the compact observation layout.

The constants are the family's data for the parameter pools, ``clustergym tune``, the hyperparameter files,
``clustergym bench`` and the docs gallery (each one's meaning: ``FamilySpec.drl_hooks``).
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["BENCH_PLAIN", "BENCH_THROUGHPUT", "GALLERY", "HYPERPARAMS_DIR", "INSTANCE_IS_SEED", "PARAM_RANGES",
           "REFERENCE_OPTIONS", "TUNING_REFERENCE", "compact_columns", "compact_keys"]

# The generator parameters a parameter pool draws (clustergym.learning.pools): (low, high), drawn uniformly, each
# holding the default (in brackets): jobs per slot [2.0]; the bandwidth scale of every link [1.0]
PARAM_RANGES: dict[str, tuple[float, float]] = {"arrival_rate": (1.0, 3.0), "bw_scale": (0.5, 2.0)}

# The reference agent of `clustergym tune`'s objective (clustergym.learning.tuning): the best simple rule of the
# family at the training horizon (docs/drl.md), the objective's "1"
TUNING_REFERENCE = "greedy"
# `clustergym tune`'s default validation runs pair instance and seed (instance = seed 900-909): an instance
# draws its topology and its job stream and the env's reset seed changes neither, so one seed per instance
INSTANCE_IS_SEED = True

# `clustergym bench` (clustergym.bench.throughput): the "PPO training, env-steps/s" rows of the family's first env
# id, (extra env kwargs beside its ppo.yml entry's, vec mode) each
BENCH_THROUGHPUT: tuple[tuple[dict, str], ...] = (({}, "auto"),)
BENCH_PLAIN = True  # a "plain SB3 PPO" row: PPO(policy, gym.make(id)) on the default spaces

# `clustergym drl`'s references beside the paper policy (Algorithm 2 as written, ``gadget``) and the registered
# baselines: the repair-and-reoffer variant beyond it, an option row (docs/gadget.md), and the continuous reading
# of LAS beside Tiresias' discretised one (``las``): on a cluster short of GPUs LAS is the best of the paper's baselines
# (the registered ``srpt`` is above it there)
REFERENCE_OPTIONS: tuple[str, ...] = ("gadget[rounding_repair=true]", "las[thresholds=continuous]")

# The docs gallery (clustergym.experiments.gallery): (the baselines beside the paper policy, the comparison's
# horizon, the viewer frame's slot)
GALLERY: tuple[tuple[str, ...], int, int] = (("fifo", "drf", "las", "greedy", "random"), 120, 60)

# The family's hyperparameter files (clustergym.learning.hyperparams): <algo>.yml with the entries of its env ids,
# each read over the algorithm file's `default` entry; defaults.yml (the algorithm `clustergym train` uses);
# tuning/ (the records of the tuning studies)
HYPERPARAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hyperparams")


def compact_keys(space) -> tuple[str, ...]:
    """The keys of the ``"compact"`` layout: ``jobs``, ``servers``, ``links`` and ``t``. Left out: ``job_mask``
    (a window row holds a job exactly when its remaining budget is positive, a column of ``jobs``) and
    ``link_present`` (a padded link row is all zeros in ``links``): nothing the other keys do not say."""
    return tuple(k for k in ("jobs", "servers", "links", "t") if k in space.spaces)


def compact_columns(space) -> dict:
    """The entries of ``links`` the ``"compact"`` layout keeps: per link row the upload capacity and the upload
    load (flattened row by row: row r's columns are entries 4r..4r+3). Left out: the download capacity (every
    shipped scenario builds full-duplex links with the same bandwidth both ways; a custom topology with
    other download capacities should train on the ``"full"`` layout) and the download load (the cheapest
    ring loads both directions equally: always the upload load)."""
    rows = space["links"].shape[0]
    r = np.arange(rows)
    return {"links": np.stack([4 * r, 4 * r + 2], axis=1).reshape(-1)}
