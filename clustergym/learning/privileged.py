"""Privileged training (``clustergym train --privileged critic``, ``--shaping oracle``): training signals from
what the simulator knows, never an input of the acting policy.

``privileged="critic"`` (an asymmetric actor-critic): the training env appends the family's privileged features
(``drl_hooks.privileged_features(env)``: a fixed-size float vector read from the env's hidden truth, e.g. each
channel's true mean utility) to the flat public observation (:class:`PrivilegedObs`). The policy
(:func:`privileged_policy`) splits its MLP (:func:`split_extractor_class`): the actor reads the first ``public_dim``
entries only, by construction, the critic the whole vector. ``VecNormalize`` normalises every entry on its own, so
the actor's normalised public part is the same with or without the privileged slice. At evaluation (the ``sb3:``
agent) there are no privileged features: the agent appends zeros, which the actor never reads.

``shaping="oracle"``: the training reward of a slot is the env's reward minus the family's per-slot oracle value
of that slot (``info["metrics"]["oracle_reward"]``, the env built with ``oracle=True``; :class:`OracleShaping`);
only families whose env declares that per-slot metric take it. Evaluation rewards are unchanged.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from clustergym.learning.pipeline import hook

__all__ = ["PRIVILEGED", "SHAPING", "OracleShaping", "PrivilegedObs", "check_privileged",
           "check_shaping", "options", "zero_padded", "privileged_policy", "resolve", "privileged_vector",
           "split_extractor_class"]

PRIVILEGED = ("none", "critic")  # what the critic sees besides the public observation
SHAPING = ("none", "oracle")  # the training reward's form
PRIVILEGED_ALGOS = ("ppo", "a2c", "maskable_ppo")  # actor-critic algorithms with SB3's MlpExtractor


def privileged_vector(env: gym.Env) -> np.ndarray:
    """The family's privileged features of ``env``'s current instance (float32, fixed size); a ValueError where
    the family defines none."""
    u: Any = env.unwrapped
    fn = hook(u.family, "privileged_features")
    if fn is None:
        raise ValueError(f"privileged='critic': the family {u.family!r} defines no privileged features "
                         "(drl_hooks.privileged_features)")
    return np.asarray(fn(u), dtype=np.float32).reshape(-1)


def check_privileged(privileged: str, *, env_id: str, algo: str, net: str, warm_start: str | None) -> None:
    """ValueError (one line) unless ``privileged`` can be trained with this algorithm, net and env."""
    if privileged not in PRIVILEGED:
        raise ValueError(f"privileged={privileged!r} is invalid: expected one of {', '.join(PRIVILEGED)}")
    if privileged == "none":
        return
    if algo not in PRIVILEGED_ALGOS:
        raise ValueError(f"privileged={privileged!r} needs an actor-critic algorithm ({', '.join(PRIVILEGED_ALGOS)}), "
                         f"not {algo!r}")
    if net != "mlp":
        raise ValueError(f"privileged={privileged!r} is available with net='mlp' only, not net={net!r}")
    if warm_start is not None:
        raise ValueError(f"privileged={privileged!r} cannot be combined with warm_start (the clone's network reads "
                         "public observations only)")
    env = gym.make(env_id, oracle=False)
    try:
        privileged_vector(env)
    finally:
        env.close()


def check_shaping(shaping: str, env_id: str) -> None:
    """ValueError (one line) unless ``shaping`` is known and the env has a per-slot oracle value for it."""
    if shaping not in SHAPING:
        raise ValueError(f"shaping={shaping!r} is invalid: expected one of {', '.join(SHAPING)}")
    if shaping == "oracle":
        env = gym.make(env_id, oracle=False)
        has = "oracle_reward" in getattr(env.unwrapped, "metrics_spec", {})
        env.close()
        if not has:
            raise ValueError(f"shaping='oracle': {env_id} has no per-slot oracle value (metric oracle_reward)")


def resolve(config: Any, policy: type, hps: tuple[dict, ...], vec: str,
            probe: Callable[[], gym.Env]) -> tuple[type, str]:
    """A training run's privileged options (``config``: a ``TrainConfig``) checked and applied: (the policy class,
    the vec mode). ``probe`` builds a public training env; the privileged policy's ``public_dim`` (its observation's
    length) goes into the ``policy_kwargs`` of each of ``hps`` (the recorded hyperparameters and the model's: plain
    JSON, read back by ``sb3:`` loading, also where it rebuilds A2C's pickled ones); both options need single
    training envs (``vec`` "auto" becomes "dummy")."""
    privileged, shaping = config.privileged, config.shaping
    check_privileged(privileged, env_id=config.env_id, algo=config.algo, net=config.net, warm_start=config.warm_start)
    check_shaping(shaping, config.env_id)
    if privileged == "none" and shaping == "none":
        return policy, vec
    if vec == "native":
        raise ValueError(f"vec='native' has no privileged features or oracle shaping (privileged={privileged!r}, "
                         f"shaping={shaping!r}): use vec='dummy' or 'subproc'")
    if privileged == "critic":
        env = probe()
        env.close()
        public = int(gym.spaces.flatdim(env.observation_space))
        for hp in hps:
            hp["policy_kwargs"] = {**(hp.get("policy_kwargs") or {}), "public_dim": public}
        policy = privileged_policy(policy)
    return policy, "dummy" if vec == "auto" else vec


def options(config: Any) -> dict[str, str]:
    """The training envs' keyword arguments of a ``TrainConfig``'s privileged options (``make_train_env``'s)."""
    return {"privileged": config.privileged, "shaping": config.shaping}


class _ZeroPadded:
    """An observation pipeline whose vector ends with zeros where training put the privileged features."""

    def __init__(self, pipeline: Any, extra: int):
        self.pipeline, self._zeros = pipeline, np.zeros(extra, dtype=np.float32)
        self.size = int(pipeline.size) + extra

    def reset(self, obs) -> np.ndarray:
        return np.concatenate([self.pipeline.reset(obs), self._zeros])

    def observe(self, obs) -> np.ndarray:
        return np.concatenate([self.pipeline.observe(obs), self._zeros])


def zero_padded(pipeline: Any, policy: Any) -> Any:
    """The ``sb3:`` agent's pipeline for ``policy``: as it is, or for a privileged policy (one with ``public_dim``)
    the public vector followed by zeros in the privileged slice, which the actor never reads."""
    public = getattr(policy, "public_dim", None)
    if public is None:
        return pipeline
    if int(pipeline.size) != public:
        raise ValueError(f"the model's actor reads {public} public entries, this env gives {pipeline.size}: evaluate "
                         "it on the scenario it was trained on")
    return _ZeroPadded(pipeline, int(policy.observation_space.shape[0]) - public)


class PrivilegedObs(gym.ObservationWrapper):
    """The flat observation with the privileged features appended (training only; module docstring)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.public_dim = int(gym.spaces.flatdim(env.observation_space))
        self.privileged_dim = int(privileged_vector(env).size)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(self.public_dim + self.privileged_dim,),
                                                dtype=np.float32)

    def observation(self, observation):
        extra = privileged_vector(self.env)
        if extra.size != self.privileged_dim:
            raise ValueError(f"privileged features of size {extra.size}, expected {self.privileged_dim}: pad the env "
                             "(its padding kwargs) so every instance has the same size")
        return np.concatenate([np.asarray(observation, dtype=np.float32), extra])


class OracleShaping(gym.Wrapper):
    """Training reward = reward - the slot's per-slot oracle value (``info["metrics"]["oracle_reward"]``)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        opt = info.get("metrics", {}).get("oracle_reward")
        if opt is None:
            raise ValueError("shaping='oracle': the env gave no oracle_reward (build it with oracle=True)")
        return obs, float(reward) - float(opt), terminated, truncated, info


def _split_extractor_cls():
    import torch as th
    from stable_baselines3.common.torch_layers import MlpExtractor

    class SplitMlpExtractor(th.nn.Module):
        """SB3's ``MlpExtractor`` with the actor on the first ``public_dim`` features and the critic on all."""

        def __init__(self, feature_dim: int, public_dim: int, net_arch: Any, activation_fn, device="auto"):
            super().__init__()
            if not 0 < public_dim <= feature_dim:
                raise ValueError(f"public_dim={public_dim} is invalid: expected 1..{feature_dim}")
            self.public_dim = int(public_dim)
            actor = MlpExtractor(public_dim, net_arch, activation_fn, device)
            critic = MlpExtractor(feature_dim, net_arch, activation_fn, device)
            self.policy_net, self.value_net = actor.policy_net, critic.value_net
            self.latent_dim_pi, self.latent_dim_vf = actor.latent_dim_pi, critic.latent_dim_vf

        def forward(self, features):
            return self.forward_actor(features), self.forward_critic(features)

        def forward_actor(self, features):
            return self.policy_net(features[..., :self.public_dim])

        def forward_critic(self, features):
            return self.value_net(features)

    return SplitMlpExtractor


_CLASSES: dict[Any, type] = {}


def split_extractor_class() -> type:
    """The ``SplitMlpExtractor`` class (an ``torch.nn.Module``: built on first use, as it imports torch)."""
    if "split" not in _CLASSES:
        _CLASSES["split"] = _split_extractor_cls()
    return _CLASSES["split"]


def privileged_policy(base: Any) -> type:
    """``base`` (an actor-critic policy class on flat observations) whose MLP is a split one
    (:func:`split_extractor_class`); it takes ``public_dim`` (policy kwarg: the public observation's length). One
    class per base."""
    if base not in _CLASSES:
        split = split_extractor_class()

        def __init__(self, *args, public_dim: int, **kwargs):
            self.public_dim = int(public_dim)
            base.__init__(self, *args, **kwargs)

        def _build_mlp_extractor(self) -> None:
            self.mlp_extractor = split(self.features_dim, self.public_dim, self.net_arch, self.activation_fn,
                                       self.device)

        def _get_constructor_parameters(self) -> dict:
            return {**base._get_constructor_parameters(self), "public_dim": self.public_dim}

        _CLASSES[base] = type(f"Privileged{base.__name__}", (base,),
                              {"__init__": __init__, "_build_mlp_extractor": _build_mlp_extractor,
                               "_get_constructor_parameters": _get_constructor_parameters,
                               "__module__": __name__})
    return _CLASSES[base]
