"""Training pools with randomised generator parameters.

The default training pool varies only the scenario seed: every instance comes from the generator's default
parameters (arrival probability, cost law, load, ...). A learner may then fit what those defaults make likely
(on P1, "low demand means high value") rather than what each episode shows. A *parameter pool* also varies the
generator's parameters: ``clustergym train --param-draws N`` draws N settings of the parameters in the
family's ranges (the hook ``PARAM_RANGES`` of its ``drl_hooks`` module: uniformly in each range, from a generator
seeded with :data:`SETTINGS_SEED`, so every training run with the same N sees the same settings), and every
episode runs in one setting drawn uniformly, on an instance drawn from the pool as usual. The parameters that
fix the spaces' sizes (ports, servers, device types, machines, job slots) are never drawn; families padded to
fixed maxima are padded over every setting.

The model is still the default generator's: its side-car records the default env kwargs (evaluation runs the
default generator) and, under ``param_pool``, the settings it trained on.

Training only: no evaluation run imports this module.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from clustergym.core.family import env_family, family_specs
from clustergym.learning.instances import pad_kwargs_of, padding_for

__all__ = ["SETTINGS_SEED", "param_pool_record", "param_ranges", "param_settings", "pool_padding"]

SETTINGS_SEED = 20_000  # the settings' generator: the same N settings for every training run and seed


def param_ranges(env_id: str) -> dict[str, tuple[float, float]]:
    """The generator parameters a parameter pool of ``env_id`` draws: its family's ``drl_hooks`` hook
    ``PARAM_RANGES`` (name -> (low, high), drawn uniformly in that order); a ValueError for a family without one,
    naming the families that have ranges."""
    family = env_family(env_id)
    specs = {s.name: s for s in family_specs()}
    ranges = specs[family].hook("PARAM_RANGES") if family in specs else None
    if ranges is None:
        raise ValueError(f"param_draws: no parameter ranges for {env_id} (family {family!r}); families with "
                         f"ranges: {', '.join(sorted(n for n, s in specs.items() if s.hook('PARAM_RANGES')))}")
    return dict(ranges)


def param_settings(env_id: str, draws: int, env_kwargs: dict | None = None) -> list[dict]:
    """``draws`` settings of the family's ranges (:func:`param_ranges`; a parameter the caller set in
    ``env_kwargs`` stays fixed and is not drawn); a ValueError for a family without ranges or when nothing is
    left to draw."""
    ranges = param_ranges(env_id)
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


def param_pool_record(env_id: str, settings: list[dict]) -> dict:
    """The side-car's record of a parameter pool: the draws, the ranges they came from and the settings."""
    return {"draws": len(settings), "settings_seed": SETTINGS_SEED,
            "ranges": {n: list(r) for n, r in param_ranges(env_id).items() if n in settings[0]},
            "settings": settings}
