"""``clustergym train``: PPO / A2C on every env, SAC on Box actions (P2), MaskablePPO (sb3-contrib) on
P1 and P4 with the env's ``action_masks()``.

The training env is ``gym.make`` + Monitor + :class:`clustergym.wrappers.FlattenWithStats` (+
:class:`clustergym.wrappers.RescaleBox` to [-1, 1] for Box actions): the public wrappers, so a user's
own chain can match training exactly. Observations (and, for training only, rewards) are normalised by
SB3's ``VecNormalize``; its statistics are saved beside the model (plain arrays) and applied at
evaluation. PPO, A2C and MaskablePPO use the fast action heads of :mod:`clustergym.learning.heads`
(``head="sb3"`` keeps SB3's own distribution). Hyperparameters come from
``clustergym/learning/hyperparams/<algo>.yml`` (:mod:`clustergym.learning.hyperparams`), with the
caller's values on top.

A run directory holds ``model.zip``, ``vecnormalize.npz``, ``clustergym.json`` (env id, kwargs,
algorithm, hyperparameters, action head, wrapper settings), ``monitor/`` (episode returns), ``tb/``
(TensorBoard logs), ``training_curve.png`` and, when in-training evaluation is on (``eval_freq > 0``;
off by default), ``evaluations.npz``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Sequence

import gymnasium as gym
import numpy as np

from clustergym.agent import env_family
from clustergym.learning.pipeline import hook

__all__ = ["ALGOS", "HEADS", "NETS", "SIDE_CAR", "NORM_FILE", "algo_class", "algo_gamma", "check_algo",
           "check_pipeline", "make_train_env", "normalizer", "obs_layout", "train", "save_normalization",
           "plot_training_curve", "policy_class"]

# algo -> (module, class, the family DRL hook it needs; None = every family). A family supports SAC when
# its FamilySpec.drl_hooks define ``box_bounds`` (Box actions) and MaskablePPO when they define ``sb3_mask``.
ALGOS: dict[str, tuple[str, str, str | None]] = {
    "ppo": ("stable_baselines3", "PPO", None),
    "a2c": ("stable_baselines3", "A2C", None),
    "sac": ("stable_baselines3", "SAC", "box_bounds"),
    "maskable_ppo": ("sb3_contrib", "MaskablePPO", "sb3_mask"),
}
HEADS = ("fast", "sb3")  # the action distribution: clustergym.learning.heads, or SB3's own
NETS = ("mlp", "entity")  # the policy network: SB3's flat MLP, or clustergym.learning.entity (P1)
SIDE_CAR = "clustergym.json"
NORM_FILE = "vecnormalize.npz"


def algo_class(algo: str):
    """The SB3 / sb3-contrib algorithm class; a ValueError naming the extra to install when it is missing."""
    import importlib

    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is invalid: expected one of {', '.join(ALGOS)}")
    mod, cls, _ = ALGOS[algo]
    try:
        return getattr(importlib.import_module(mod), cls)
    except ImportError:
        extra = "contrib" if mod == "sb3_contrib" else "drl"
        raise ValueError(f"algo {algo!r} needs {mod}: pip install 'clustergym[{extra}]'") from None


def policy_class(algo: str, head: str = "fast", net: str = "mlp"):
    """The policy class ``train`` builds for ``algo``: the fast-head policy (PPO, A2C, MaskablePPO with
    ``head="fast"``) or the algorithm's own ``MlpPolicy``; with ``net="entity"`` the per-entity policy of
    :mod:`clustergym.learning.entity`. ``sb3:`` loading supplies the same class."""
    if head not in HEADS:
        raise ValueError(f"head={head!r} is invalid: expected one of {', '.join(HEADS)}")
    cls = algo_class(algo)
    if net != "mlp":
        from clustergym.learning.entity import entity_policy

        if net not in NETS:
            raise ValueError(f"net={net!r} is invalid: expected one of {', '.join(NETS)}")
        return entity_policy(algo, head)
    if head == "fast":
        from clustergym.learning.heads import fast_policy

        fast = fast_policy(algo)
        if fast is not None:
            return fast
    return cls.policy_aliases["MlpPolicy"]


def check_algo(algo: str, family: str) -> None:
    """ValueError unless ``algo`` can train on ``family``."""
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is invalid: expected one of {', '.join(ALGOS)}")
    need = ALGOS[algo][2]
    if need is not None and hook(family, need) is None:
        from clustergym.family import family_specs

        fams = tuple(f.name for f in family_specs() if f.hook(need) is not None)
        raise ValueError(f"algo {algo!r} supports the families {', '.join(fams)}, not {family!r} "
                         f"(SAC needs Box actions; MaskablePPO needs discrete actions with masks)")


def obs_layout(meta: dict) -> str:
    """The flat observation layout of a run's side-car (``clustergym.learning.pipeline``): ``"full"`` for runs
    that record it, ``"legacy"`` for runs of earlier versions (which did not)."""
    return meta.get("obs_layout", "legacy")


class SlimInfo(gym.Wrapper):
    """Pass on only the info keys SB3 reads during training (``episode`` from Monitor, ``TimeLimit.truncated``,
    ``is_success``). SB3's ``DummyVecEnv`` deep-copies every sub-env's info at every step, and P3's and P4's infos
    hold the job window, feedback arrays and metrics (docs/drl.md, training throughput: P3 0.44x -> 0.47x)."""

    KEEP = ("episode", "TimeLimit.truncated", "is_success")

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {k: info[k] for k in self.KEEP if k in info}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, {k: info[k] for k in self.KEEP if k in info}


def make_train_env(env_id: str, env_kwargs: dict | None = None, *, algo: str = "ppo", stats: bool = True,
                   monitor_dir: str | None = None, rank: int = 0, layout: str = "full", slim_info: bool = False
                   ) -> gym.Env:
    """``gym.make`` + Monitor + ``clustergym.wrappers.FlattenWithStats`` (+ ``clustergym.wrappers.RescaleBox``
    to [-1, 1] for Box actions): the public wrappers, so a user's own chain can match training exactly.
    ``layout``: the flat observation layout (``clustergym.learning.pipeline``; ``"legacy"`` for a model
    trained by an earlier version)."""
    from stable_baselines3.common.monitor import Monitor

    from clustergym.wrappers import FlattenWithStats, RescaleBox

    kw = {"oracle": False, **(env_kwargs or {})}
    env = gym.make(env_id, **kw)
    env = Monitor(env, os.path.join(monitor_dir, str(rank)) if monitor_dir else None)
    env = FlattenWithStats(env, stats=stats, layout=layout)
    if isinstance(env.action_space, gym.spaces.Box):
        env = RescaleBox(env)
    if slim_info:  # the training VecEnv: SB3 reads a few info keys and deep-copies the whole info every step
        env = SlimInfo(env)
    return env


def algo_gamma(algo: str, hp: dict) -> float:
    """The discount ``algo`` trains with: ``hp["gamma"]``, else the algorithm's own default."""
    import inspect

    if "gamma" in hp:
        return float(hp["gamma"])
    return float(inspect.signature(algo_class(algo).__init__).parameters["gamma"].default)


