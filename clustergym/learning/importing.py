"""``clustergym import-model``: a model trained with plain Stable-Baselines3 becomes an ``sb3:`` agent.

A user who trains on one of our envs the way SB3's documentation shows::

    env = gymnasium.wrappers.FlattenObservation(gymnasium.make("clustergym/ApproxJobs-v0"))
    PPO("MlpPolicy", env).learn(100_000).save("ppo_p4.zip")

has a ``model.zip`` without the side-car (``clustergym.json``) the ``sb3:`` agent reads. :func:`import_model`
checks the model against the env before writing anything — the zip is an SB3 model whose readable fields
(no pickle is loaded) name a flat ``Box`` observation of the size ``FlattenObservation`` gives that env and
the env's own action space, and whose policy is the algorithm's ``MlpPolicy`` — then loads it with the
no-pickle loader (:func:`clustergym.learning.agent.safe_load`) and writes a run folder: the model and a
side-car with ``"obs": "flatten"`` (observations flattened as ``FlattenObservation`` does, no statistics, no
normalisation, actions as the env takes them). ``clustergym run ENV --agents sb3:DIR,...`` then evaluates it.

A model trained on one instance (the default ``gym.make(id)``: ``scenario_seed`` 0) acts on that instance;
pass the env kwargs it was trained with (``env_kwargs`` / ``--set``) so its spaces are rebuilt exactly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile

import numpy as np

from clustergym.agent import env_family
from clustergym.family import env_ids
from clustergym.learning.agent import check_side_car, model_spaces, safe_load
from clustergym.learning.algos import ALGOS, SIDE_CAR
from clustergym.learning.policies import policy_class
from clustergym.outdir import OutputFolder

__all__ = ["import_model", "model_fields"]


def model_fields(path: str) -> dict:
    """The zip's ``data`` JSON (the readable fields SB3 writes beside each pickle); ValueError if not an SB3 zip."""
    try:
        with zipfile.ZipFile(path) as z:
            data = json.loads(z.read("data"))
            z.getinfo("policy.pth")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path!r} is not a model saved by SB3 ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path!r} is not a model saved by SB3 (its data is not an object)")
    return data


def _space_type(entry) -> str:
    t = entry.get(":type:", "") if isinstance(entry, dict) else ""
    m = re.search(r"'([\w.]+)'", t)
    return m.group(1).rsplit(".", 1)[-1] if m else "?"


def _array(text) -> np.ndarray | None:
    if not isinstance(text, str):
        return None
    try:
        return np.array(text.strip("[]").split(), dtype=np.float64)
    except ValueError:
        return None


def _check_spaces(path: str, data: dict, obs_space, act_space, env_id: str) -> None:
    import gymnasium as gym

    obs, act = data.get("observation_space"), data.get("action_space")
    if _space_type(obs) != "Box" or list(obs.get("_shape") or []) != list(obs_space.shape):
        shape = obs.get("_shape") if isinstance(obs, dict) else None
        raise ValueError(f"{path!r} observes a {_space_type(obs)} of shape {shape}; "
                         f"FlattenObservation(gym.make({env_id!r})) gives a Box of shape {list(obs_space.shape)}: "
                         "train on that wrapper (and pass the env kwargs it was trained with)")
    want = type(act_space).__name__
    if _space_type(act) != want or list(act.get("_shape") or []) != list(act_space.shape or ()):
        shape = act.get("_shape") if isinstance(act, dict) else None
        raise ValueError(f"{path!r} acts in a {_space_type(act)} of shape {shape}; {env_id} takes a {want} of shape "
                         f"{list(act_space.shape or ())}")
    if isinstance(act_space, gym.spaces.MultiDiscrete):
        nvec = _array(act.get("nvec"))
        if nvec is None or nvec.shape != act_space.nvec.shape or not np.array_equal(nvec, act_space.nvec):
            raise ValueError(f"{path!r}: its MultiDiscrete action sizes differ from {env_id}'s")
    if isinstance(act_space, gym.spaces.Discrete) and int(act.get("n", -1)) != int(act_space.n):
        raise ValueError(f"{path!r}: its Discrete action has {act.get('n')} choices; {env_id}'s has {act_space.n}")


def import_model(model: str, env_id: str, out: str, *, algo: str = "ppo", env_kwargs: dict | None = None,
                 overwrite: bool = False) -> dict:
    """Check ``model`` (a plain SB3 ``model.zip``) against ``FlattenObservation(gym.make(env_id, **env_kwargs))``
    and write the run folder ``out`` (``model.zip`` + ``clustergym.json``); returns the side-car. Nothing is
    written when a check fails (a ValueError naming what differs)."""
    import gymnasium as gym

    if env_id not in env_ids():
        raise ValueError(f"env {env_id!r} is not a clustergym env (expected one of {', '.join(env_ids())})")
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is invalid: expected one of {', '.join(ALGOS)}")
    if not os.path.isfile(model):
        raise FileNotFoundError(f"no SB3 model at {model!r}")
    env_kwargs = dict(env_kwargs or {})
    for k in ("instances", "oracle", "render_mode"):
        if k in env_kwargs:
            raise ValueError(f"env kwarg {k!r} is not for an imported model (it acts on the instance it was trained on)")
    gym.make(env_id, **env_kwargs).close()  # bad kwargs: the env's own one-line error
    data = model_fields(model)
    meta = {"env_id": env_id, "family": env_family(env_id), "env_kwargs": env_kwargs, "algo": algo, "stats": False,
            "obs": "flatten", "instances": None, "instances_note": "one instance: the model was imported",
            "normalize": False, "norm_obs": False, "head": "sb3", "net": "mlp", "rescale_action": False,
            "hyperparams": {}, "hyperparams_file": None, "warm_start": None,
            "timesteps_trained": int(data["num_timesteps"]) if isinstance(data.get("num_timesteps"), int) else None,
            "imported": {"from": os.path.abspath(model), "wrappers": "gymnasium.wrappers.FlattenObservation"}}
    check_side_car(meta, "the side-car")
    obs_space, act_space = model_spaces(meta)
    _check_spaces(model, data, obs_space, act_space, env_id)
    cls_name = policy_class(algo, "sb3").__name__
    init = (data.get("policy_class") or {}).get("__init__", "") if isinstance(data.get("policy_class"), dict) else ""
    if f"{cls_name}.__init__" not in str(init):
        got = re.search(r"function (\w+)\.__init__", str(init))
        raise ValueError(f"{model!r}'s policy is {got.group(1) if got else 'unknown'}, not {algo}'s MlpPolicy "
                         f"({cls_name}): only MlpPolicy models on a flat observation are imported")
    safe_load(model, meta)  # loads without unpickling anything (a ValueError otherwise)

    with OutputFolder(out, overwrite=overwrite, marks=("model.zip", SIDE_CAR), need_total=2 * os.path.getsize(model) + 1e5,
                      need_file=os.path.getsize(model)) as stage:
        shutil.copyfile(model, os.path.join(stage.path, "model.zip"))
        with open(os.path.join(stage.path, SIDE_CAR), "w") as f:
            json.dump(meta, f, indent=1)
    return meta
