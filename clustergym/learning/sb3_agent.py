"""Saved models as agents: ``make("sb3:runs/ppo-p1/model.zip")`` (:class:`SB3Agent`) and the no-pickle loader.

The agent applies the observation pipeline (:class:`clustergym.learning.pipeline.ObsPipeline`) and the
``VecNormalize`` statistics the model was trained with, so it sees at evaluation exactly what it saw
in training.

**Trusted files only.** A ``model.zip`` written by SB3 carries pickled Python objects (cloudpickle),
and unpickling a crafted file runs code. The ``sb3:`` agent therefore never unpickles them: it reads
the zip's ``data`` JSON, supplies every pickled entry itself (the spaces from the env the side-car
names, which must be a registered clustergym id; the policy class our code trains with — the fast-head
policy of :mod:`clustergym.learning.heads` when the side-car says ``"head": "fast"``, else the
algorithm's own ``MlpPolicy``; the per-entity policy of :mod:`clustergym.learning.entity` when it says
``"net": "entity"``, whose channel layout is plain JSON in the zip's ``policy_kwargs``; the decoder policy of
:mod:`clustergym.learning.autoregressive` when it says ``"net": "autoregressive"``, its layout likewise; constants for training-only schedules and buffers) and refuses a file with
any other pickled entry; the weights are read with ``torch.load(weights_only=True)`` (SB3's default).
Normalisation statistics are an ``.npz`` read with ``allow_pickle=False``; the side-car and the statistics are
read and checked by :mod:`clustergym.learning.sidecar`. Still: load models only from sources you trust.
"""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym
import numpy as np

from clustergym.core.agent import BaseAgent
from clustergym.core.family import family_specs
from clustergym.learning.algos import HEADS, NORM_FILE, RECURRENT, SIDE_CAR, algo_class, obs_layout
from clustergym.learning.instances import (check_model_fits, grown_padding, imported_space_mismatch, model_env_kwargs,
                                          model_padding, pad_kwargs_of)
from clustergym.learning.policies import policy_class
from clustergym.learning.hp_checks import check_finite_weights
from clustergym.learning.sidecar import check_norm_file, read_model_data, read_side_car
from clustergym.learning.train_envs import make_train_env
from clustergym.learning.pipeline import ObsPipeline, box_bounds, sb3_mask, unscale_action
from clustergym.learning.privileged import zero_padded

__all__ = ["SB3Agent", "safe_load", "resolve_model_path", "PRETRAINED_DIR", "pretrained_models"]


# Models shipped with clustergym (``clustergym drl --export-pretrained`` writes them): sb3:pretrained/<EnvName>
PRETRAINED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained")


def _short_names() -> dict[str, str]:
    """``pretrained/p1`` etc.: every registered family's ``number``, lower case -> the name of its first env id
    (the shipped families first: a plugin's number never shadows theirs)."""
    out: dict[str, str] = {}
    for spec in family_specs():
        if spec.envs:
            out.setdefault(spec.number.lower(), spec.env_ids[0].split("/")[-1])
    return out


def pretrained_models() -> list[str]:
    """The env names with a shipped model (``sb3:pretrained/<name>``)."""
    if not os.path.isdir(PRETRAINED_DIR):
        return []
    return sorted(d for d in os.listdir(PRETRAINED_DIR) if os.path.exists(os.path.join(PRETRAINED_DIR, d, "model.zip")))


def resolve_model_path(path: str) -> str:
    """``pretrained/<env>`` (``MultiServerChannel-v0``, ``clustergym/MultiServerChannel-v0``, ``MultiServerChannel``
    or ``p1``; optionally ``/model.zip``) -> the shipped model, unless a file of that name exists; a run folder
    -> its ``model.zip``; other paths unchanged."""
    if os.path.isdir(path):  # sb3:DIR: the run folder clustergym train wrote
        if os.path.lexists(os.path.join(path, "model.zip")):
            return os.path.join(path, "model.zip")
        raise FileNotFoundError(f"no SB3 model in the folder {path!r} (expected {os.path.join(path, 'model.zip')})")
    if os.path.exists(path):
        return path
    norm = path.replace(os.sep, "/")
    if not norm.startswith("pretrained/"):
        return path
    name = norm[len("pretrained/"):].strip("/")
    if name.endswith("/model.zip"):
        name = name[: -len("/model.zip")]
    name = name.split("/")[-1]
    name = _short_names().get(name.lower(), name)
    if not name.endswith("-v0") and not os.path.exists(os.path.join(PRETRAINED_DIR, name, "model.zip")):
        name += "-v0"  # pretrained/ApproxJobs; a scenario's own model (RingAllReduce-v0-gpu-short) keeps its name
    model = os.path.join(PRETRAINED_DIR, name, "model.zip")
    if not os.path.exists(model):
        shipped = pretrained_models()
        raise FileNotFoundError(f"no pretrained model {path!r}: shipped are "
                                f"{', '.join('pretrained/' + m for m in shipped) or 'none'}")
    return model


