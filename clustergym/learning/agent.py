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
``"net": "entity"``, whose channel layout is plain JSON in the zip's ``policy_kwargs``; constants for training-only schedules and buffers) and refuses a file with
any other pickled entry; the weights are read with ``torch.load(weights_only=True)`` (SB3's default).
Normalisation statistics are an ``.npz`` read with ``allow_pickle=False``. Still: load models only from
sources you trust.
"""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym
import numpy as np

from clustergym.agent import BaseAgent, env_family
from clustergym.learning.pipeline import LAYOUTS, ObsPipeline, box_bounds, sb3_mask, unscale_action
from clustergym.learning.training import (HEADS, NETS, NORM_FILE, SIDE_CAR, algo_class, make_train_env, obs_layout,
                                          policy_class)

__all__ = ["SB3Agent", "safe_load", "check_side_car", "resolve_model_path", "PRETRAINED_DIR", "pretrained_models"]

# Models shipped with clustergym (``clustergym drl --export-pretrained`` writes them): sb3:pretrained/<EnvName>
PRETRAINED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained")
_SHORT = {"p1": "MultiServerChannel-v0", "p2": "MultiServerAllocation-v0", "p3": "RingAllReduce-v0",
          "p4": "ApproxJobs-v0"}


def pretrained_models() -> list[str]:
    """The env names with a shipped model (``sb3:pretrained/<name>``)."""
    if not os.path.isdir(PRETRAINED_DIR):
        return []
    return sorted(d for d in os.listdir(PRETRAINED_DIR) if os.path.exists(os.path.join(PRETRAINED_DIR, d, "model.zip")))


def resolve_model_path(path: str) -> str:
    """``pretrained/<env>`` (``MultiServerChannel-v0``, ``clustergym/MultiServerChannel-v0``, ``MultiServerChannel``
    or ``p1``; optionally ``/model.zip``) -> the shipped model, unless a file of that name exists; other paths
    unchanged."""
    if os.path.exists(path):
        return path
    norm = path.replace(os.sep, "/")
    if not norm.startswith("pretrained/"):
        return path
    name = norm[len("pretrained/"):].strip("/")
    if name.endswith("/model.zip"):
        name = name[: -len("/model.zip")]
    name = name.split("/")[-1]
    name = _SHORT.get(name.lower(), name)
    if not name.endswith("-v0"):
        name += "-v0"
    model = os.path.join(PRETRAINED_DIR, name, "model.zip")
    if not os.path.exists(model):
        shipped = pretrained_models()
        raise FileNotFoundError(f"no pretrained model {path!r}: shipped are "
                                f"{', '.join('pretrained/' + m for m in shipped) or 'none'}")
    return model


def check_side_car(meta, side: str) -> None:
    """The side-car is data from a file: its env id must be a registered clustergym id (gym.make would
    import any module named in an id like ``"pkg:Env-v0"``) and its family that id's family."""
    from clustergym.family import env_ids

    if not isinstance(meta, dict):
        raise ValueError(f"{side}: expected a JSON object")
    missing = [k for k in ("env_id", "family", "algo", "stats", "env_kwargs") if k not in meta]
    if missing:
        raise ValueError(f"{side}: missing field(s) {', '.join(missing)}; was it written by 'clustergym train'?")
    if meta["env_id"] not in env_ids():
        raise ValueError(f"{side}: env_id {meta['env_id']!r} is not a clustergym env "
                         f"(expected one of {', '.join(env_ids())})")
    if meta["family"] != env_family(meta["env_id"]):
        raise ValueError(f"{side}: family {meta['family']!r} does not match env_id {meta['env_id']!r}")
    if not isinstance(meta["env_kwargs"], dict):
        raise ValueError(f"{side}: env_kwargs must be an object")
    if meta.get("head", "sb3") not in HEADS:
        raise ValueError(f"{side}: head {meta['head']!r} is invalid: expected one of {', '.join(HEADS)}")
    if meta.get("obs_layout", "legacy") not in LAYOUTS:
        raise ValueError(f"{side}: obs_layout {meta['obs_layout']!r} is invalid: expected one of {', '.join(LAYOUTS)}")
    if meta.get("net", "mlp") not in NETS:
        raise ValueError(f"{side}: net {meta['net']!r} is invalid: expected one of {', '.join(NETS)}")


class SB3Agent(BaseAgent):
    """A saved SB3 model as an agent: ``make("sb3:runs/ppo-p1/model.zip")``.

    Applies the observation pipeline and ``VecNormalize`` statistics the model was trained with,
    keeps the empirical statistics from public feedback (``update``), maps [-1, 1] actions back to
    device units for Box actions, and passes action masks (from ``info["action_mask"]``) to
    MaskablePPO. ``deterministic`` (default True) selects the policy's mode.
    """

    name = "sb3"

    def __init__(self, path: str, deterministic: bool = True):
        path = resolve_model_path(path)  # sb3:pretrained/<env>: a model shipped with clustergym
        run_dir = os.path.dirname(os.path.abspath(path))
        side = os.path.join(run_dir, SIDE_CAR)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no SB3 model at {path!r}")
        if not os.path.exists(side):
            raise ValueError(f"{path!r} has no {SIDE_CAR} beside it: was it written by 'clustergym train'?")
        with open(side) as f:
            try:
                self.meta = json.load(f)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{side}: not valid JSON ({exc})") from None
        check_side_car(self.meta, side)
        self.path = path
        self.deterministic = bool(deterministic)
        self.family = self.meta["family"]
        self.families = (self.family,)
        self.model = safe_load(path, self.meta)
        self._norm = None
        if self.meta.get("normalize") and self.meta.get("norm_obs", True):  # net="entity": rewards only
            norm = os.path.join(run_dir, NORM_FILE)
            if not os.path.exists(norm):
                raise ValueError(f"{run_dir!r} has no {NORM_FILE} (a run written by an older clustergym keeps its "
                                 "statistics in a pickle, which is not loaded: train it again)")
            with np.load(norm, allow_pickle=False) as z:
                self._norm = {k: np.asarray(z[k], dtype=np.float64) for k in ("mean", "var", "clip_obs", "epsilon")}

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        from clustergym.learning.instances import model_padding

        space = _obs_space_for(self.meta, problem)
        pad = model_padding(self.meta)  # a pool-trained model acts on the env padded to its maxima
        self.pipeline = ObsPipeline(self.family, problem, space, self.meta["stats"], pad=pad,
                                    layout=obs_layout(self.meta))
        expected = self.model.observation_space.shape
        if (self.pipeline.size,) != tuple(expected):
            raise ValueError(f"model {self.path!r} expects observations of size {expected[0]}, this env gives "
                             f"{self.pipeline.size}: evaluate it on the scenario it was trained on")
        self._box = None
        if self.meta.get("rescale_action"):
            self._box = box_bounds(self.family, problem, pad=pad)
        self._started = False

    def act(self, obs, info):
        x = self.pipeline.observe(obs) if self._started else self.pipeline.reset(obs)
        self._started = True
        if self._norm is not None:  # VecNormalize.normalize_obs, from the saved statistics
            n = self._norm
            x = np.clip((x - n["mean"]) / np.sqrt(n["var"] + n["epsilon"]), -n["clip_obs"], n["clip_obs"]).astype(
                np.float32)
        kw = {}
        if self.meta["algo"] == "maskable_ppo":
            kw["action_masks"] = sb3_mask(self.family, info)
        a, _ = self.model.predict(x, deterministic=self.deterministic, **kw)
        if self._box is not None:
            lo, hi = self._box
            a = unscale_action(a, lo, hi)
        return a

    def update(self, obs, action, reward, next_obs, info) -> None:
        pass  # the statistics are in the observation


# Pickled entries of a model.zip that the sb3: agent supplies itself (everything else is refused).
_STATE_ENTRIES = ("_last_obs", "_last_episode_starts", "_last_original_obs", "ep_info_buffer", "ep_success_buffer",
                  "rollout_buffer_class", "replay_buffer_class", "_last_dones")


def safe_load(path: str, meta: dict):
    """Load a saved SB3 model without unpickling anything from the file (module docstring)."""
    import zipfile

    cls = algo_class(meta["algo"])
    try:
        with zipfile.ZipFile(path) as z:
            data = json.loads(z.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path!r} is not a model saved by SB3 ({exc})") from None
    env = make_train_env(meta["env_id"], meta["env_kwargs"], algo=meta["algo"], stats=bool(meta["stats"]),
                         layout=obs_layout(meta))
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    lr = data.get("learning_rate")
    lr = float(lr) if isinstance(lr, (int, float)) else 3e-4
    custom: dict[str, Any] = {}
    for key, val in data.items():
        if not (isinstance(val, dict) and ":serialized:" in val):
            continue
        if key == "policy_class":
            # older runs: SB3's MlpPolicy; "net": "entity": the per-entity policy (its layout is JSON in policy_kwargs)
            custom[key] = policy_class(meta["algo"], meta.get("head", "sb3"), meta.get("net", "mlp"))
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
    return cls.load(path, device="cpu", custom_objects=custom)


class _Constant:
    """A constant schedule (picklable, unlike a lambda)."""

    def __init__(self, value: float):
        self.value = float(value)

    def __call__(self, _progress: float) -> float:
        return self.value


def _obs_space_for(meta: dict, problem) -> gym.spaces.Space:
    """The env's observation space for this problem (a public function of the problem)."""
    env = gym.make(meta["env_id"], **{**meta["env_kwargs"], "oracle": False})
    space = env.observation_space
    env.close()
    return space
