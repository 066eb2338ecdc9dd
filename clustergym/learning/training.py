"""``clustergym train``: PPO / A2C on every env, SAC on Box actions (P2), MaskablePPO (sb3-contrib) on
P1 and P4 with the env's ``action_masks()``.

The training env is ``gym.make`` + Monitor + :class:`clustergym.learning.wrappers.FlattenWithStats` (+
:class:`clustergym.learning.wrappers.RescaleBox` to [-1, 1] for Box actions): the public wrappers, so a user's
own chain can match training exactly. Observations (and, for training only, rewards) are normalised by
SB3's ``VecNormalize``; its statistics are saved beside the model (plain arrays) and applied at
evaluation. PPO, A2C and MaskablePPO use the fast action heads of :mod:`clustergym.learning.heads`
(``head="sb3"`` keeps SB3's own distribution). Hyperparameters come from the family's
``envs/<family>/hyperparams/<algo>.yml`` over the algorithm's ``default`` (:mod:`clustergym.learning.hyperparams`),
with the caller's values on top.

A run directory holds ``model.zip``, ``vecnormalize.npz``, ``clustergym.json`` (env id, kwargs,
algorithm, hyperparameters, action head, wrapper settings), ``monitor/`` (episode returns), ``tb/``
(TensorBoard logs), ``training_curve.png`` and, when in-training evaluation is on (``eval_freq > 0``;
off by default), ``evaluations.npz``.

What is trained is a :class:`TrainConfig`; where it is written and how it runs are :func:`train`'s arguments::

    from clustergym.learning.training import TrainConfig, train

    config = TrainConfig("clustergym/ApproxJobs-v0", "ppo", 100_000, instances=range(100, 200), seed=1)
    meta = train(config, "runs/ppo-p4", progress=False)  # the side-car dictionary

:func:`train` runs five steps, each a function here: resolve the configuration (:func:`check` gives the
:class:`TrainSetup`), build the training envs, build the model, learn, save. The pieces live beside this module:
the algorithms and policies (:mod:`clustergym.learning.algos`), the training envs, instance pool and normaliser
(:mod:`clustergym.learning.train_envs`), checkpoints (:mod:`clustergym.learning.checkpoints`) and the
learning curve (:mod:`clustergym.learning.curves`); their names are importable from here as before.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import gymnasium as gym
import numpy as np

from clustergym.core.env import TIME_CAP
from clustergym.core.scenario import check_memory
from clustergym.core.family import env_family
from clustergym.learning import imitation
from clustergym.learning.algos import SIDE_CAR, algo_class, algo_gamma, check_algo
from clustergym.learning.checkpoints import Checkpoints
from clustergym.learning.estimate import estimate_callback
from clustergym.learning.curves import plot_training_curve, reference_returns, step_reward_callback
from clustergym.learning.hp_checks import (MAX_PARAM_DRAWS, check_finite_weights, check_hyperparams, check_seed,
                                           check_training_memory, listing)
from clustergym.learning.hyperparams import load_hyperparams, split_run_keys
from clustergym.learning.instances import DEFAULT_EVAL_INSTANCES, DEFAULT_VALIDATION_INSTANCES
from clustergym.learning import privileged as priv
from clustergym.learning.pools import param_pool_record, param_settings, pool_padding
from clustergym.learning.policies import check_net, net_policy_kwargs, policy_class
from clustergym.learning.train_envs import (check_pipeline, int_arg, make_train_env, normalizer, save_normalization,
                                            training_envs)
from clustergym.learning.pipeline import LAYOUTS

__all__ = ["TrainConfig", "TrainSetup", "check", "make_train_vec", "resolve_vec", "train"]


VECS = ("auto", "native", "dummy", "subproc")
SUBPROC_MAX = 32  # vec="subproc": one process per env (each imports torch: ~200 MB)


def resolve_vec(env_id: str, vec: str, *, stats: bool = True, net: str = "mlp", env_kwargs: dict | None = None) -> str:
    """``"auto"`` -> ``"native"`` where the env has a native vector env that steps ``env_kwargs`` (P3's: the
    ``ring_size`` action mode only) and the net is the MLP, else ``"dummy"``; a ValueError for an unknown value
    or ``"native"`` where there is no such native vector env."""
    from clustergym.learning.vec import native_vector_gap

    if vec not in VECS:
        raise ValueError(f"vec={vec!r} is invalid: expected one of {', '.join(VECS)}")
    gap = native_vector_gap(env_id, env_kwargs)
    if gap is None and net != "mlp":
        gap = f"trains the {net} net on single envs"
    if vec == "auto":
        return "native" if gap is None else "dummy"
    if vec == "native" and gap is not None:
        raise ValueError(f"vec='native': {env_id} {gap}; use vec='dummy' or 'subproc'")
    return vec


def make_train_vec(env_id: str, env_kwargs: dict, n_envs: int, *, vec: str = "dummy", algo: str = "ppo",
                   stats: bool = True, monitor_dir: str | None = None, layout: str = "full",
                   settings: list[dict] | None = None, time_cap: float | None = None, **training_only: str):
    """The SB3 ``VecEnv`` of ``n_envs`` training envs (``vec``: see :attr:`TrainConfig.vec`); each gives the
    observations and actions of :func:`make_train_env`, with per-episode returns in ``monitor_dir``. ``settings``:
    each env runs every episode in one of these generator settings (a parameter pool; not with ``vec="native"``).
    ``training_only``: ``privileged`` and ``shaping`` of :func:`make_train_env` (not with ``vec="native"``)."""
    if vec == "native" and settings:
        raise ValueError("vec='native' steps one generator setting; a parameter pool (param_draws) needs "
                         "vec='dummy' or 'subproc'")
    if vec == "native":
        from stable_baselines3.common.vec_env import VecMonitor

        from clustergym.learning.vec import NativeVecEnv

        venv = NativeVecEnv(env_id, n_envs, {"oracle": False, **env_kwargs}, stats=stats, layout=layout,
                            time_cap=time_cap)
        return VecMonitor(venv, os.path.join(monitor_dir, "native") if monitor_dir else None)
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    fns = [(lambda i=i: make_train_env(env_id, env_kwargs, algo=algo, stats=stats, monitor_dir=monitor_dir, rank=i,
                                       layout=layout, slim_info=True, settings=settings, time_cap=time_cap,
                                       **training_only))
           for i in range(n_envs)]
    if vec == "subproc":
        if n_envs > SUBPROC_MAX:
            raise ValueError(f"vec='subproc' starts one process per env: n_envs={n_envs} > {SUBPROC_MAX}; use "
                             "vec='native' or 'dummy' for many envs")
        return SubprocVecEnv(fns, start_method="spawn")
    return DummyVecEnv(fns)


@dataclass(frozen=True)
class TrainConfig:
    """What :func:`train` trains: the env and its instances, the algorithm and its network, the budget, a warm
    start, evaluations and saves during training; the defaults are ``clustergym train``'s. Where the run is
    written and how it runs (progress bar, verbosity, torch threads) are :func:`train`'s own arguments.
    :func:`check` checks every field. Another seed of the same run is ``dataclasses.replace(config, seed=1)``."""

    # what is trained, on what
    env_id: str
    """A registered env id, e.g. ``"clustergym/ApproxJobs-v0"``."""
    algo: str
    """One of :data:`clustergym.learning.algos.ALGOS` that trains on the env's family."""
    timesteps: int | None
    """Env steps (all training envs together); None = the file's ``n_timesteps``."""
    env_kwargs: Mapping[str, Any] | None = None
    """The env's keyword arguments, on top of the file's ``env_kwargs``."""
    instances: Sequence[int] | None = None
    """The training pool (scenario seeds): each sub-env draws one per episode (env kwarg ``instances``, seeded
    by its reset seed). None: :data:`clustergym.learning.instances.DEFAULT_TRAIN_INSTANCES` (1000-1099,
    disjoint from the instances ``clustergym run`` uses by default), unless ``env_kwargs`` pins
    ``scenario_seed`` (one instance, as before) or the scenario does not depend on ``scenario_seed`` (a trace
    preset). Families with ``pad_kwargs`` are padded to the maxima over the pool and
    :data:`~clustergym.learning.instances.DEFAULT_EVAL_INSTANCES` (0-99)."""
    param_draws: int = 0
    """0 (default): every instance comes from the generator's default parameters. N >= 1: a parameter pool
    (:mod:`clustergym.learning.pools`): N settings of the family's load and value-law parameters, one drawn per
    episode (``vec`` "auto" becomes "dummy"). The model is still evaluated on the default generator; the
    side-car's ``param_pool`` lists the settings."""
    seed: int = 0
    """The model's seed; training envs are seeded ``seed, seed+1, ...``."""

    # the learner
    hyperparams: Mapping[str, Any] | None = None
    """The algorithm's keyword arguments on top of the file's entry (``--hp``)."""
    hyperparams_file: str | None = None
    """A YAML file in the shipped files' format (default: the shipped one of ``algo``)."""
    head: str = "fast"
    """``"fast"`` (default; :mod:`clustergym.learning.heads`) or ``"sb3"`` (SB3's own distribution)."""
    net: str = "mlp"
    """``"mlp"`` (default: SB3's flat MLP) or ``"entity"`` (the per-entity network of
    :mod:`clustergym.learning.entity`: P1's channels, P2's ports in the ``"port"`` action mode, P4's window
    slots in the ``"job"`` mode; P1's env is always padded, observations are not normalised, rewards still
    are) or ``"autoregressive"`` (the masked decoder of :mod:`clustergym.learning.autoregressive`: P3's ring
    sizes job by job; observations not normalised either)."""
    n_envs: int | None = None
    """Training envs; None = the hyperparameter file's value, else 4 (SAC: always 1)."""
    vec: str | None = None
    """How the ``n_envs`` training envs are stepped: ``"native"`` (the family's native vector env in one batched
    call, :mod:`clustergym.learning.vec`; P1, P2, P3 in ``ring_size`` mode, and P4), ``"dummy"`` (SB3's
    ``DummyVecEnv``: one process), ``"subproc"`` (SB3's ``SubprocVecEnv``: one process per env) or
    ``"auto"``; None = the hyperparameter file's ``vec``, else ``"auto"`` (native where the env has a native
    vector env for these env kwargs and the net is the MLP, else dummy). Every choice gives the same
    trajectories."""
    stats: bool = True
    """Add the learner's empirical statistics to the flat observation
    (:class:`clustergym.learning.wrappers.FlattenWithStats`)."""
    normalize: bool | None = None
    """Normalise observations and rewards (SB3's ``VecNormalize``); None = the hyperparameter file's value,
    else True."""
    privileged: str = "none"
    """``"critic"``: the critic also sees the family's privileged features (training only; the actor never does)."""
    shaping: str = "none"
    """``"oracle"``: training reward minus the per-slot oracle's value (:mod:`clustergym.learning.privileged`)."""

    # a warm start
    warm_start: str | None = None
    """A teacher agent (e.g. ``"esdp"``): behaviour cloning from its decisions on ``bc_steps`` slots of training
    instances (``bc_epochs`` passes) before PPO / MaskablePPO fine-tuning with
    :data:`clustergym.learning.imitation.FINETUNE_HP` under the caller's ``hyperparams``; ``timesteps=0`` saves
    the cloned policy itself (:mod:`clustergym.learning.imitation`)."""
    bc_steps: int = 20_000
    """Demonstration slots of a warm start."""
    bc_epochs: int = 30
    """Passes over the demonstrations of a warm start."""

    # evaluations and saves during training
    eval_freq: int = 0
    """In-training evaluation every ``eval_freq`` env steps on separate envs seeded from ``eval_seed``
    (held-out seeds), ``eval_episodes`` episodes each; 0 (default) = off. It costs time: with it on every
    10,000 steps, P1's end-to-end rate halved."""
    eval_episodes: int = 2
    """Episodes per in-training evaluation."""
    eval_seed: int = 10_000
    """The first seed of the in-training evaluation envs."""
    checkpoints: Sequence[int] | None = None
    """Env-step counts at which to save the model as well (``out/checkpoints/<steps>/``, each a run directory
    ``sb3:`` loads: model, statistics, side-car with ``timesteps_trained`` and the training wall time up to that
    point, ``checkpoint_of``); 0 saves the model before training. The learning curves of ``clustergym drl``
    evaluate them on held-out instances."""
    curve_references: bool = True
    """Run the family's paper policy, baselines and random on the training instances after training for the
    learning curve's reference lines (:func:`clustergym.learning.curves.reference_returns`; computed once per
    process for one configuration); False: none."""