def normalizer(venv, *, gamma: float, norm_obs: bool = True, training: bool = True):
    """SB3's ``VecNormalize`` as training uses it. Rewards are divided by the running std of the discounted
    return, so the discount must be the algorithm's: with SB3's default (0.99) under an algorithm trained at
    ``gamma=0`` the critic's targets are scaled by a return the algorithm never optimises."""
    from stable_baselines3.common.vec_env import VecNormalize

    return VecNormalize(venv, training=training, norm_obs=norm_obs, norm_reward=training, clip_obs=10.0,
                        gamma=float(gamma))


def check_pipeline(model, venv) -> None:
    """ValueError if the training pipeline disagrees with the algorithm: reward normalisation discounting with
    another gamma than the algorithm's."""
    from stable_baselines3.common.vec_env import VecNormalize

    v = venv
    while v is not None:
        if isinstance(v, VecNormalize) and v.norm_reward and abs(float(v.gamma) - float(model.gamma)) > 1e-12:
            raise ValueError(f"VecNormalize discounts with gamma={v.gamma} but the algorithm with gamma={model.gamma}")
        v = getattr(v, "venv", None)


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
        gap = "trains the per-entity net on single envs"
    if vec == "auto":
        return "native" if gap is None else "dummy"
    if vec == "native" and gap is not None:
        raise ValueError(f"vec='native': {env_id} {gap}; use vec='dummy' or 'subproc'")
    return vec


