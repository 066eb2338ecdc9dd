"""One hyperparameter set per (env, algorithm), in files users read and edit.

``clustergym/learning/hyperparams/<algo>.yml`` (this package's data files) follows rl-zoo3's convention: one file per algorithm,
keys are env ids, values the algorithm's keyword arguments plus a few run settings (:data:`RUN_KEYS`).
``clustergym train`` reads the entry of its (env, algorithm) and applies ``--hp KEY=VALUE`` on top;
``clustergym bench`` reads the same entries for its training-throughput rows. A user's own file can be
passed as ``TrainConfig(..., hyperparams_file=PATH)`` / ``clustergym train --hp-file PATH``.

Values are plain YAML (read with ``yaml.safe_load``): nothing in the file is evaluated as Python.
"""

from __future__ import annotations

import os

__all__ = ["RUN_KEYS", "default_algo", "hyperparams_path", "load_hyperparams", "split_run_keys"]

# run settings, not algorithm keyword arguments: env_kwargs (the env's kwargs, e.g. the action mode, as rl-zoo3's
# env_kwargs; the caller's kwargs go on top and the side-car records the result), vec (how envs are stepped) and
# obs_layout (which observation keys the flat vector holds: clustergym.learning.pipeline's layouts) and tuned
# (documentation only: the keys whose values come from a tuning study, with its record's file name)
RUN_KEYS = ("n_envs", "n_timesteps", "normalize", "env_kwargs", "vec", "obs_layout", "tuned")
HERE = os.path.dirname(os.path.abspath(__file__))  # the shipped <algo>.yml files sit beside this module


def hyperparams_path(algo: str) -> str:
    """The shipped file of ``algo``: ``clustergym/learning/hyperparams/<algo>.yml``."""
    return os.path.join(HERE, f"{algo}.yml")


def load_hyperparams(algo: str, env_id: str, path: str | None = None) -> dict:
    """The entry of ``env_id`` in ``path`` (default: the shipped file of ``algo``); {} when the file has none.

    A missing file, malformed YAML or an entry that is not a mapping is a ValueError naming the file.
    """
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is in the [drl] extra
        raise ValueError("reading hyperparameter files needs pyyaml: pip install 'clustergym[drl]'") from None
    path = path or hyperparams_path(algo)
    if not os.path.exists(path):
        if path == hyperparams_path(algo):
            return {}
        raise ValueError(f"hyperparameter file {path!r} does not exist")
    try:
        with open(path) as f:
            data = yaml.safe_load(f) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of env ids to hyperparameters")
    entry = data.get(env_id, {})
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: the entry of {env_id!r} must be a mapping of hyperparameters")
    return dict(entry)


def split_run_keys(entry: dict) -> tuple[dict, dict]:
    """(run settings of :data:`RUN_KEYS`, the algorithm's keyword arguments)."""
    run = {k: entry[k] for k in RUN_KEYS if k in entry}
    return run, {k: v for k, v in entry.items() if k not in RUN_KEYS}


def default_algo(env_id: str) -> str:
    """The algorithm ``clustergym train ENV_ID`` uses without ``--algo``: the env's entry in the shipped
    ``defaults.yml`` (``"ppo"`` for an env it does not name)."""
    import yaml

    with open(os.path.join(HERE, "defaults.yml")) as f:
        data = yaml.safe_load(f) or {}
    algo = data.get(env_id, "ppo")
    if not isinstance(algo, str):
        raise ValueError(f"defaults.yml: the algorithm of {env_id!r} must be a name, got {algo!r}")
    return algo
