"""``clustergym import-model``: a model trained with plain Stable-Baselines3 becomes an ``sb3:`` agent.

A user who trains on one of our envs the way SB3's documentation shows::

    env = gymnasium.wrappers.FlattenObservation(gymnasium.make("clustergym/ApproxJobs-v0"))
    PPO("MlpPolicy", env).learn(100_000).save("ppo_p4.zip")

has a ``model.zip`` without the side-car (``clustergym.json``) the ``sb3:`` agent reads; so has one trained on the
env's own Dict observation::

    PPO("MultiInputPolicy", gymnasium.make("clustergym/ApproxJobs-v0")).learn(100_000).save("ppo_p4.zip")

:func:`import_model` checks the model against the env before writing anything — the zip is an SB3 model whose
readable fields (no pickle is loaded) name either a flat ``Box`` observation of the size ``FlattenObservation``
gives that env (policy: the algorithm's ``MlpPolicy``) or a ``Dict`` with the env's keys, each of the env's kind
and shape (policy: its ``MultiInputPolicy``), and the env's own action space (either action head of
:mod:`clustergym.learning.heads` is accepted) — then loads it with the no-pickle loader
(:func:`clustergym.learning.sb3_agent.safe_load`) and writes a run folder: the model and a side-car with ``"obs":
"flatten"`` (observations flattened as ``FlattenObservation`` does) or ``"obs": "dict"`` (the env's observation
as it is), actions as the env takes them. ``vecnormalize``: the file ``VecNormalize.save`` wrote; its
observation statistics are read with a loader that builds only plain arrays (numpy, SB3's ``RunningMeanStd``
and gymnasium's spaces are read as inert records; any other class in the file is refused) and saved as
``vecnormalize.npz`` beside the model. ``clustergym run ENV --agents sb3:DIR,...`` then evaluates it.

Pass the env kwargs it was trained with (``env_kwargs`` / ``--set``: the padding, ``scenario_seed``, or
``instances``, the pool it was trained on, recorded in the side-car) so its spaces are rebuilt exactly. The runner
evaluates it on every instance whose observation and action spaces are the ones it was built for
(:func:`clustergym.learning.instances.imported_space_mismatch`); another instance is refused in one line naming
the space that does not fit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile

import numpy as np

from clustergym.core.family import env_family
from clustergym.core.family import env_ids
from clustergym.learning.sb3_agent import model_spaces, safe_load
from clustergym.learning.algos import ALGOS, NORM_FILE, SIDE_CAR
from clustergym.learning.policies import policy_class
from clustergym.learning.sidecar import check_norm_file, check_side_car, read_model_data
from clustergym.core.outdir import OutputFolder

__all__ = ["import_model", "model_fields", "read_vecnormalize", "saved_model_spec"]


def model_fields(path: str) -> dict:
    """The zip's ``data`` JSON (the readable fields SB3 writes beside each pickle); ValueError if not an SB3 zip."""
    try:
        with zipfile.ZipFile(path) as z:
            data = read_model_data(z, path)  # size and nesting bounded (a ValueError naming the file)
            z.getinfo("policy.pth")
    except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
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


def _repr_signature(text: str) -> str:
    """A space's kind and shape from its repr (what a model's ``data`` keeps of each Dict entry): a Box's
    bounds are dropped (the network does not read them; ``t``'s is the horizon), other spaces keep their repr."""
    text = text.strip()
    m = re.fullmatch(r"Box\(.*, (\([\d, ]*\)), \w+\)", text, flags=re.S)
    return f"Box{m.group(1)}" if m else text


def _dict_entries(text) -> dict[str, str] | None:
    """``{'key': Box(...), ...}`` (the repr SB3 writes of a Dict's spaces) -> {key: repr}, None if unreadable."""
    if not isinstance(text, str) or not text.startswith("{") or not text.endswith("}"):
        return None
    heads = list(re.finditer(r"(?:^\{|, )'([^']+)': ", text))
    if not heads:
        return None
    out = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text) - 1
        out[m.group(1)] = text[m.end():end]
    return out


def _check_dict_obs(path: str, obs: dict, env_space, env_id: str) -> None:
    entries = _dict_entries(obs.get("spaces"))
    if entries is None:
        raise ValueError(f"{path!r}: its Dict observation space is not readable from the zip's data")
    diff = []
    missing = [k for k in env_space.spaces if k not in entries]
    extra = [k for k in entries if k not in env_space.spaces]
    if missing:
        diff.append(f"keys {env_id} gives and the model lacks: {', '.join(missing)}")
    if extra:
        diff.append(f"keys the model expects and {env_id} lacks: {', '.join(extra)}")
    for k, text in entries.items():
        if k in env_space.spaces:
            got, want = _repr_signature(text), _repr_signature(repr(env_space[k]))
            if got != want:
                diff.append(f"{k}: model {got}, env {want}")
    if diff:
        raise ValueError(f"{path!r} observes a Dict that differs from gym.make({env_id!r})'s: {'; '.join(diff)} "
                         "(pass the env kwargs it was trained with)")