def make_train_vec(env_id: str, env_kwargs: dict, n_envs: int, *, vec: str = "dummy", algo: str = "ppo",
                   stats: bool = True, monitor_dir: str | None = None, layout: str = "full"):
    """The SB3 ``VecEnv`` of ``n_envs`` training envs (``vec``: see :func:`train`); each gives the observations
    and actions of :func:`make_train_env`, with per-episode returns in ``monitor_dir``."""
    if vec == "native":
        from stable_baselines3.common.vec_env import VecMonitor

        from clustergym.learning.vec import NativeVecEnv

        venv = NativeVecEnv(env_id, n_envs, {"oracle": False, **env_kwargs}, stats=stats, layout=layout)
        return VecMonitor(venv, os.path.join(monitor_dir, "native") if monitor_dir else None)
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    fns = [(lambda i=i: make_train_env(env_id, env_kwargs, algo=algo, stats=stats, monitor_dir=monitor_dir, rank=i,
                                       layout=layout, slim_info=True))
           for i in range(n_envs)]
    if vec == "subproc":
        if n_envs > SUBPROC_MAX:
            raise ValueError(f"vec='subproc' starts one process per env: n_envs={n_envs} > {SUBPROC_MAX}; use "
                             "vec='native' or 'dummy' for many envs")
        return SubprocVecEnv(fns, start_method="spawn")
    return DummyVecEnv(fns)


def _int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name}={value!r} is invalid: expected an integer >= {lo}")
    return int(value)


