"""The learning stack: DRL with Stable-Baselines3 on clustergym envs.

=========================================  ==========================================================
:mod:`clustergym.learning.algos`           the algorithms (PPO, A2C, SAC, MaskablePPO), the families each
                                           trains on, the run folder's file names
:mod:`clustergym.learning.policies`        the policy class of an algorithm, action head and network
:mod:`clustergym.learning.heads`           fast action heads: MultiDiscrete/MultiBinary distributions as
                                           one batched tensor op, and the policies that use them
:mod:`clustergym.learning.grouped`         the heads' maths: independent categoricals as one tensor per
                                           choice count
:mod:`clustergym.learning.training`        ``clustergym train``: :class:`~clustergym.learning.training.TrainConfig`
                                           (what a run trains) and :func:`~clustergym.learning.training.train`
:mod:`clustergym.learning.train_envs`      the training env's wrapper chain, the instance pool, the
                                           normaliser
:mod:`clustergym.learning.checkpoints`     models saved at given step counts during training
:mod:`clustergym.learning.curves`          the training curve (Monitor files, evaluations)
:mod:`clustergym.learning.hyperparams`     one hyperparameter set per (env, algorithm):
                                           ``envs/<family>/hyperparams/<algo>.yml`` over the
                                           algorithm's ``default`` in ``hyperparams/<algo>.yml``
                                           (rl-zoo3 style)
:mod:`clustergym.learning.vec`             an SB3 ``VecEnv`` over the native vector envs (``--vec native``)
:mod:`clustergym.learning.instances`       training pools, validation and evaluation instances, padding
:mod:`clustergym.learning.entity`          the per-entity policy network (``--net entity``; each family's
                                           layout and features: ``FamilySpec.entity``)
:mod:`clustergym.learning.imitation`       warm start by behaviour cloning (``--warm-start``)
:mod:`clustergym.learning.sb3_agent`           saved models as ``sb3:`` agents, loaded without unpickling
:mod:`clustergym.learning.sidecar`         a model's side-car and normalisation statistics, read as checked
                                           data
:mod:`clustergym.learning.importing`       plain SB3 models made ``sb3:`` agents (``clustergym import-model``)
=========================================  ==========================================================

The observation pipeline shared by training and evaluation (flatten + empirical statistics, masks, Box
bounds; no torch) is :mod:`clustergym.learning.pipeline` in the core; the learned-scheduler benchmark
(``clustergym drl``) is an experiment, :mod:`clustergym.experiments.drl`. The learning layer imports only the
core, the envs and the runner, never the experiments or the command line (docs/architecture.md, "Layers").

Importing this package imports no torch and no SB3; the submodules that need them import them.

With SB3 directly, the fast action heads are one argument::

    from stable_baselines3 import PPO
    from clustergym.learning import policy_class
    model = PPO(policy_class("ppo"), env)    # instead of PPO("MlpPolicy", env)
"""

from clustergym.learning.policies import policy_class

__all__ = ["policy_class"]