@dataclass
class TrainSetup:
    """A training run's configuration: its :class:`TrainConfig` resolved with the hyperparameter file."""

    env_id: str
    algo: str
    family: str
    policy: Any  # the policy class (clustergym.learning.algos.policy_class)
    cls: Any  # the algorithm class
    hp: dict  # the hyperparameters as given (file, fine-tuning defaults, caller), recorded in the side-car
    model_hp: dict  # the algorithm's keyword arguments (hp + the entity net's layout)
    timesteps: int
    n_envs: int
    vec: str  # as asked ("auto" resolved when the envs are built)
    layout: str  # the flat observation layout
    time_cap: float | None  # the flat MLP's bound on the slot index (clustergym.core.env.TIME_CAP); None: entity net
    env_kwargs: dict  # the model's env kwargs, as recorded (padding included)
    train_kwargs: dict  # the training sub-envs' kwargs (+ the pool)
    pool: list | None
    pool_note: str
    settings: list | None  # the parameter pool's generator settings (None: the default generator only)
    normalize: bool
    norm_obs: bool
    eval_freq: int
    eval_episodes: int
    bc_steps: int
    bc_epochs: int
    config: TrainConfig  # as given


def _resolve(c: TrainConfig) -> TrainSetup:
    """Step 1: check the configuration and resolve it with the hyperparameter file (builds envs to check kwargs)."""
    env_id, algo, net, stats, warm_start, param_draws = c.env_id, c.algo, c.net, c.stats, c.warm_start, c.param_draws
    bc_steps, bc_epochs = c.bc_steps, c.bc_epochs
    family = env_family(env_id)
    check_algo(algo, family)
    if (isinstance(param_draws, bool) or not isinstance(param_draws, (int, np.integer))
            or not 0 <= param_draws <= MAX_PARAM_DRAWS):
        raise ValueError(f"param_draws={str(param_draws)[:40]} is invalid: expected an integer >= 0 and "
                         f"<= {MAX_PARAM_DRAWS:,} (0: the default generator only)")
    check_net(net, family, algo, stats)
    policy = policy_class(algo, c.head, net)  # also a clear error when the [drl] extra is not installed
    cls = algo_class(algo)
    run_cfg, hp = split_run_keys(load_hyperparams(algo, env_id, c.hyperparams_file))
    if warm_start is not None:
        if algo not in imitation.WARM_ALGOS:
            raise ValueError(f"warm_start needs algo in {', '.join(imitation.WARM_ALGOS)}, not {algo!r}")
        imitation._check_teacher(warm_start, family)
        bc_steps, bc_epochs = int_arg("bc_steps", bc_steps, 1), int_arg("bc_epochs", bc_epochs, 1)
        hp.update(imitation.FINETUNE_HP)  # the fine-tuning defaults, under the caller's values
    hp.update(c.hyperparams or {})
    flags = {"n_envs": "--n-envs", "n_timesteps": "--timesteps", "normalize": "--no-normalize", "env_kwargs": "--set",
             "vec": "--vec", "obs_layout": "the hyperparameter file"}
    for k in flags:
        if k in hp:
            raise ValueError(f"{k} is a run setting, not a hyperparameter of {algo}: use {flags[k]}")
    if c.hyperparams_file:  # the file's own values first: their errors name it
        check_hyperparams(algo, cls, {k: v for k, v in hp.items() if k not in (c.hyperparams or {})}, c.hyperparams_file)
    check_hyperparams(algo, cls, hp)
    if not isinstance(run_cfg.get("env_kwargs") or {}, dict):
        raise ValueError(f"env_kwargs in the hyperparameter file of {algo} must be a mapping, got "
                         f"{run_cfg['env_kwargs']!r}")
    timesteps = int_arg("timesteps", run_cfg.get("n_timesteps") if c.timesteps is None else c.timesteps,
                        0 if warm_start is not None else 1)  # 0 with a warm start: the cloned policy itself
    n_envs = int_arg("n_envs", run_cfg.get("n_envs", 4) if c.n_envs is None else c.n_envs, 1)
    vec = run_cfg.get("vec", "auto") if c.vec is None else c.vec
    layout = run_cfg.get("obs_layout", "full")
    if layout not in LAYOUTS[:2]:
        raise ValueError(f"obs_layout={layout!r} is invalid: expected one of {', '.join(LAYOUTS[:2])}")
    env_kwargs = {**(run_cfg.get("env_kwargs") or {}), **(c.env_kwargs or {})}  # the file's, under the caller's
    normalize = run_cfg.get("normalize", True) if c.normalize is None else c.normalize
    if not isinstance(normalize, bool):
        where = c.hyperparams_file or f"the hyperparameter file of {algo}"
        raise ValueError(f"normalize={str(normalize)[:40]!r} in {where} is invalid: expected true or false")
    check_seed(c.seed, n_envs)
    check_seed(c.eval_seed, 1, "eval_seed")
    eval_freq, eval_episodes = int_arg("eval_freq", c.eval_freq, 0), int_arg("eval_episodes", c.eval_episodes, 1)
    if algo == "sac" and n_envs != 1:
        n_envs = 1  # SAC: one env (off-policy; SB3's default)
    env_kwargs = dict(env_kwargs or {})
    if "instances" in env_kwargs:
        raise ValueError("pass the training pool as instances= (--instances), not as an env kwarg")
    given = dict(env_kwargs)
    env_kwargs, train_kwargs, pool, pool_note = training_envs(env_id, env_kwargs, c.instances, net=net)
    _check_memory(env_id, algo, hp, n_envs, timesteps, train_kwargs, stats, layout, vec)
    settings, vec, pool_note = _param_pool(env_id, param_draws, vec, given, env_kwargs, train_kwargs, pool, pool_note)
    model_hp = dict(hp)
    if net != "mlp":  # the network's layout, plain JSON ints (saved in model.zip's data, read back without pickles)
        probe = make_train_env(env_id, train_kwargs, algo=algo, stats=stats, layout=layout)
        model_hp["policy_kwargs"] = net_policy_kwargs(net, probe, hp.get("policy_kwargs"))
        probe.close()
    # the entity net's features lie in [0, 1] (per-position statistics would pin max_edges); the decoder reads
    # raw caps and capacities for its masks: neither normalises observations (rewards still are)
    norm_obs = net == "mlp"
    policy, vec = priv.resolve(c, policy, (hp, model_hp), vec, lambda: make_train_env(env_id, train_kwargs, algo=algo,
                                                                               stats=stats, layout=layout))
    return TrainSetup(env_id=env_id, algo=algo, family=family, policy=policy, cls=cls, hp=hp, model_hp=model_hp,
                      timesteps=timesteps, n_envs=n_envs, vec=vec, layout=layout,
                      time_cap=None if net != "mlp" else TIME_CAP, env_kwargs=env_kwargs,
                      train_kwargs=train_kwargs, pool=pool, pool_note=pool_note, settings=settings, normalize=normalize,
                      norm_obs=norm_obs, eval_freq=eval_freq, eval_episodes=eval_episodes, bc_steps=bc_steps,
                      bc_epochs=bc_epochs, config=c)