def _check_spaces(path: str, data: dict, obs_space, act_space, env_id: str) -> None:
    import gymnasium as gym

    obs, act = data.get("observation_space"), data.get("action_space")
    if isinstance(obs_space, gym.spaces.Dict):
        _check_dict_obs(path, obs, obs_space, env_id)
    elif _space_type(obs) != "Box" or list(obs.get("_shape") or []) != list(obs_space.shape):
        shape = obs.get("_shape") if isinstance(obs, dict) else None
        raise ValueError(f"{path!r} observes a {_space_type(obs)}" + (f" of shape {shape}" if shape else "")
                         + f"; FlattenObservation(gym.make({env_id!r})) gives a Box of shape {list(obs_space.shape)}: "
                         "train on that wrapper, or on gym.make itself with MultiInputPolicy (and pass the env "
                         "kwargs it was trained with)")
    want = type(act_space).__name__
    if _space_type(act) != want or list(act.get("_shape") or []) != list(act_space.shape or ()):
        shape = act.get("_shape") if isinstance(act, dict) else None
        raise ValueError(f"{path!r} acts in a {_space_type(act)} of shape {shape}; {env_id} takes a {want} of shape "
                         f"{list(act_space.shape or ())}")
    if isinstance(act_space, gym.spaces.MultiDiscrete):
        text = act.get("nvec")
        nvec = _array(text)
        if nvec is None and isinstance(text, str) and "..." in text:  # numpy elides a long array: compare the text
            same = text == str(np.asarray(act_space.nvec))
        else:
            same = nvec is not None and nvec.shape == act_space.nvec.shape and np.array_equal(nvec, act_space.nvec)
        if not same:
            raise ValueError(f"{path!r}: its MultiDiscrete action sizes differ from {env_id}'s")
    if isinstance(act_space, gym.spaces.Discrete) and int(act.get("n", -1)) != int(act_space.n):
        raise ValueError(f"{path!r}: its Discrete action has {act.get('n')} choices; {env_id}'s has {act_space.n}")


def _pool(value) -> list[int]:
    """The ``instances`` kwarg of an imported model (the pool it was trained on): a non-empty list of instance numbers."""
    vals = list(value) if isinstance(value, (list, tuple, range)) else None
    if not vals or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 for v in vals):
        raise ValueError(f"env kwarg instances={value!r} is invalid: expected a non-empty list of instance numbers "
                         "(scenario seeds >= 0), e.g. [100,101,102]")
    return list(dict.fromkeys(int(v) for v in vals))


