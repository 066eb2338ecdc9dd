"""Training pools with randomised generator parameters.

The default training pool varies only the scenario seed: every instance comes from the generator's default
parameters (arrival probability, cost law, load, ...). A learner may then fit what those defaults make likely
(on P1, "low demand means high value") rather than what each episode shows. A *parameter pool* also varies the
generator's parameters: ``clustergym train --param-draws N`` draws N settings of the parameters in
:data:`PARAM_RANGES` (uniformly in each range, from a generator seeded with :data:`SETTINGS_SEED`, so every
training run with the same N sees the same settings), and every episode runs in one setting drawn uniformly,
on an instance drawn from the pool as usual. The parameters that fix the spaces' sizes (ports, servers, device
types, machines, job slots) are never drawn; families padded to fixed maxima are padded over every setting.

The model is still the default generator's: its side-car records the default env kwargs (evaluation runs the
default generator) and, under ``param_pool``, the settings it trained on.

Training only: no evaluation run imports this module.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from clustergym.core.family import env_family
from clustergym.learning.instances import pad_kwargs_of, padding_for
__all__ = ["PARAM_RANGES", "SETTINGS_SEED", "param_settings", "pool_padding"]

# The generator parameters a parameter pool draws, per family: (low, high), drawn uniformly. Each range holds
# the default (in brackets) and varies the load or the value law around it:
PARAM_RANGES: dict[str, dict[str, tuple[float, float]]] = {
    # P1: arrival probability per port [0.9]; the mean and spread of the per-unit cost f_k, which sets how
    # strongly a channel's demand lowers its value [0.5, 0.1]; the capacity share [0.25]
    "multiserver-channel": {"rho": (0.6, 1.0), "cost_mean": (0.25, 0.75), "cost_std": (0.05, 0.2),
                            "capacity_ratio": (0.2, 0.3)},
    # P2: arrival probability per port [0.7]; the contention level of the communication overhead [10];
    # the graph density [2.5]
    "multiserver-allocation": {"rho": (0.4, 1.0), "contention": (5.0, 15.0), "density": (2.0, 3.0)},
    # P3: jobs per slot [2.0]; the bandwidth scale of every link [1.0]
    "ringallreduce": {"arrival_rate": (1.0, 3.0), "bw_scale": (0.5, 2.0)},
    # P4: jobs per slot [0.015]; the approximation exponent beta [0.5]; the slowest machine's speed factor [0.3]
    "approxjobs": {"arrival_rate": (0.0075, 0.03), "beta": (0.5, 0.7), "speed_low": (0.2, 0.5)},
}
SETTINGS_SEED = 20_000  # the settings' generator: the same N settings for every training run and seed


def param_settings(env_id: str, draws: int, env_kwargs: dict | None = None) -> list[dict]:
    """``draws`` settings of the family's :data:`PARAM_RANGES` (a parameter the caller set in ``env_kwargs``
    stays fixed and is not drawn); a ValueError for a family without ranges or when nothing is left to draw."""
    family = env_family(env_id)
    ranges = PARAM_RANGES.get(family)
    if ranges is None:
        raise ValueError(f"param_draws: no parameter ranges for {env_id} (family {family!r}); families with "
                         f"ranges: {', '.join(sorted(PARAM_RANGES))}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise ValueError(f"param_draws={draws!r} is invalid: expected an integer >= 1")
    names = [n for n in ranges if n not in (env_kwargs or {})]
    if not names:
        raise ValueError(f"param_draws: env_kwargs fix every drawn parameter ({', '.join(ranges)}): nothing to draw")
    lo = np.array([ranges[n][0] for n in names])
    hi = np.array([ranges[n][1] for n in names])
    u = np.random.default_rng(SETTINGS_SEED).uniform(lo, hi, size=(int(draws), len(names)))
    return [{n: float(np.round(v, 6)) for n, v in zip(names, row)} for row in u]


def pool_padding(env_id: str, env_kwargs: dict, settings: Sequence[dict], instances: Sequence[int]) -> dict:
    """The padding kwargs that fit every instance of ``instances`` in every setting (max over settings of
    :func:`clustergym.learning.instances.padding_for`); {} for a family whose spaces never vary."""
    names = pad_kwargs_of(env_id)
    if not names:
        return {}
    free = {k: v for k, v in env_kwargs.items() if k not in names}  # the maxima over the settings, not the given
    need: dict[str, int] = {}
    for p in [{}, *settings]:
        for n, v in padding_for(env_id, {**free, **p}, instances).items():
            need[n] = max(need.get(n, 0), int(v))
    for n, v in need.items():
        given = env_kwargs.get(n)
        if given is not None and int(given) < v:
            raise ValueError(f"{n}={given} is too small for the parameter pool: its settings need {n} >= {v}")
    return {n: int(env_kwargs.get(n, v)) for n, v in need.items()}
