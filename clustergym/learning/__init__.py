"""The learning stack: DRL with Stable-Baselines3 on clustergym envs.

=====================================  ==============================================================
:mod:`clustergym.learning.pipeline`    observation pipeline shared by training and evaluation
                                       (flatten + empirical statistics), masks, Box bounds; no torch
:mod:`clustergym.learning.heads`       fast action heads: MultiDiscrete/MultiBinary distributions as
                                       one batched tensor op, and the policies that use them
:mod:`clustergym.learning.training`    ``clustergym train`` (:func:`~clustergym.learning.training.train`)
:mod:`clustergym.learning.hyperparams` one hyperparameter set per (env, algorithm):
                                       ``clustergym/learning/hyperparams/<algo>.yml`` (rl-zoo3 style)
:mod:`clustergym.learning.vec`         an SB3 ``VecEnv`` over the native vector envs (``--vec native``)
:mod:`clustergym.learning.instances`   training pools, validation and evaluation instances, padding
:mod:`clustergym.learning.entity`      the per-channel policy network of P1 (``--net entity``)
:mod:`clustergym.learning.imitation`   warm start by behaviour cloning (``--warm-start``)
:mod:`clustergym.learning.agent`       saved models as ``sb3:`` agents, loaded without unpickling
:mod:`clustergym.learning.benchmark`   the learned-scheduler benchmark (``clustergym drl``)
=====================================  ==============================================================

Importing this package imports no torch and no SB3; the submodules that need them import them.
``clustergym.baselines.drl`` re-exports the names it used to hold.

With SB3 directly, the fast action heads are one argument::

    from stable_baselines3 import PPO
    from clustergym.learning import policy_class
    model = PPO(policy_class("ppo"), env)    # instead of PPO("MlpPolicy", env)
"""

from clustergym.learning.policies import policy_class

__all__ = ["policy_class"]