def import_model(model: str, env_id: str, out: str, *, algo: str = "ppo", env_kwargs: dict | None = None,
                 overwrite: bool = False, vecnormalize: str | None = None) -> dict:
    """Check ``model`` (a plain SB3 ``model.zip``) against ``FlattenObservation(gym.make(env_id, **env_kwargs))``
    (a flat model) or ``gym.make(env_id, **env_kwargs)`` (a Dict model) and write the run folder ``out``
    (``model.zip`` + ``clustergym.json``, + ``vecnormalize.npz`` with ``vecnormalize``); returns the side-car.
    Nothing is written when a check fails (a ValueError naming what differs)."""
    import gymnasium as gym

    if env_id not in env_ids():
        raise ValueError(f"env {env_id!r} is not a clustergym env (expected one of {', '.join(env_ids())})")
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is invalid: expected one of {', '.join(ALGOS)}")
    if not os.path.isfile(model):
        raise FileNotFoundError(f"no SB3 model at {model!r}")
    env_kwargs = dict(env_kwargs or {})
    for k in ("oracle", "render_mode"):
        if k in env_kwargs:
            raise ValueError(f"env kwarg {k!r} is not for an imported model (the runner sets it)")
    pool = _pool(env_kwargs.pop("instances")) if "instances" in env_kwargs else None
    if pool is not None and "scenario_seed" in env_kwargs:
        raise ValueError("env kwargs 'instances' and 'scenario_seed' cannot be combined: the pool is the instances "
                         "the model was trained on")
    env = gym.make(env_id, **env_kwargs)  # bad kwargs: the env's own one-line error
    env.close()
    data = model_fields(model)
    dict_obs = _space_type(data.get("observation_space")) == "Dict"
    meta = {"env_id": env_id, "family": env_family(env_id), "env_kwargs": env_kwargs, "algo": algo, "stats": False,
            "obs": "dict" if dict_obs else "flatten", "instances": pool,
            "instances_note": "the pool it was trained on (imported)" if pool else "one instance (imported)",
            "normalize": False, "norm_obs": False,
            # the fast head's mode and samples follow the same law as SB3's (same weights), many times faster
            "head": "fast" if algo != "sac" else "sb3", "net": "mlp", "rescale_action": False,
            "hyperparams": {}, "hyperparams_file": None, "warm_start": None,
            "timesteps_trained": int(data["num_timesteps"]) if isinstance(data.get("num_timesteps"), int) else None,
            "imported": {"from": os.path.abspath(model),
                         "wrappers": None if dict_obs else "gymnasium.wrappers.FlattenObservation"}}
    check_side_car(meta, "the side-car")
    obs_space, act_space = model_spaces(meta)
    _check_spaces(model, data, obs_space, act_space, env_id)
    inputs = "dict" if dict_obs else "flat"
    names = {policy_class(algo, h, inputs=inputs).__name__ for h in ("sb3", "fast")}
    entry = data.get("policy_class") if isinstance(data.get("policy_class"), dict) else {}
    # SB3 records the class's own functions ("<function MultiInputActorCriticPolicy.__init__ at ...>")
    got = {m for v in entry.values() if isinstance(v, str) for m in re.findall(r"function (\w+)\.\w+ at", v)}
    if not got & names:
        want = "MultiInputPolicy" if dict_obs else "MlpPolicy"
        raise ValueError(f"{model!r}'s policy is {', '.join(sorted(got)) or 'unknown'}, not {algo}'s {want} "
                         f"({' or '.join(sorted(names))}): only {want} models on "
                         + ("the env's Dict observation" if dict_obs else "a flat observation") + " are imported")
    loaded = safe_load(model, meta)  # loads without unpickling anything (a ValueError otherwise)
    norm = None
    if vecnormalize is not None:
        norm = read_vecnormalize(vecnormalize, loaded.observation_space)
        meta["normalize"], meta["norm_obs"] = True, bool(norm["norm_obs"])
        if dict_obs and norm["norm_obs"]:
            meta["norm_obs_keys"] = list(norm["keys"])
        meta["imported"]["vecnormalize"] = os.path.abspath(vecnormalize)

    with OutputFolder(out, overwrite=overwrite, marks=("model.zip", SIDE_CAR), need_total=2 * os.path.getsize(model) + 1e5,
                      need_file=os.path.getsize(model)) as stage:
        shutil.copyfile(model, os.path.join(stage.path, "model.zip"))
        if norm is not None and norm["norm_obs"]:
            np.savez(os.path.join(stage.path, NORM_FILE), mean=norm["mean"], var=norm["var"], count=norm["count"],
                     clip_obs=norm["clip_obs"], epsilon=norm["epsilon"])
            check_norm_file(os.path.join(stage.path, NORM_FILE), norm["mean"].size)
        with open(os.path.join(stage.path, SIDE_CAR), "w") as f:
            json.dump(meta, f, indent=1)
    return meta


_ALGO_OF = {"PPO": "ppo", "A2C": "a2c", "SAC": "sac", "MaskablePPO": "maskable_ppo"}


def saved_model_spec(model, env_id: str, env_kwargs: dict, folder: str) -> str:
    """A loaded SB3 model given to :func:`clustergym.runner.evaluation.evaluate`: saved into ``folder`` and
    imported (:func:`import_model`, the comparison's env kwargs as those it was trained with); its ``sb3:``
    spec. Observations are the model's own (no VecNormalize statistics: import those with ``import-model``)."""
    algo = _ALGO_OF.get(type(model).__name__)
    if algo is None:
        raise ValueError(f"an SB3 {type(model).__name__} model is not evaluated: expected one of {', '.join(_ALGO_OF)}")
    os.makedirs(folder)
    path = os.path.join(folder, "model_object.zip")
    model.save(path)
    run = os.path.join(folder, "run")
    import_model(path, env_id, run, algo=algo, env_kwargs={k: v for k, v in env_kwargs.items() if k != "instances"})
    return f"sb3:{run}"