def train(env_id: str, algo: str, timesteps: int | None, out: str, *, env_kwargs: dict | None = None, seed: int = 0,
          n_envs: int | None = None, eval_freq: int = 0, eval_episodes: int = 2, eval_seed: int = 10_000,
          stats: bool = True, normalize: bool | None = None, hyperparams: dict | None = None,
          hyperparams_file: str | None = None, head: str = "fast", instances: Sequence[int] | None = None,
          progress: bool = True, verbose: int = 0, threads: int | None = 1, warm_start: str | None = None,
          bc_steps: int = 20_000, bc_epochs: int = 30, checkpoints: Sequence[int] | None = None,
          net: str = "mlp", vec: str | None = None) -> dict:
    """Train ``algo`` on ``env_id``; write the run directory ``out`` (see the module docstring).

    Args:
        timesteps: env steps (all training envs together); None = the file's ``n_timesteps``.
        n_envs, normalize: None = the hyperparameter file's value (else 4 envs, normalised).
        hyperparams: the algorithm's keyword arguments on top of the file's entry (``--hp``).
        hyperparams_file: a YAML file in the shipped files' format (default: the shipped one of ``algo``).
        eval_freq: in-training evaluation every ``eval_freq`` env steps on separate envs seeded from
            ``eval_seed`` (held-out seeds), ``eval_episodes`` episodes each; 0 (default) = off. It costs
            time: with it on every 10,000 steps, P1's end-to-end rate halved.
        head: ``"fast"`` (default; :mod:`clustergym.learning.heads`) or ``"sb3"`` (SB3's own distribution).
        instances: the training pool (scenario seeds): each sub-env draws one per episode (env kwarg
            ``instances``, seeded by its reset seed). None: :data:`clustergym.learning.instances.DEFAULT_TRAIN_INSTANCES`
            (1000-1099, disjoint from the instances ``clustergym run`` uses by default), unless
            ``env_kwargs`` pins ``scenario_seed`` (one instance, as before) or the scenario does not depend
            on ``scenario_seed`` (a trace preset). Families with ``pad_kwargs`` are padded to the maxima
            over the pool and :data:`~clustergym.learning.instances.DEFAULT_EVAL_INSTANCES` (0-99).
        vec: how the ``n_envs`` training envs are stepped: ``"native"`` (the family's native vector env in
            one batched call, :mod:`clustergym.learning.vec`; P1, P2, P3 in ``ring_size`` mode, and P4),
            ``"dummy"`` (SB3's ``DummyVecEnv``: one process), ``"subproc"`` (SB3's ``SubprocVecEnv``: one
            process per env) or ``"auto"``; None = the hyperparameter file's ``vec``, else ``"auto"`` (native
            where the env has a native vector env for these env kwargs and the net is the MLP, else dummy).
            Every choice gives the same trajectories.
        net: ``"mlp"`` (default: SB3's flat MLP) or ``"entity"`` (the per-entity network of
            :mod:`clustergym.learning.entity`: P1's channels, P2's ports in the ``"port"`` action mode, P4's
            window slots in the ``"job"`` mode; P1's env is always padded, observations are not normalised,
            rewards still are).

        checkpoints: env-step counts at which to save the model as well (``out/checkpoints/<steps>/``, each
            a run directory ``sb3:`` loads: model, statistics, side-car with ``timesteps_trained`` and the
            training wall time up to that point, ``checkpoint_of``); 0 saves the model before training. The
            learning curves of ``clustergym drl`` evaluate them on held-out instances.
        warm_start: a teacher agent (e.g. ``"esdp"``): behaviour cloning from its decisions on ``bc_steps``
            slots of training instances (``bc_epochs`` passes) before PPO / MaskablePPO fine-tuning with
            :data:`clustergym.learning.imitation.FINETUNE_HP` under the caller's ``hyperparams``; ``timesteps=0``
            saves the cloned policy itself (:mod:`clustergym.learning.imitation`).

    Training envs are seeded ``seed, seed+1, ...``. Returns the side-car dictionary.
    """
    from clustergym.learning.hyperparams import load_hyperparams, split_run_keys

    family = env_family(env_id)
    check_algo(algo, family)
    from clustergym.learning.entity import check_net

    check_net(net, family, algo, stats)
    policy = policy_class(algo, head, net)  # also a clear error when the [drl] extra is not installed
    cls = algo_class(algo)
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv

    import clustergym  # noqa: F401

    run_cfg, hp = split_run_keys(load_hyperparams(algo, env_id, hyperparams_file))
    if warm_start is not None:
        from clustergym.learning import imitation

        if algo not in imitation.WARM_ALGOS:
            raise ValueError(f"warm_start needs algo in {', '.join(imitation.WARM_ALGOS)}, not {algo!r}")
        imitation._check_teacher(warm_start, family)
        bc_steps, bc_epochs = _int("bc_steps", bc_steps, 1), _int("bc_epochs", bc_epochs, 1)
        hp.update(imitation.FINETUNE_HP)  # the fine-tuning defaults, under the caller's values
    hp.update(hyperparams or {})
    flags = {"n_envs": "--n-envs", "n_timesteps": "--timesteps", "normalize": "--no-normalize", "env_kwargs": "--set",
             "vec": "--vec", "obs_layout": "the hyperparameter file"}
    for k in flags:
        if k in hp:
            raise ValueError(f"{k} is a run setting, not a hyperparameter of {algo}: use {flags[k]}")
    if not isinstance(run_cfg.get("env_kwargs") or {}, dict):
        raise ValueError(f"env_kwargs in the hyperparameter file of {algo} must be a mapping, got "
                         f"{run_cfg['env_kwargs']!r}")
    timesteps = _int("timesteps", run_cfg.get("n_timesteps") if timesteps is None else timesteps,
                     0 if warm_start is not None else 1)  # 0 with a warm start: the cloned policy itself
    n_envs = _int("n_envs", run_cfg.get("n_envs", 4) if n_envs is None else n_envs, 1)
    vec = run_cfg.get("vec", "auto") if vec is None else vec
    layout = run_cfg.get("obs_layout", "full")
    from clustergym.learning.pipeline import LAYOUTS

    if layout not in LAYOUTS[:2]:
        raise ValueError(f"obs_layout={layout!r} is invalid: expected one of {', '.join(LAYOUTS[:2])}")
    env_kwargs = {**(run_cfg.get("env_kwargs") or {}), **(env_kwargs or {})}  # the file's env kwargs, under the caller's
    normalize = bool(run_cfg.get("normalize", True) if normalize is None else normalize)
    eval_freq, eval_episodes = _int("eval_freq", eval_freq, 0), _int("eval_episodes", eval_episodes, 1)
    if algo == "sac" and n_envs != 1:
        n_envs = 1  # SAC: one env (off-policy; SB3's default)
    env_kwargs = dict(env_kwargs or {})
    if "instances" in env_kwargs:
        raise ValueError("pass the training pool as instances= (--instances), not as an env kwarg")
    env_kwargs, train_kwargs, pool, pool_note = training_envs(env_id, env_kwargs, instances, net=net)
    model_hp = dict(hp)
    if net == "entity":  # the channel layout, plain JSON ints (saved in model.zip's data, read back without pickles)
        from clustergym.learning.entity import DEFAULT_HIDDEN, entity_layout

        probe = make_train_env(env_id, train_kwargs, algo=algo, stats=stats, layout=layout)
        model_hp["policy_kwargs"] = {"hidden": DEFAULT_HIDDEN, **(hp.get("policy_kwargs") or {}),
                                     "entity": entity_layout(probe)}
        probe.close()
    norm_obs = net != "entity"  # the entity net's features lie in [0, 1]; per-position statistics would pin max_edges
    if threads is not None:
        torch.set_num_threads(int(threads))  # small MLPs: one thread is fastest and leaves cores to envs
    os.makedirs(out, exist_ok=True)
    mon = os.path.join(out, "monitor")
    os.makedirs(mon, exist_ok=True)

    def factory(rank: int, monitor: str | None):
        return lambda: make_train_env(env_id, train_kwargs, algo=algo, stats=stats, monitor_dir=monitor, rank=rank,
                                      layout=layout)

    vec = resolve_vec(env_id, vec, stats=stats, net=net, env_kwargs=train_kwargs)
    venv = make_train_vec(env_id, train_kwargs, n_envs, vec=vec, algo=algo, stats=stats, monitor_dir=mon, layout=layout)
    venv.seed(seed)
    gamma = algo_gamma(algo, model_hp)
    if normalize:  # rewards scaled by the std of the *algorithm's* discounted return (its gamma, not SB3's 0.99)
        venv = normalizer(venv, gamma=gamma, norm_obs=norm_obs)
    try:
        model = cls(policy, venv, seed=seed, verbose=verbose, tensorboard_log=os.path.join(out, "tb"), **model_hp)
    except (AssertionError, ValueError, TypeError) as exc:  # SB3 checks hyperparameters with asserts
        raise ValueError(f"bad hyperparameters for {algo} ({', '.join(f'{k}={v!r}' for k, v in hp.items())}): "
                         f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
    check_pipeline(model, venv)
    cb = None
    if eval_freq > 0:
        from stable_baselines3.common.vec_env import VecMonitor

        eval_env = DummyVecEnv([factory(0, None)])
        if vec == "native":  # the wrapper chain must match the training env's (VecNormalize syncs along it)
            eval_env = VecMonitor(eval_env)
        eval_env.seed(eval_seed)
        if normalize:
            eval_env = normalizer(eval_env, gamma=gamma, norm_obs=norm_obs, training=False)
        if algo == "maskable_ppo":
            from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback as EvalCallback
        else:
            from stable_baselines3.common.callbacks import EvalCallback
        cb = EvalCallback(eval_env, n_eval_episodes=eval_episodes, eval_freq=max(eval_freq // n_envs, 1), log_path=out,
                          best_model_save_path=None, deterministic=True, verbose=0)
    bc = None
    if warm_start is not None:
        from clustergym.learning.imitation import warm_start as clone

        bc = clone(model, venv if normalize else None, env_id, train_kwargs, warm_start, steps=bc_steps,
                   epochs=bc_epochs, seed=seed, stats=stats, algo=algo, layout=layout)
    t0 = time.perf_counter()
    saver = None
    if checkpoints:
        saver = _Checkpoints(sorted({_int("checkpoints", c, 0) for c in checkpoints}), out, normalize and norm_obs, t0,
                             timesteps)
        saver.save_now(model, 0)  # before any update (kept only if 0 was asked); after cloning, the clone
    callbacks = [c for c in (cb, None if saver is None else saver.callback()) if c is not None]
    if timesteps > 0:
        model.learn(total_timesteps=timesteps, callback=callbacks or None, progress_bar=progress, tb_log_name=algo)
    wall = time.perf_counter() - t0
    model.save(os.path.join(out, "model.zip"))
    if normalize and norm_obs:
        save_normalization(venv, out)
    from clustergym.learning.instances import DEFAULT_EVAL_INSTANCES

    meta = {"env_id": env_id, "family": family, "env_kwargs": env_kwargs, "algo": algo, "stats": bool(stats),
            "obs_layout": layout,  # the observation keys of the flat vector (clustergym.learning.pipeline)
            "instances": None if pool is None else [int(k) for k in pool], "instances_note": pool_note,
            "padding_covers": None if pool is None else (f"the pool and instances {DEFAULT_EVAL_INSTANCES.start}-"
                                                         f"{DEFAULT_EVAL_INSTANCES.stop - 1}, 900-999"),
            "normalize": normalize, "seed": int(seed), "n_envs": n_envs, "timesteps": timesteps,
            "timesteps_trained": int(model.num_timesteps), "eval_freq": eval_freq,
            "eval_seed": int(eval_seed), "hyperparams": hp, "head": head if policy is not cls.policy_aliases["MlpPolicy"]
            else "sb3", "hyperparams_file": os.path.abspath(hyperparams_file) if hyperparams_file else None,
            "train_wall_s": wall, "vec": vec, "rescale_action": isinstance(venv.action_space, gym.spaces.Box), "warm_start": bc,
            "net": net, "norm_obs": bool(normalize and norm_obs),
            "reward_normalization": {"gamma": float(venv.gamma)} if normalize else None}
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


class _Checkpoints:
    """Saves the model (and its normalisation statistics) once training has passed each asked step count.

    The save happens at the start of a rollout, i.e. after the update that used the steps so far (a save in
    the middle of a rollout would hold the weights from before that rollout's update); the side-car records
    the steps actually trained (``timesteps_trained``, at or a rollout beyond the asked count).
    """

    def __init__(self, steps: list[int], out: str, normalize: bool, t0: float, final: int):
        self.steps, self.out, self.normalize, self.t0 = steps, out, normalize, t0
        self.final = final  # counts >= the training budget are the final model (saved by finish)
        self.saved: dict[int, tuple[float, int]] = {}  # asked steps -> (training wall time (s), steps trained)
        self.pause = 0.0  # time spent saving, not counted as training time

    def dir(self, n: int) -> str:
        return os.path.join(self.out, "checkpoints", str(n))

    def save_now(self, model, n: int, wall: float | None = None) -> None:
        if n not in self.steps or n in self.saved:
            return
        t = time.perf_counter()
        self.saved[n] = (t - self.t0 - self.pause if wall is None else wall, int(model.num_timesteps))
        d = self.dir(n)
        os.makedirs(d, exist_ok=True)
        model.save(os.path.join(d, "model.zip"))
        if self.normalize:
            save_normalization(model.get_env(), d)
        self.pause += time.perf_counter() - t

    def callback(self):
        from stable_baselines3.common.callbacks import BaseCallback

        saver = self

        class _Save(BaseCallback):
            def _on_rollout_start(self) -> None:
                for n in saver.steps:
                    if n <= self.num_timesteps and n < saver.final:
                        saver.save_now(self.model, n)

            def _on_step(self) -> bool:
                return True

        return _Save()

    def finish(self, model, meta: dict, wall: float) -> None:
        """Counts at or beyond the budget are the final model; then every checkpoint gets its side-car."""
        for n in self.steps:
            if n >= self.final:
                self.save_now(model, n, wall=wall - self.pause)
        for n, (w, done) in self.saved.items():
            with open(os.path.join(self.dir(n), SIDE_CAR), "w") as f:
                json.dump({**meta, "timesteps_trained": done, "train_wall_s": w,
                           "checkpoint_of": os.path.abspath(self.out)}, f, indent=1)


def training_envs(env_id: str, env_kwargs: dict, instances=None, *, net: str = "mlp") -> tuple[dict, dict, list | None, str]:
    """(the model's env kwargs as recorded, the training sub-envs' kwargs, the pool or None, a note on it).

    The pool (:func:`_training_pool`) is drawn from per episode; families with padding kwargs are padded to the
    maxima over the pool and the default evaluation instances, so one model fits every instance."""
    env_kwargs = dict(env_kwargs)
    gym.make(env_id, **env_kwargs).close()  # bad kwargs fail here, before anything is written
    pool, pool_note = _training_pool(env_id, env_kwargs, instances)
    train_kwargs = dict(env_kwargs)  # the sub-envs' kwargs: + padding maxima, + the pool
    if pool is not None:
        from clustergym.learning.instances import DEFAULT_EVAL_INSTANCES, DEFAULT_VALIDATION_INSTANCES, padding_for

        covered = sorted(set(pool) | set(DEFAULT_EVAL_INSTANCES) | set(DEFAULT_VALIDATION_INSTANCES))
        env_kwargs.update(padding_for(env_id, env_kwargs, covered))  # recorded: the model's fixed shape
        train_kwargs = {**env_kwargs, "scenario_seed": int(pool[0]), "instances": tuple(pool)}
        gym.make(env_id, **train_kwargs).close()
    if net == "entity" and "max_edges" not in env_kwargs:  # one instance: padded to its own size (the padded keys)
        from clustergym.learning.instances import padding_for

        env_kwargs.update(padding_for(env_id, env_kwargs, [int(env_kwargs.get("scenario_seed", 0))]))
        train_kwargs = {**train_kwargs, **env_kwargs}
    return env_kwargs, train_kwargs, pool, pool_note


def _training_pool(env_id: str, env_kwargs: dict, instances) -> tuple[list[int] | None, str]:
    """(the training pool or None for one instance, a note saying which and why)."""
    from clustergym.learning.instances import DEFAULT_TRAIN_INSTANCES

    if "scenario_seed" in env_kwargs:
        if instances is not None:
            raise ValueError("instances (--instances) and env_kwargs['scenario_seed'] (--set scenario_seed=K) cannot be "
                             "combined: scenario_seed pins one instance")
        return None, f"one instance: scenario_seed={env_kwargs['scenario_seed']}"
    given = instances is not None
    probe = gym.make(env_id, **{**env_kwargs, "oracle": False})
    switches = getattr(probe.unwrapped, "instance_source", None) is not None  # the env has the instances kwarg
    probe.close()
    if not switches:
        if given:
            raise ValueError(f"{env_id} cannot switch instances (its env has no instances kwarg): drop --instances")
        return None, "one instance: the env does not switch instances"
    if given:
        from clustergym.runner import _check_size

        _check_size("instances", instances)  # range(0, 10**15) would be iterated for hours
    pool = list(dict.fromkeys(_int("instances", k, 0) for k in (instances if given else DEFAULT_TRAIN_INSTANCES)))
    if not pool:
        raise ValueError("instances is empty")
    if len(pool) > 1:
        from clustergym.runner import _scenario_fingerprint

        kw = {k: v for k, v in env_kwargs.items() if k != "horizon"}
        fp = [_scenario_fingerprint(env_id, 1, {**kw, "scenario_seed": k}) for k in pool[:2]]
        if fp[0] is not None and fp[0] == fp[1]:
            if given:
                raise ValueError("this scenario does not depend on scenario_seed (a trace preset or fixed scenario), "
                                 "so a pool of instances would repeat one instance: drop --instances")
            return None, "one instance: the scenario does not depend on scenario_seed"
    return pool, ("the given pool" if given else "the default training pool") + " (one instance drawn per episode)"


def save_normalization(venv, out: str) -> str:
    """Save a ``VecNormalize``'s observation statistics as plain arrays (``vecnormalize.npz``), which the
    ``sb3:`` agent reads with ``allow_pickle=False`` (a pickled VecNormalize could carry code)."""
    rms = venv.obs_rms
    path = os.path.join(out, NORM_FILE)
    np.savez(path, mean=np.asarray(rms.mean, dtype=np.float64), var=np.asarray(rms.var, dtype=np.float64),
             count=np.float64(rms.count), clip_obs=np.float64(venv.clip_obs), epsilon=np.float64(venv.epsilon))
    return path


def _monitor_curve(run_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """(cumulative timesteps at episode end, episode return) over all training envs, in time order."""
    rows = []
    mon = os.path.join(run_dir, "monitor")
    for name in sorted(os.listdir(mon)) if os.path.isdir(mon) else []:
        if not name.endswith(".monitor.csv"):
            continue
        with open(os.path.join(mon, name)) as f:
            f.readline()  # JSON header
            header = f.readline().strip().split(",")
            for line in f:
                vals = dict(zip(header, line.strip().split(",")))
                rows.append((float(vals["t"]), float(vals["r"]), int(vals["l"])))
    rows.sort()
    if not rows:
        return np.zeros(0), np.zeros(0)
    steps = np.cumsum([r[2] for r in rows])
    return steps, np.array([r[1] for r in rows])


def plot_training_curve(run_dir: str, path: str | None = None, reference: dict[str, float] | None = None) -> str:
    """Training episode returns and periodic evaluation returns vs timesteps (PNG).

    ``reference``: optional horizontal lines (label -> episode return), e.g. paper agents.
    """
    from clustergym.plots import figure, legend_outside, save, training_curve

    meta = json.load(open(os.path.join(run_dir, SIDE_CAR)))
    fig, ax = figure(size=(8.0, 3.8))
    steps, ret = _monitor_curve(run_dir)
    # raw returns (instances differ, so they scatter), their rolling mean, and the reference lines
    training_curve(ax, steps, ret, label=meta["algo"], references=reference)
    ev = os.path.join(run_dir, "evaluations.npz")
    if os.path.exists(ev):
        d = np.load(ev)
        if d["timesteps"].size:
            r = d["results"]
            ax.plot(d["timesteps"], r.mean(axis=1), "-o", color="k", ms=3,
                    label="evaluation (held-out seeds, deterministic)")
    ax.set_xlabel("timesteps")
    ax.set_ylabel("episode return")
    ax.set_title(f"{meta['algo'].upper()} on {meta['env_id'].split('/')[-1]}")
    ax.grid(alpha=0.3)
    legend_outside(ax)  # nothing to label before the first episode ends
    path = path or os.path.join(run_dir, "training_curve.png")
    save(fig, path)
    return path