class SB3Agent(BaseAgent):
    """A saved SB3 model as an agent: ``make("sb3:runs/ppo-p1/model.zip")``.

    Applies the observation pipeline and ``VecNormalize`` statistics the model was trained with,
    keeps the empirical statistics from public feedback (``update``), maps [-1, 1] actions back to
    device units for Box actions, and passes action masks (from ``info["action_mask"]``) to
    MaskablePPO. ``deterministic`` (default True) selects the policy's mode.
    """

    name = "sb3"

    def __init__(self, path: str, deterministic: bool = True):
        given = path
        path = resolve_model_path(path)  # sb3:pretrained/<env>: a model shipped with clustergym; sb3:DIR: DIR/model.zip
        run_dir = os.path.dirname(os.path.abspath(path))
        side = os.path.join(run_dir, SIDE_CAR)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no SB3 model at {path!r}")
        if not os.path.exists(side):
            where = f"in the folder {given!r}" if os.path.isdir(given) else f"beside {path!r}"
            raise ValueError(f"no {SIDE_CAR} {where}: a model trained with plain SB3 needs one: clustergym "
                             f"import-model {path} --env ENV_ID --out DIR (docs/drl.md)")
        self.meta = read_side_car(side)
        self.path = path
        self.deterministic = bool(deterministic)
        self.family = self.meta["family"]
        self.families = (self.family,)
        self.model = safe_load(path, self.meta)
        self._policies = {self._pad_key(model_padding(self.meta)): self.model.policy}  # per padding (size-free nets)
        self._env_pads: dict | None = None  # the padding of the env the runner built for this agent
        self._recurrent = self.meta["algo"] in RECURRENT
        self._state = None  # a recurrent policy's state (LSTM hidden and cell), reset with each episode
        self._norm = None
        norm = os.path.join(run_dir, NORM_FILE)
        if self.meta.get("normalize") and self.meta.get("norm_obs", True):  # net="entity": rewards only
            if not os.path.exists(norm):
                raise ValueError(f"{run_dir!r} has no {NORM_FILE} (a run written by an older clustergym keeps its "
                                 "statistics in a pickle, which is not loaded: train it again)")
            self._norm = check_norm_file(norm, _norm_size(self.meta, self.model.observation_space))
        elif os.path.exists(norm) and not self.meta.get("normalize"):
            raise ValueError(f"{side} says normalize: false, but {NORM_FILE} lies beside it: the model was trained on "
                             "normalised observations? set normalize to true, or remove the statistics file")

    # clustergym.core.agent.EvaluationHooks: what the runner asks a trained model (clustergym.learning.instances)
    def pinned_instance(self) -> int | None:
        """The instance a single-instance model trained on (its spaces depend on it), None for a pool-trained one."""
        if self.meta.get("instances") is not None:
            return None
        return int(self.meta.get("env_kwargs", {}).get("scenario_seed", 0))

    @property
    def size_free(self) -> bool:
        """Whether the model's weights fit any instance size: the per-entity network shares them across its
        entities (its layout is rebuilt for the padding it acts in); a flat MLP's first layer has one column
        per padded entry."""
        return self.meta.get("net") == "entity"

    def eval_env_kwargs(self, spec: str, env_id: str, env_kwargs: dict, instances) -> dict:
        """Check that every instance fits the model (:func:`~clustergym.learning.instances.check_model_fits`:
        the scenario, and the padding unless the model is :attr:`size_free`); the model's padding (grown to the
        largest of ``instances`` for a size-free model) and action kwargs
        (:func:`~clustergym.learning.instances.model_env_kwargs`)."""
        imported = self.meta.get("imported") is not None  # plain SB3: it fits wherever its spaces do
        check_model_fits(self.meta, spec, env_id, env_kwargs, instances, sizes=not (self.size_free or imported))
        diff = self.instance_mismatch(spec, env_id, env_kwargs, instances) if imported else None
        if diff:
            raise ValueError(diff)
        kw = model_env_kwargs(self.meta)
        if self.size_free:
            kw.update(grown_padding(self.meta, env_id, env_kwargs, instances))
        return kw

    def instance_mismatch(self, spec: str, env_id: str, env_kwargs: dict, instances) -> str | None:
        """Why the model cannot act on some instance of ``instances`` (one line naming the space, the model's
        shape and the env's), None when it can: a model imported from plain SB3 acts on every instance whose
        spaces are the ones it was built for; one trained here on a single instance acts only there."""
        if self.meta.get("imported") is None:
            return None if set(instances) <= {self.pinned_instance()} else (
                f"model {spec!r} was trained on instance {self.pinned_instance()} (scenario_seed) and acts only there")
        check_model_fits(self.meta, spec, env_id, env_kwargs, instances, sizes=False)
        diff = imported_space_mismatch(self.meta, self.model.observation_space, self.model.action_space, env_id,
                                       env_kwargs, instances)
        return None if diff is None else f"model {spec!r} cannot act on {diff}"

    def bind_env_kwargs(self, env_kwargs: dict) -> None:
        """The env kwargs of the env this agent will act in (the runner calls it before the episode): a
        size-free model then acts at that env's padding."""
        names = pad_kwargs_of(self.meta["env_id"])
        pads = {n: env_kwargs[n] for n in names if env_kwargs.get(n) is not None}
        self._env_pads = pads if self.size_free and pads else None

    @staticmethod
    def _pad_key(pad: dict) -> tuple:
        return tuple(sorted((k, int(v)) for k, v in pad.items()))

    def _policy_for(self, pad: dict):
        """The model's policy at padding ``pad``: the loaded one at its own padding, else the same weights in a
        policy built for ``pad`` (a size-free model: its entity layout, spaces and index buffers change, its
        weights do not)."""
        key = self._pad_key(pad)
        if key not in self._policies:
            from clustergym.learning.entity import entity_layout

            meta = {**self.meta, "env_kwargs": {**self.meta["env_kwargs"], **pad}}
            probe = make_train_env(meta["env_id"], meta["env_kwargs"], algo=meta["algo"], stats=bool(meta["stats"]),
                                   layout=obs_layout(meta))
            old = self.model.policy
            params = {**old._get_constructor_parameters(), "observation_space": probe.observation_space,
                      "action_space": probe.action_space, "entity": entity_layout(probe)}
            probe.close()
            new = type(old)(**params)
            new.load_state_dict(old.state_dict())
            self._policies[key] = new.to(old.device).eval()
        return self._policies[key]

    def trained_on(self, instance, pinned: bool) -> bool:
        """Whether ``instance`` is one the model trained on (its pool, or its one instance)."""
        pool = self.meta.get("instances")
        if pool is not None:
            return instance in pool
        return pinned or instance == int(self.meta.get("env_kwargs", {}).get("scenario_seed", 0))

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        pad = model_padding(self.meta)  # a pool-trained model acts on the env padded to its maxima ...
        if self._env_pads is not None:  # ... a size-free one at the padding of the env it was given
            pad = {**pad, **self._env_pads}
        self.model.policy = self._policy_for(pad)
        self._state = None
        space = _obs_space_for(self.meta, problem, pad)
        self._box = None
        self._started = False
        if self.meta.get("obs") == "dict":  # imported MultiInputPolicy model: the env's Dict observation as it is
            self.pipeline = None
            _check_dict_fits(self.path, self.model.observation_space, space)
            return
        flat = self.meta.get("obs", "pipeline") == "flatten"  # imported: FlattenObservation, every key
        stats = True if flat else bool(self.meta["stats"])
        self.pipeline = ObsPipeline(self.family, problem, space, stats, pad=pad,
                                    layout="full" if flat else obs_layout(self.meta),
                                    time_cap=None if flat else self.meta.get("time_cap"))
        self.pipeline = zero_padded(self.pipeline, self.model.policy)  # privileged="critic": the critic's inputs
        expected = self.model.policy.observation_space.shape
        if (self.pipeline.size,) != tuple(expected):
            raise ValueError(f"model {self.path!r} expects observations of size {expected[0]}, this env gives "
                             f"{self.pipeline.size}: evaluate it on the scenario it was trained on")
        self._box = None
        if self.meta.get("rescale_action"):
            self._box = box_bounds(self.family, problem, pad=pad)
        self._started = False

    def act(self, obs, info):
        if self.pipeline is None:  # obs "dict"
            x = _normalize_dict(obs, self._norm, self.meta.get("norm_obs_keys"))
        else:
            x = self.pipeline.observe(obs) if self._started else self.pipeline.reset(obs)
            if self._norm is not None:  # VecNormalize.normalize_obs, from the saved statistics
                n = self._norm
                x = np.clip((x - n["mean"]) / np.sqrt(n["var"] + n["epsilon"]), -n["clip_obs"],
                            n["clip_obs"]).astype(np.float32)
        kw = {}
        if self.meta["algo"] == "maskable_ppo":
            kw["action_masks"] = sb3_mask(self.family, info)
        if self._recurrent:  # the state carries the episode so far; a new episode starts from zeros
            kw.update(state=self._state, episode_start=np.array([not self._started]))
        self._started = True
        a, state = _one_thread(self.model.predict, x, deterministic=self.deterministic, **kw)
        if self._recurrent:
            self._state = state
        if self._box is not None:
            lo, hi = self._box
            a = unscale_action(a, lo, hi)
        return a

    def update(self, obs, action, reward, next_obs, info) -> None:
        pass  # the statistics are in the observation


