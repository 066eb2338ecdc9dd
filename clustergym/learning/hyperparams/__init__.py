"""One hyperparameter set per (env, algorithm), in files users read and edit.

Two kinds of files follow rl-zoo3's convention (one file per algorithm, keys are env ids, values the algorithm's
keyword arguments plus a few run settings, :data:`RUN_KEYS`):

* the **algorithm files** ``clustergym/learning/hyperparams/<algo>.yml`` (this package's data files) hold the
  algorithm's shared ``default`` entry and the entries of envs outside the families (``CartPole-v1``, the bench's
  anchor);
* a family's **own files**, in the folder its ``drl_hooks`` module names with the hook ``HYPERPARAMS_DIR`` (the
  shipped families: ``envs/<family>/hyperparams/``): ``<algo>.yml`` with the entries of the family's env ids,
  ``defaults.yml`` (the algorithm ``clustergym train`` uses without ``--algo``) and ``tuning/`` (the records of the
  tuning studies, ``<EnvName>-<algo>[-entity].json``).

An entry of a family's ``<algo>.yml`` is read over the algorithm file's ``default`` entry: its keys replace the
default's, the default's other keys stay, in the order a YAML ``<<: *default`` merge gives (an algorithm file
without ``default``: the entry as is; ``{}``: the default as is). An env id the family's file does not name is
looked up in the algorithm file.

``clustergym train`` reads the entry of its (env, algorithm) and applies ``--hp KEY=VALUE`` on top;
``clustergym bench`` reads the same entries for its training-throughput rows. A user's own file can be
passed as ``TrainConfig(..., hyperparams_file=PATH)`` / ``clustergym train --hp-file PATH``: its entry is read as
written (YAML merges inside that file apply; no family file, no algorithm default).

Values are plain YAML (read with ``yaml.safe_load``): nothing in the file is evaluated as Python.
"""

from __future__ import annotations

import os

from clustergym.core.family import env_hook
from clustergym.learning.hp_checks import read_yaml

__all__ = ["RUN_KEYS", "default_algo", "family_hyperparams_dir", "hyperparams_path", "load_hyperparams",
           "split_run_keys", "tuning_dir"]

# run settings, not algorithm keyword arguments: env_kwargs (the env's kwargs, e.g. the action mode, as rl-zoo3's
# env_kwargs; the caller's kwargs go on top and the side-car records the result), vec (how envs are stepped) and
# obs_layout (which observation keys the flat vector holds: clustergym.learning.pipeline's layouts) and tuned
# (documentation only: the keys whose values come from a tuning study, with its record's file name)
RUN_KEYS = ("n_envs", "n_timesteps", "normalize", "env_kwargs", "vec", "obs_layout", "tuned")
HERE = os.path.dirname(os.path.abspath(__file__))  # the shipped algorithm files <algo>.yml sit beside this module


def hyperparams_path(algo: str) -> str:
    """The shipped algorithm file of ``algo``: ``clustergym/learning/hyperparams/<algo>.yml``."""
    return os.path.join(HERE, f"{algo}.yml")


def family_hyperparams_dir(env_id: str) -> str | None:
    """The folder of the own hyperparameter files of ``env_id``'s family: the hook ``HYPERPARAMS_DIR`` of its
    ``drl_hooks`` module (None: an id no family owns, or a family without own files)."""
    folder = env_hook(env_id, "HYPERPARAMS_DIR")
    return None if folder is None else str(folder)


def tuning_dir(env_id: str) -> str | None:
    """The folder of the shipped tuning records of ``env_id``'s family (``<HYPERPARAMS_DIR>/tuning``; None: the
    family has no own files)."""
    folder = family_hyperparams_dir(env_id)
    return None if folder is None else os.path.join(folder, "tuning")


def _read(path: str, missing_ok: bool) -> dict:
    """The mapping in the YAML file ``path`` ({} for a missing file when ``missing_ok``); a ValueError naming it
    (the file's size, nesting and aliases are bounded before it is parsed:
    :func:`clustergym.learning.hp_checks.read_yaml`)."""
    try:
        import yaml  # noqa: F401
    except ImportError:  # pragma: no cover - pyyaml is in the [drl] extra
        raise ValueError("reading hyperparameter files needs pyyaml: pip install 'clustergym[drl]'") from None
    if not os.path.exists(path):
        if missing_ok:
            return {}
        raise ValueError(f"hyperparameter file {path!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"hyperparameter file {path!r} is a folder")
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of env ids to hyperparameters")
    return data


def _entry(data: dict, key: str, path: str) -> dict:
    entry = data.get(key, {})
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: the entry of {key!r} must be a mapping of hyperparameters")
    return dict(entry)


def load_hyperparams(algo: str, env_id: str, path: str | None = None) -> dict:
    """The entry of ``env_id`` (module docstring): with ``path`` (other than the shipped algorithm file), the entry
    in that file; else the entry of the family's own ``<algo>.yml`` read over the algorithm file's ``default``
    entry, or, where the family's file does not name ``env_id``, the algorithm file's entry; {} when no file has
    one.

    A missing ``path``, malformed YAML or an entry that is not a mapping is a ValueError naming the file.
    """
    shipped = hyperparams_path(algo)
    if path and os.path.abspath(path) != shipped:
        return _entry(_read(path, missing_ok=False), env_id, path)
    folder = family_hyperparams_dir(env_id)
    if folder is not None:
        own = os.path.join(folder, f"{algo}.yml")
        data = _read(own, missing_ok=True)
        if env_id in data:
            entry = _entry(data, env_id, own)
            return {**_entry(_read(shipped, missing_ok=True), "default", shipped), **entry}
    return _entry(_read(shipped, missing_ok=True), env_id, shipped)


def split_run_keys(entry: dict) -> tuple[dict, dict]:
    """(run settings of :data:`RUN_KEYS`, the algorithm's keyword arguments)."""
    run = {k: entry[k] for k in RUN_KEYS if k in entry}
    return run, {k: v for k, v in entry.items() if k not in RUN_KEYS}


def default_algo(env_id: str) -> str:
    """The algorithm ``clustergym train ENV_ID`` uses without ``--algo``: the env's entry in its family's own
    ``defaults.yml``, else in the shipped ``clustergym/learning/hyperparams/defaults.yml`` (``"ppo"`` for an env
    neither names)."""
    folder = family_hyperparams_dir(env_id)
    own = {} if folder is None else _read(os.path.join(folder, "defaults.yml"), missing_ok=True)
    algo = own[env_id] if env_id in own else _read(os.path.join(HERE, "defaults.yml"), missing_ok=True).get(env_id, "ppo")
    if not isinstance(algo, str):
        raise ValueError(f"defaults.yml: the algorithm of {env_id!r} must be a name, got {algo!r}")
    return algo