def _param_pool(env_id: str, param_draws: int, vec: str, given: dict, env_kwargs: dict, train_kwargs: dict, pool,
                pool_note: str) -> tuple[list | None, str, str]:
    """The parameter pool's generator settings (None without one), the vec mode and the pool's note; the model's
    env kwargs are padded in place to fit every setting."""
    if not param_draws:
        return None, vec, pool_note
    # each setting is a dict of a few floats (~1 KiB with its env check), kept for the whole run
    check_memory(1024.0 * param_draws, f"param_draws={param_draws}", "the generator settings")
    if vec == "native":
        raise ValueError("vec='native' steps one generator setting; param_draws needs vec='dummy' or 'subproc'")
    vec = "dummy" if vec == "auto" else vec
    settings = param_settings(env_id, param_draws, given)
    covered = ([int(train_kwargs.get("scenario_seed", 0))] if pool is None else
               sorted(set(pool) | set(DEFAULT_EVAL_INSTANCES) | set(DEFAULT_VALIDATION_INSTANCES)))
    pads = pool_padding(env_id, given, settings, covered)  # the model's fixed shape fits every setting
    env_kwargs.update(pads)
    train_kwargs.update(pads)
    for p in settings:  # a bad setting fails here, before anything is written
        gym.make(env_id, **{**train_kwargs, **p}).close()
    return settings, vec, pool_note + f"; {len(settings)} generator settings (param_draws), one drawn per episode"