def _one_thread(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on one torch thread, the caller's setting restored after. A slot's forward pass is
    one small batch, whose work two threads split at a loss: 500 slots of the shipped P4 model took 6.0 s on two
    threads and 1.25 s on one, on this 2-core machine with other jobs running (switching costs 0.6 µs)."""
    import torch

    before = torch.get_num_threads()
    if before == 1:
        return fn(*args, **kwargs)
    torch.set_num_threads(1)
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_num_threads(before)


# Pickled entries of a model.zip that the sb3: agent supplies itself (everything else is refused).
_STATE_ENTRIES = ("_last_obs", "_last_episode_starts", "_last_original_obs", "ep_info_buffer", "ep_success_buffer",
                  "rollout_buffer_class", "replay_buffer_class", "_last_dones", "_last_lstm_states")


def _skip_init(custom: dict, data: dict) -> None:
    """No orthogonal initialisation of an actor-critic policy that is about to receive its saved weights (SB3 builds
    the policy, initialises it, then loads the state dict: the QR decompositions of the initialisation were a
    quarter of a model's load time)."""
    from stable_baselines3.common.policies import ActorCriticPolicy

    pol = custom.get("policy_class")
    kw = custom.get("policy_kwargs", data.get("policy_kwargs"))
    if isinstance(pol, type) and issubclass(pol, ActorCriticPolicy) and isinstance(kw, dict) and ":serialized:" not in kw:
        custom["policy_kwargs"] = {**kw, "ortho_init": False}


def safe_load(path: str, meta: dict):
    """Load a saved SB3 model without unpickling anything from the file (module docstring)."""
    import zipfile

    cls = algo_class(meta["algo"])
    try:
        with zipfile.ZipFile(path) as z:
            data = read_model_data(z, path)  # size and nesting bounded
    except (OSError, KeyError, json.JSONDecodeError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path!r} is not a model saved by SB3 ({exc})") from None
    _check_algo_fields(path, data, meta["algo"])
    obs_space, act_space = model_spaces(meta)
    lr = data.get("learning_rate")
    lr = float(lr) if isinstance(lr, (int, float)) else 3e-4
    custom: dict[str, Any] = {}
    for key, val in data.items():
        if not (isinstance(val, dict) and ":serialized:" in val):
            continue
        if key == "policy_class":
            # older runs: SB3's MlpPolicy; "net": "entity": the per-entity policy (its layout is JSON in policy_kwargs)
            custom[key] = policy_class(meta["algo"], meta.get("head", "sb3"), meta.get("net", "mlp"), _inputs(meta),
                                       meta.get("privileged", "none"))
            _check_policy_class(path, val, custom[key], meta)
        elif key == "observation_space":
            custom[key] = obs_space
        elif key == "action_space":
            custom[key] = act_space
        elif key == "lr_schedule":
            custom[key] = _Constant(lr)
        elif key == "policy_kwargs":  # pickled only because of A2C's optimizer class: rebuild it as A2C does
            hp = meta.get("hyperparams") or {}
            kw = dict(hp.get("policy_kwargs") or {})
            if meta["algo"] != "a2c" or not hp.get("use_rms_prop", True) or "optimizer_class" in kw:
                raise ValueError(f"{path!r}: pickled policy_kwargs are only rebuilt for A2C's RMSprop")
            import torch

            okw = val.get("optimizer_kwargs")
            kw["optimizer_class"] = torch.optim.RMSprop
            kw["optimizer_kwargs"] = okw if isinstance(okw, dict) else dict(
                alpha=0.99, eps=float(hp.get("rms_prop_eps", 1e-5)), weight_decay=0)
            custom[key] = kw
        elif key == "train_freq":  # SAC, training only
            from stable_baselines3.common.type_aliases import TrainFreq, TrainFrequencyUnit

            custom[key] = TrainFreq(1, TrainFrequencyUnit.STEP)
        elif key in ("clip_range", "clip_range_vf"):  # training only; the value does not matter for acting
            custom[key] = 0.2
        elif key in _STATE_ENTRIES:
            custom[key] = None
        else:
            raise ValueError(f"{path!r} holds a pickled entry {key!r} that the sb3: agent does not unpickle "
                             "(pickles can run code)")
    _skip_init(custom, data)
    try:
        model = cls.load(path, device="cpu", custom_objects=custom)
    except Exception as exc:  # noqa: BLE001 - a pickled .pth, another algorithm's weights, a truncated file
        why = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path!r} does not load as {meta['algo']} (the side-car's algorithm) with the no-pickle "
                         f"loader: {type(exc).__name__}: {why}") from None
    check_finite_weights(model, f"{path!r} is not loaded")  # a diverged model acts as garbage
    return model


# Fields SB3 writes to a model's data only for some algorithms: a side-car whose algorithm does not match the file.
_ALGO_FIELDS = {"ppo": ("n_epochs", "clip_range"), "maskable_ppo": ("n_epochs", "clip_range"),
                "recurrent_ppo": ("n_epochs", "clip_range"), "a2c": ("n_steps",),
                "sac": ("tau", "train_freq")}
_NOT_FIELDS = {"a2c": ("n_epochs", "tau"), "ppo": ("tau",), "maskable_ppo": ("tau",), "recurrent_ppo": ("tau",),
               "sac": ("n_epochs",)}


def _check_algo_fields(path: str, data: dict, algo: str) -> None:
    missing = [k for k in _ALGO_FIELDS[algo] if k not in data]
    extra = [k for k in _NOT_FIELDS[algo] if k in data]
    if missing or extra:
        raise ValueError(f"{path!r} was not saved by {algo} (the side-car's algorithm): it "
                         + (f"lacks {', '.join(missing)}" if missing else f"has {', '.join(extra)}")
                         + "; fix algo in the side-car")


def _check_policy_class(path: str, entry: dict, cls, meta: dict) -> None:
    """The zip's readable record of its policy class (SB3 writes the class's own attributes beside the pickle:
    ``<function FastActorCriticPolicy.forward at ...>``) must name a policy of the side-car's algorithm and net
    (either action head: they share the weights): another algorithm's weights could otherwise load and act
    wrongly."""
    import re

    names = {m for v in entry.values() if isinstance(v, str) for m in re.findall(r"function (\w+)\.\w+ at", v)}
    if not names:
        return
    net = meta.get("net", "mlp")
    ok = {c.__qualname__.rsplit(".", 1)[-1] for h in HEADS for c in policy_class(meta["algo"], h, net, _inputs(meta)).__mro__}
    if not names & ok:
        raise ValueError(f"{path!r} holds a {sorted(names)[0]} policy; the side-car's algo {meta['algo']!r} (net "
                         f"{net!r}) loads a {cls.__qualname__.rsplit('.', 1)[-1]}: fix the side-car")


def model_spaces(meta: dict) -> tuple[gym.spaces.Space, gym.spaces.Space]:
    """(observation space, action space) the model acts in: the training env's (``obs: pipeline``), or a plain
    SB3 model's ``FlattenObservation(gym.make(env_id, **env_kwargs))`` (``obs: flatten``)."""
    if meta.get("obs", "pipeline") == "flatten":
        env = gym.wrappers.FlattenObservation(gym.make(meta["env_id"], **{**meta["env_kwargs"], "oracle": False}))
    elif meta.get("obs") == "dict":
        env = gym.make(meta["env_id"], **{**meta["env_kwargs"], "oracle": False})
    else:
        env = make_train_env(meta["env_id"], meta["env_kwargs"], algo=meta["algo"], stats=bool(meta["stats"]),
                             layout=obs_layout(meta), privileged=meta.get("privileged", "none"))
    spaces = env.observation_space, env.action_space
    env.close()
    return spaces


def _inputs(meta: dict) -> str:
    """The policy's input (:data:`clustergym.learning.policies.INPUTS`): the env's Dict for ``obs: dict``."""
    return "dict" if meta.get("obs") == "dict" else "flat"


def _norm_size(meta: dict, space: gym.spaces.Space) -> int:
    """The length of the saved statistics: the flat observation's, or (``obs: dict``) the entries of the keys
    ``norm_obs_keys`` names, concatenated in that order."""
    if meta.get("obs") != "dict":
        return int(np.prod(space.shape))
    keys = meta.get("norm_obs_keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) and k in space.spaces for k in keys):
        raise ValueError(f"norm_obs_keys {keys!r} must list keys of the observation ({', '.join(space.spaces)})")
    return int(sum(np.prod(space[k].shape) for k in keys))


def _normalize_dict(obs: dict, norm: dict | None, keys) -> dict:
    """VecNormalize.normalize_obs on a Dict observation: each key of ``keys`` with its slice of the statistics."""
    if norm is None:
        return obs
    out, at = dict(obs), 0
    for k in keys:
        x = np.asarray(obs[k], dtype=np.float64)
        n = x.size
        mean, var = norm["mean"][at:at + n].reshape(x.shape), norm["var"][at:at + n].reshape(x.shape)
        at += n
        out[k] = np.clip((x - mean) / np.sqrt(var + norm["epsilon"]), -norm["clip_obs"], norm["clip_obs"]).astype(
            np.float32)
    return out


def dict_space_differences(model_space: gym.spaces.Space, env_space: gym.spaces.Space) -> list[str]:
    """What differs between a Dict model's observation space and the env's, key by key (kind, shape, choices):
    empty when the model takes the env's observations. Box bounds are not compared (the network does not read
    them; ``t``'s bound is the horizon)."""
    if not isinstance(model_space, gym.spaces.Dict) or not isinstance(env_space, gym.spaces.Dict):
        return [f"the model observes a {type(model_space).__name__}, the env gives a {type(env_space).__name__}"]
    out = []
    missing = [k for k in env_space.spaces if k not in model_space.spaces]
    extra = [k for k in model_space.spaces if k not in env_space.spaces]
    if missing:
        out.append(f"keys the env gives and the model lacks: {', '.join(missing)}")
    if extra:
        out.append(f"keys the model expects and the env lacks: {', '.join(extra)}")
    for k in model_space.spaces:
        if k in env_space.spaces and space_signature(model_space[k]) != space_signature(env_space[k]):
            out.append(f"{k}: model {space_signature(model_space[k])}, env {space_signature(env_space[k])}")
    return out


def space_signature(space: gym.spaces.Space) -> str:
    """A space's kind and shape (and choice counts for discrete spaces), as compared for a Dict model."""
    name = type(space).__name__
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec)
        return f"{name}{tuple(nvec.shape)} with {int(nvec.sum())} choices in all"
    if isinstance(space, gym.spaces.Discrete):
        return f"{name}({int(space.n)})"
    return f"{name}{tuple(space.shape or ())}"


def _check_dict_fits(path: str, model_space, env_space) -> None:
    diff = dict_space_differences(model_space, env_space)
    if diff:
        raise ValueError(f"model {path!r} does not take this env's observations: {'; '.join(diff)}: evaluate it on "
                         "the scenario it was trained on")


class _Constant:
    """A constant schedule (picklable, unlike a lambda)."""

    def __init__(self, value: float):
        self.value = float(value)

    def __call__(self, _progress: float) -> float:
        return self.value


def _obs_space_for(meta: dict, problem, pad: dict | None = None) -> gym.spaces.Space:
    """The env's observation space for this problem (a public function of the problem) at padding ``pad``
    (default: the model's own)."""
    env = gym.make(meta["env_id"], **{**meta["env_kwargs"], **(pad or {}), "oracle": False})
    space = env.observation_space
    env.close()
    return space