# -- VecNormalize statistics (the file VecNormalize.save writes: a pickle) --------------------------------------
class _Record:
    """An inert stand-in for a class the statistics file names (its state is kept as a dict, no code runs)."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state


# (module, name) the statistics loader builds: numpy's own array and dtype records (real), and inert records for
# SB3's VecNormalize and RunningMeanStd, gymnasium's spaces and the random generators they may hold.
_NUMPY = {("numpy", "dtype"), ("numpy", "ndarray"), ("numpy.core.multiarray", "_reconstruct"),
          ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
          ("numpy._core.multiarray", "scalar"), ("numpy.core.numeric", "_frombuffer"),
          ("numpy._core.numeric", "_frombuffer"), ("collections", "OrderedDict")}
_RECORD_MODULES = ("stable_baselines3.common.vec_env.vec_normalize", "stable_baselines3.common.running_mean_std",
                   "gymnasium.spaces.", "numpy.random.")


def _restricted_unpickler(f):
    import importlib
    import pickle

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in _NUMPY:
                return getattr(importlib.import_module(module), name)
            if any(module == m or (m.endswith(".") and module.startswith(m)) for m in _RECORD_MODULES):
                return _Record
            raise pickle.UnpicklingError(f"{module}.{name} is not read (only statistics are)")

    return Unpickler(f)


def read_vecnormalize(path: str, obs_space) -> dict:
    """The observation statistics of the file ``VecNormalize.save`` wrote, as plain arrays: ``mean`` and ``var``
    (flat; for a Dict observation the normalised keys' entries concatenated in ``keys`` order), ``count``,
    ``clip_obs``, ``epsilon``, ``norm_obs``. A ValueError naming what is wrong (a shape that does not fit
    ``obs_space``, a class that is not read)."""
    import gymnasium as gym

    try:
        with open(path, "rb") as f:
            obj = _restricted_unpickler(f).load()
    except FileNotFoundError:
        raise FileNotFoundError(f"no VecNormalize statistics at {path!r}") from None
    except Exception as exc:  # noqa: BLE001 - a pickle error, a truncated or foreign file
        raise ValueError(f"{path!r} is not a file VecNormalize.save wrote ({type(exc).__name__}: "
                         f"{str(exc)[:160]})") from None
    state = getattr(obj, "state", None)
    if not isinstance(obj, _Record) or not isinstance(state, dict) or "obs_rms" not in state:
        raise ValueError(f"{path!r} is not a file VecNormalize.save wrote (no observation statistics)")

    def arrays(rms, what):
        st = getattr(rms, "state", None)
        if not isinstance(st, dict) or "mean" not in st or "var" not in st:
            raise ValueError(f"{path!r}: the statistics of {what} are unreadable")
        return np.asarray(st["mean"], dtype=np.float64), np.asarray(st["var"], dtype=np.float64), float(st.get("count", 0))

    def scalar(key, default):
        v = state.get(key, default)
        return np.float64(v if isinstance(v, (int, float, np.floating)) else default)

    norm_obs = bool(state.get("norm_obs", True))
    out = {"norm_obs": norm_obs, "clip_obs": scalar("clip_obs", 10.0), "epsilon": scalar("epsilon", 1e-8)}
    rms = state["obs_rms"]
    if isinstance(obs_space, gym.spaces.Dict):
        if not isinstance(rms, dict):
            raise ValueError(f"{path!r} holds statistics of a flat observation; the model observes a Dict")
        keys = [k for k in (state.get("norm_obs_keys") or list(rms)) if k in rms]
        means, vars_, count = [], [], 0.0
        for k in keys:
            if k not in obs_space.spaces:
                raise ValueError(f"{path!r} normalises the key {k!r}, which the model does not observe")
            m, v, count = arrays(rms[k], k)
            if m.shape != tuple(obs_space[k].shape):
                raise ValueError(f"{path!r}: statistics of {k!r} have shape {m.shape}, the model's {k!r} is "
                                 f"{tuple(obs_space[k].shape)}")
            means.append(m.reshape(-1))
            vars_.append(v.reshape(-1))
        out.update(keys=keys, mean=np.concatenate(means) if means else np.zeros(0),
                   var=np.concatenate(vars_) if vars_ else np.zeros(0), count=np.float64(count))
    else:
        if isinstance(rms, dict):
            raise ValueError(f"{path!r} holds statistics of a Dict observation; the model observes a flat Box")
        m, v, count = arrays(rms, "the observation")
        if m.shape != tuple(obs_space.shape):
            raise ValueError(f"{path!r}: statistics of shape {m.shape}; the model observes {tuple(obs_space.shape)}")
        out.update(mean=m, var=v, count=np.float64(count))
    return out