def _check_memory(env_id: str, algo: str, hp: dict, n_envs: int, timesteps: int, train_kwargs: dict, stats: bool,
                  layout: str, vec: str) -> None:
    """The memory check of the run (:func:`clustergym.learning.hp_checks.check_training_memory`), its observation
    and action sizes read from one training env."""
    probe = make_train_env(env_id, train_kwargs, algo=algo, stats=stats, layout=layout)
    try:
        obs_dim = int(np.prod(probe.observation_space.shape or (1,)))
        act_dim = int(gym.spaces.flatdim(probe.action_space))
    finally:
        probe.close()
    check_training_memory(algo, hp, n_envs, timesteps, obs_dim, act_dim, native=vec == "native")


def _build_envs(s: TrainSetup, out: str):
    """Step 2: the training ``VecEnv`` (seeded ``seed, seed+1, ...``; normalised when asked) and the vec mode used."""
    os.makedirs(out, exist_ok=True)
    mon = os.path.join(out, "monitor")
    os.makedirs(mon, exist_ok=True)
    stats, net = s.config.stats, s.config.net
    vec = resolve_vec(s.env_id, s.vec, stats=stats, net=net, env_kwargs=s.train_kwargs)
    venv = make_train_vec(s.env_id, s.train_kwargs, s.n_envs, vec=vec, algo=s.algo, stats=stats, monitor_dir=mon,
                          layout=s.layout, settings=s.settings, time_cap=s.time_cap, **priv.options(s.config))
    venv.seed(s.config.seed)
    if s.normalize:  # rewards scaled by the std of the *algorithm's* discounted return (its gamma, not SB3's 0.99)
        venv = normalizer(venv, gamma=algo_gamma(s.algo, s.model_hp), norm_obs=s.norm_obs)
    return venv, vec


