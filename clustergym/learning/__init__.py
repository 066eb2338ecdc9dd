"""The learning stack (SPEC §8): DRL with Stable-Baselines3 on clustergym envs.

=====================================  ==============================================================
:mod:`clustergym.learning.pipeline`    observation pipeline shared by training and evaluation
                                       (flatten + empirical statistics), masks, Box bounds; no torch
:mod:`clustergym.learning.heads`       fast action heads: MultiDiscrete/MultiBinary distributions as
                                       one batched tensor op, and the policies that use them
:mod:`clustergym.learning.training`    ``clustergym train`` (:func:`~clustergym.learning.training.train`)
:mod:`clustergym.learning.hyperparams` one hyperparameter set per (env, algorithm):
                                       ``clustergym/learning/hyperparams/<algo>.yml`` (rl-zoo3 style)
:mod:`clustergym.learning.agent`       saved models as ``sb3:`` agents, loaded without unpickling
=====================================  ==============================================================

Importing this package imports no torch and no SB3; the submodules that need them import them.
``clustergym.baselines.drl`` re-exports the names it used to hold.
"""