def _build_model(s: TrainSetup, venv, vec: str, out: str, *, verbose: int):
    """Step 3: the model on ``venv``, the in-training evaluation callback (or None) and the behaviour cloning
    record of a warm start (or None)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    seed = s.config.seed
    try:
        model = s.cls(s.policy, venv, seed=seed, verbose=verbose, tensorboard_log=os.path.join(out, "tb"),
                      **s.model_hp)
    except (AssertionError, ValueError, TypeError) as exc:  # SB3 checks hyperparameters with asserts
        raise ValueError(f"bad hyperparameters for {s.algo} ({listing(f'{k}={v!r}' for k, v in s.hp.items())}): "
                         f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
    check_pipeline(model, venv)
    stats = s.config.stats
    cb = None
    if s.eval_freq > 0:
        from stable_baselines3.common.vec_env import VecMonitor

        eval_env = DummyVecEnv([lambda: make_train_env(s.env_id, s.train_kwargs, algo=s.algo, stats=stats,
                                                       monitor_dir=None, rank=0, layout=s.layout,
                                                       time_cap=s.time_cap, privileged=s.config.privileged)])
        if vec == "native":  # the wrapper chain must match the training env's (VecNormalize syncs along it)
            eval_env = VecMonitor(eval_env)
        eval_env.seed(s.config.eval_seed)
        if s.normalize:
            eval_env = normalizer(eval_env, gamma=algo_gamma(s.algo, s.model_hp), norm_obs=s.norm_obs, training=False)
        if s.algo == "maskable_ppo":
            from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback as EvalCallback
        else:
            from stable_baselines3.common.callbacks import EvalCallback
        cb = EvalCallback(eval_env, n_eval_episodes=s.eval_episodes, eval_freq=max(s.eval_freq // s.n_envs, 1),
                          log_path=out, best_model_save_path=None, deterministic=True, verbose=0)
    bc = None
    if s.config.warm_start is not None:
        bc = imitation.warm_start(model, venv if s.normalize else None, s.env_id, s.train_kwargs,
                                  s.config.warm_start, steps=s.bc_steps, epochs=s.bc_epochs, seed=seed,
                                  stats=stats, algo=s.algo, layout=s.layout, time_cap=s.time_cap)
    return model, cb, bc


def _learn(s: TrainSetup, model, cb, out: str, *, progress: bool, estimate=None):
    """Step 4: ``model.learn`` for the budget, saving the asked checkpoints (``estimate``: told the expected
    training time after the first iteration); returns (training wall time, saver)."""
    t0 = time.perf_counter()
    saver = None
    if s.config.checkpoints:
        saver = Checkpoints(sorted({int_arg("checkpoints", c, 0) for c in s.config.checkpoints}), out,
                            s.normalize and s.norm_obs, t0, s.timesteps)
        saver.save_now(model, 0)  # before any update (kept only if 0 was asked); after cloning, the clone
    eta = None if estimate is None else estimate_callback(s.timesteps, estimate, int(getattr(model, "learning_starts", 0)))
    callbacks = [c for c in (cb, None if saver is None else saver.callback(), step_reward_callback(out, s.timesteps),
                             eta) if c is not None]
    if s.timesteps > 0:
        try:
            model.learn(total_timesteps=s.timesteps, callback=callbacks or None, progress_bar=progress,
                        tb_log_name=s.algo)
        finally:  # TensorBoard's writer thread re-opens its file by name: closed before the staging folder goes
            if getattr(model, "_logger", None) is not None:
                model.logger.close()
    return time.perf_counter() - t0, saver


def _save(s: TrainSetup, model, venv, cb, bc, saver, wall: float, vec: str, out: str) -> dict:
    """Step 5: the model, its normalisation statistics, the side-car (returned), the checkpoints' side-cars and
    the learning curve."""
    model.save(os.path.join(out, "model.zip"))
    if s.normalize and s.norm_obs:
        save_normalization(venv, out)
    pool, hyperparams_file = s.pool, s.config.hyperparams_file
    meta = {"env_id": s.env_id, "family": s.family, "env_kwargs": s.env_kwargs, "algo": s.algo,
            "stats": bool(s.config.stats),
            "obs_layout": s.layout,  # the observation keys of the flat vector (clustergym.learning.pipeline)
            "time_cap": s.time_cap,  # the flat vector's bound on the slot index t (None: t as it is)
            "instances": None if pool is None else [int(k) for k in pool], "instances_note": s.pool_note,
            "param_pool": None if s.settings is None else param_pool_record(s.env_id, s.settings),
            "padding_covers": None if pool is None else (f"the pool and instances {DEFAULT_EVAL_INSTANCES.start}-"
                                                         f"{DEFAULT_EVAL_INSTANCES.stop - 1}, 900-999"),
            "normalize": s.normalize, "seed": int(s.config.seed), "n_envs": s.n_envs, "timesteps": s.timesteps,
            "timesteps_trained": int(model.num_timesteps), "eval_freq": s.eval_freq,
            "eval_seed": int(s.config.eval_seed), "hyperparams": s.hp,
            "head": s.config.head if s.policy is not s.cls.policy_aliases.get("MlpPolicy") else "sb3",
            "hyperparams_file": os.path.abspath(hyperparams_file) if hyperparams_file else None,
            "train_wall_s": wall, "vec": vec, "rescale_action": isinstance(venv.action_space, gym.spaces.Box),
            "warm_start": bc, "net": s.config.net, **priv.options(s.config), "norm_obs": bool(s.normalize and s.norm_obs),
            "reward_normalization": {"gamma": float(venv.gamma)} if s.normalize else None}
    # the reference lines of the learning curve (the paper policy, the best baseline, random on the training
    # instances); not with a parameter pool (its instances are drawn from other generator settings)
    meta["curve_references"] = (reference_returns(s.env_id, s.env_kwargs, pool)
                                if s.settings is None and s.config.curve_references else {})
    with open(os.path.join(out, SIDE_CAR), "w") as f:
        json.dump(meta, f, indent=1)
    if saver is not None:
        saver.finish(model, meta, wall)
    venv.close()
    if cb is not None:
        cb.eval_env.close()
    try:
        plot_training_curve(out)
    except (OSError, ValueError):  # pragma: no cover - nothing to plot yet
        pass
    return meta


def check(config: TrainConfig) -> TrainSetup:
    """Every check of a :class:`TrainConfig`, before anything is written: a ValueError for a bad value or
    combination (``vec`` with the env kwargs, the net, the pool). Returns the resolved setup."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"expected a TrainConfig, got {type(config).__name__}: train(TrainConfig(env_id, algo, "
                        "timesteps, ...), out)")
    setup = _resolve(config)
    resolve_vec(setup.env_id, setup.vec, stats=config.stats, net=config.net, env_kwargs=setup.train_kwargs)
    if setup.vec == "subproc" and setup.n_envs > SUBPROC_MAX:
        raise ValueError(f"vec='subproc' starts one process per env: n_envs={setup.n_envs} > {SUBPROC_MAX}; use "
                         "vec='native' or 'dummy' for many envs")
    return setup


def train(config: TrainConfig, out: str, *, progress: bool = True, verbose: int = 0, threads: int | None = 1,
          estimate: Callable[[str], None] | None = None) -> dict:
    """Train ``config`` (checked by :func:`check` first); write the run directory ``out`` (see the module
    docstring). ``progress``: SB3's progress bar; ``verbose``: SB3's verbosity; ``threads``: torch's thread
    count (None: left as it is); ``estimate``: called once with the expected training time, measured on the
    first iteration (:func:`clustergym.learning.estimate.estimate_callback`). Returns the side-car dictionary."""
    setup = check(config)
    if threads is not None:
        import torch

        torch.set_num_threads(int(threads))  # small MLPs: one thread is fastest and leaves cores to envs
    venv, vec = _build_envs(setup, out)
    model, cb, bc = _build_model(setup, venv, vec, out, verbose=verbose)
    wall, saver = _learn(setup, model, cb, out, progress=progress, estimate=estimate)
    check_finite_weights(model, f"{setup.algo} on {setup.env_id}: the trained model was not saved")
    return _save(setup, model, venv, cb, bc, saver, wall, vec, out)
