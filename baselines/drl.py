"""DRL comparisons with Stable-Baselines3 (SPEC §8): wrappers, training, and ``sb3:`` agents.

Three pieces, shared by training and evaluation so that a saved model sees at evaluation exactly
the observations it was trained on:

* :class:`EmpiricalStats` — the statistics a learner needs but the raw observation lacks, updated
  only from what a real scheduler sees (observations and ``info["feedback"]``, never metrics); each
  family's ``drl_hooks.Stats`` (named by its ``FamilySpec``) computes them:

  =========================  =====================================================================
  family                     statistics appended (all in [0, 1] or means of observed quantities)
  =========================  =====================================================================
  multiserver-channel (P1)   per channel: mean realised utility v̂_e (0 if untried) and the share
                             of slots it was used n_e / t; per port: share of slots with a job
  multiserver-allocation     per port: share of slots with a job (the hidden ρ_l, eq. 1);
  (P2)                       per port: mean realised reward x_l q_l when it had a job
  ringallreduce (P3)         none: the observation already holds jobs, servers and links; what is
                             hidden is future arrivals only
  approxjobs (P4)            per machine: mean work per used slot (the hidden service rate,
                             §III) and the share of slots it was used
  =========================  =====================================================================

* :class:`ObsPipeline` — flattens the Dict observation (``gymnasium.spaces.flatten``) and appends
  the statistics. :class:`DRLObservation` is the Gymnasium wrapper around it (training);
  :class:`SB3Agent` uses the same pipeline when it acts in ``clustergym run`` (evaluation).
* :func:`train` — ``clustergym train``: PPO / A2C on every env, SAC on P2 (actions rescaled to
  [-1, 1] by ``clustergym.wrappers.RescaleBox``), MaskablePPO (sb3-contrib) on P1 and P4 with the
  env's ``action_masks()``. Observations (and, for training only, rewards) are normalised by
  SB3's ``VecNormalize``; its statistics are saved beside the model and applied at evaluation.

A run directory holds ``model.zip``, ``vecnormalize.npz``, ``clustergym.json`` (env id, kwargs,
algorithm, wrapper settings), ``monitor/`` (episode returns), ``evaluations.npz`` (periodic
evaluation on held-out seeds), ``tb/`` (TensorBoard logs) and ``training_curve.png``.

**Trusted files only.** A ``model.zip`` written by SB3 carries pickled Python objects (cloudpickle),
and unpickling a crafted file runs code. The ``sb3:`` agent therefore never unpickles them: it reads
the zip's ``data`` JSON, supplies every pickled entry itself (the spaces from the env the side-car
names, which must be a registered clustergym id; the algorithm's own policy class; constants for
training-only schedules and buffers) and refuses a file with any other pickled entry; the weights
are read with ``torch.load(weights_only=True)`` (SB3's default). Normalisation statistics are an
``.npz`` read with ``allow_pickle=False``. Still: load models only from sources you trust.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np

from clustergym.agent import BaseAgent, env_family

__all__ = ["ALGOS", "EmpiricalStats", "ObsPipeline", "DRLObservation", "SB3Agent", "make_train_env", "train",
           "sb3_mask", "plot_training_curve"]

# algo -> (module, class, the family DRL hook it needs; None = every family). A family supports SAC when
# its FamilySpec.drl_hooks define ``box_bounds`` (Box actions) and MaskablePPO when they define ``sb3_mask``.
ALGOS: dict[str, tuple[str, str, str | None]] = {
    "ppo": ("stable_baselines3", "PPO", None),
    "a2c": ("stable_baselines3", "A2C", None),
    "sac": ("stable_baselines3", "SAC", "box_bounds"),
    "maskable_ppo": ("sb3_contrib", "MaskablePPO", "sb3_mask"),
}
SIDE_CAR = "clustergym.json"
NORM_FILE = "vecnormalize.npz"


def _algo_class(algo: str):
    import importlib

    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is invalid: expected one of {', '.join(ALGOS)}")
    mod, cls, _ = ALGOS[algo]
    try:
        return getattr(importlib.import_module(mod), cls)
    except ImportError:
        extra = "contrib" if mod == "sb3_contrib" else "drl"
        raise ValueError(f"algo {algo!r} needs {mod}: pip install 'clustergym[{extra}]'") from None


def check_algo(algo: str, family: str) -> None:
    """ValueError unless ``algo`` can train on ``family`` (SPEC §8)."""
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is invalid: expected one of {', '.join(ALGOS)}")
    need = ALGOS[algo][2]
    if need is not None and _hook(family, need) is None:
        from clustergym.family import family_specs

        fams = tuple(f.name for f in family_specs() if f.hook(need) is not None)
        raise ValueError(f"algo {algo!r} supports the families {', '.join(fams)}, not {family!r} "
                         f"(SAC needs Box actions; MaskablePPO needs discrete actions with masks)")


# -- empirical statistics ------------------------------------------------------------------------
def _hook(family: str, name: str):
    """The family's DRL hook ``name`` (``FamilySpec.drl_hooks``), or None (no hook, or an unknown family)."""
    from clustergym.family import FAMILIES

    spec = FAMILIES.get(family)
    return None if spec is None else spec.hook(name)


class EmpiricalStats:
    """Running statistics from observations and feedback only (see the module docstring).

    The family's ``drl_hooks.Stats`` holds and updates them; a family without it appends nothing.
    """

    def __init__(self, family: str, problem: Any, pad: dict | None = None):
        self.family = family
        self.problem = problem
        cls = _hook(family, "Stats")
        # pad: the env's padding kwargs (clustergym.env.env_padding), for fixed-size statistics across instances
        self._impl = None if cls is None else (cls(problem, pad=pad) if pad else cls(problem))
        self.size = 0 if self._impl is None else int(self._impl.size)
        self.reset()

    def reset(self) -> None:
        self.t = 0
        if self._impl is not None:
            self._impl.reset()

    def update(self, obs: dict, info: dict) -> None:
        """After a step: ``obs`` is the *previous* observation (the slot just played), ``info`` its
        step info (only ``feedback`` is read)."""
        fb = info.get("feedback", {})
        self.t += 1
        if self._impl is not None:
            self._impl.update(obs, fb)

    def vector(self) -> np.ndarray:
        if self.size == 0:
            return np.zeros(0, dtype=np.float32)
        t = max(self.t, 1)
        return np.concatenate(self._impl.parts(t)).astype(np.float32)


class ObsPipeline:
    """Dict observation -> flat float32 vector [flatten(obs), statistics]."""

    def __init__(self, family: str, problem: Any, obs_space: gym.spaces.Space, stats: bool = True,
                 pad: dict | None = None):
        self.obs_space = obs_space
        self.problem = problem
        self.stats = EmpiricalStats(family, problem, pad) if stats else None
        self.size = int(gym.spaces.flatdim(obs_space)) + (self.stats.size if self.stats else 0)
        self.space = gym.spaces.Box(-np.inf, np.inf, shape=(self.size,), dtype=np.float32)
        self._last = None

    def reset(self, obs) -> np.ndarray:
        if self.stats is not None:
            self.stats.reset()
        return self.observe(obs)

    def update(self, info: dict) -> None:
        if self.stats is not None:
            self.stats.update(self._last, info)

    def observe(self, obs) -> np.ndarray:
        self._last = obs
        flat = gym.spaces.flatten(self.obs_space, obs).astype(np.float32)
        if self.stats is None or self.stats.size == 0:
            return flat
        return np.concatenate([flat, self.stats.vector()])


class DRLObservation(gym.Wrapper):
    """Flattened observation plus empirical statistics (:class:`ObsPipeline`)."""

    def __init__(self, env: gym.Env, stats: bool = True):
        super().__init__(env)
        from clustergym.env import env_padding

        u = env.unwrapped
        self._stats_on = stats
        self.pipeline = ObsPipeline(u.family, u.problem, env.observation_space, stats, pad=env_padding(u))
        self.observation_space = self.pipeline.space

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        u = self.env.unwrapped
        if u.problem is not self.pipeline.problem:  # another instance (same spaces): statistics of its problem
            from clustergym.env import env_padding

            self.pipeline = ObsPipeline(u.family, u.problem, self.env.observation_space, self._stats_on,
                                        pad=env_padding(u))
        return self.pipeline.reset(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.pipeline.update(info)
        return self.pipeline.observe(obs), reward, terminated, truncated, info


def unscale_action(a: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """[-1, 1] -> [low, high] per entry (entries with low == high map to low; see ``clustergym.wrappers.RescaleBox``)."""
    a = np.clip(np.asarray(a, dtype=np.float64), -1.0, 1.0)
    return low + (a + 1.0) * 0.5 * (high - low)


def __getattr__(name: str):
    """``RescaleBox`` moved to the public :mod:`clustergym.wrappers` (imported lazily: it imports this module)."""
    if name == "RescaleBox":
        from clustergym.wrappers import RescaleBox

        return RescaleBox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _box_bounds(family: str, problem, space=None) -> tuple[np.ndarray, np.ndarray]:
    """Exact (float64) bounds of a Box action: the family's ``box_bounds`` hook (P2's [0, a_l^k] of eq. 3: the
    float32 space bounds can round a up by more than the env's feasibility tolerance), else the space's."""
    bounds = _hook(family, "box_bounds")
    if bounds is not None:
        return bounds(problem)
    if space is None:
        raise ValueError(f"no Box action bounds known for family {family!r}")
    return space.low.astype(np.float64), space.high.astype(np.float64)


def sb3_mask(family: str, info: dict) -> np.ndarray | None:
    """The flat per-value action mask sb3-contrib expects, from public ``info["action_mask"]``.

    The family's ``drl_hooks.sb3_mask`` maps it; equals ``env.action_masks()`` (tested): P1 gives a
    per-channel mask (|E|,) -> per channel [0 allowed, 1 allowed]; P4's info mask is already per machine
    [idle, slot 1..J].
    """
    m = info.get("action_mask")
    if m is None:
        return None
    m = np.asarray(m, dtype=bool)
    hook = _hook(family, "sb3_mask")
    if hook is None:
        raise ValueError(f"no MaskablePPO mask for family {family!r}")
    return hook(m)


def make_train_env(env_id: str, env_kwargs: dict | None = None, *, algo: str = "ppo", stats: bool = True,
                   monitor_dir: str | None = None, rank: int = 0) -> gym.Env:
    """``gym.make`` + Monitor + ``clustergym.wrappers.FlattenWithStats`` (+ ``clustergym.wrappers.RescaleBox``
    to [-1, 1] for Box actions): the public wrappers, so a user's own chain can match training exactly."""
    from stable_baselines3.common.monitor import Monitor

    from clustergym.wrappers import FlattenWithStats, RescaleBox

    kw = {"oracle": False, **(env_kwargs or {})}
    env = gym.make(env_id, **kw)
    env = Monitor(env, os.path.join(monitor_dir, str(rank)) if monitor_dir else None)
    env = FlattenWithStats(env, stats=stats)
    if isinstance(env.action_space, gym.spaces.Box):
        env = RescaleBox(env)
    return env


# -- training ------------------------------------------------------------------------------------
def train(env_id: str, algo: str, timesteps: int, out: str, *, env_kwargs: dict | None = None, seed: int = 0,
          n_envs: int = 4, eval_freq: int = 10_000, eval_episodes: int = 2, eval_seed: int = 10_000,
          stats: bool = True, normalize: bool = True, hyperparams: dict | None = None, progress: bool = True,
          verbose: int = 0, threads: int | None = 1) -> dict:
    """Train ``algo`` on ``env_id``; write the run directory ``out`` (see the module docstring).

    Training envs are seeded ``seed, seed+1, ...``; periodic evaluation uses separate envs seeded
    from ``eval_seed`` (held out from training). Returns the side-car dictionary.
    """
    family = env_family(env_id)
    check_algo(algo, family)
    _algo_class(algo)  # a clear error when the [drl] extra is not installed
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import clustergym  # noqa: F401

    if int(timesteps) < 1:
        raise ValueError(f"timesteps={timesteps!r} is invalid: expected an integer >= 1")
    if int(n_envs) < 1:
        raise ValueError(f"n_envs={n_envs!r} is invalid: expected an integer >= 1")
    if int(eval_freq) < 1:
        raise ValueError(f"eval_freq={eval_freq!r} is invalid: expected an integer >= 1 (timesteps between evaluations)")
    if int(eval_episodes) < 1:
        raise ValueError(f"eval_episodes={eval_episodes!r} is invalid: expected an integer >= 1")
    if algo == "sac" and n_envs != 1:
        n_envs = 1  # SAC: one env (off-policy; SB3's default)
    env_kwargs = dict(env_kwargs or {})
    gym.make(env_id, **env_kwargs).close()  # bad kwargs fail here, before anything is written
    cls = _algo_class(algo)
    if threads is not None:
        torch.set_num_threads(int(threads))  # small MLPs: one thread is fastest and leaves cores to envs
    os.makedirs(out, exist_ok=True)
    mon = os.path.join(out, "monitor")
    os.makedirs(mon, exist_ok=True)

    def factory(rank: int, monitor: str | None):
        return lambda: make_train_env(env_id, env_kwargs, algo=algo, stats=stats, monitor_dir=monitor, rank=rank)

    venv = DummyVecEnv([factory(i, mon) for i in range(n_envs)])
    venv.seed(seed)
    eval_env = DummyVecEnv([factory(0, None)])
    eval_env.seed(eval_seed)
    if normalize:
        venv = VecNormalize(venv, norm_obs=True, norm_reward=True, clip_obs=10.0)
        eval_env = VecNormalize(eval_env, training=False, norm_obs=True, norm_reward=False, clip_obs=10.0)
    hp = dict(hyperparams or {})
    try:
        model = cls("MlpPolicy", venv, seed=seed, verbose=verbose, tensorboard_log=os.path.join(out, "tb"), **hp)
    except (AssertionError, ValueError, TypeError) as exc:  # SB3 checks hyperparameters with asserts
        raise ValueError(f"bad hyperparameters for {algo} ({', '.join(f'{k}={v!r}' for k, v in hp.items())}): "
                         f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
    if algo == "maskable_ppo":
        from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback as EvalCallback
    else:
        from stable_baselines3.common.callbacks import EvalCallback
    freq = max(int(eval_freq) // n_envs, 1)
    cb = EvalCallback(eval_env, n_eval_episodes=int(eval_episodes), eval_freq=freq, log_path=out,
                      best_model_save_path=None, deterministic=True, verbose=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=int(timesteps), callback=cb, progress_bar=progress, tb_log_name=algo)
    wall = time.perf_counter() - t0
    model.save(os.path.join(out, "model.zip"))
    if normalize:
        save_normalization(venv, out)
    meta = {"env_id": env_id, "family": family, "env_kwargs": env_kwargs, "algo": algo, "stats": bool(stats),
            "normalize": bool(normalize), "seed": int(seed), "n_envs": int(n_envs), "timesteps": int(timesteps),
            "timesteps_trained": int(model.num_timesteps),
            "eval_seed": int(eval_seed), "hyperparams": hp, "train_wall_s": wall,
            "rescale_action": isinstance(venv.action_space, gym.spaces.Box)}
    with open(os.path.join(out, SIDE_CAR), "w") as f:
        json.dump(meta, f, indent=1)
    venv.close()
    eval_env.close()
    try:
        plot_training_curve(out)
    except (OSError, ValueError):  # pragma: no cover - nothing to plot yet
        pass
    return meta


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
    from clustergym.plots import _plt

    plt = _plt()
    meta = json.load(open(os.path.join(run_dir, SIDE_CAR)))
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    steps, ret = _monitor_curve(run_dir)
    if steps.size:
        ax.plot(steps, ret, ".", color="tab:blue", alpha=0.35, ms=3, label="training episodes")
    ev = os.path.join(run_dir, "evaluations.npz")
    if os.path.exists(ev):
        d = np.load(ev)
        if d["timesteps"].size:
            r = d["results"]
            ax.plot(d["timesteps"], r.mean(axis=1), "-o", color="tab:orange", ms=3,
                    label=f"evaluation (held-out seeds, deterministic)")
    for i, (label, val) in enumerate((reference or {}).items()):
        ax.axhline(val, ls="--", lw=1, color=f"C{(i + 2) % 10}", label=label)
    ax.set_xlabel("timesteps")
    ax.set_ylabel("episode return")
    ax.set_title(f"{meta['algo'].upper()} on {meta['env_id'].split('/')[-1]}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path = path or os.path.join(run_dir, "training_curve.png")
    fig.savefig(path)
    plt.close(fig)
    return path


# -- evaluation: saved models as agents ----------------------------------------------------------
def _check_side_car(meta, side: str) -> None:
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


class SB3Agent(BaseAgent):
    """A saved SB3 model as an agent: ``make("sb3:runs/ppo-p1/model.zip")``.

    Applies the observation pipeline and ``VecNormalize`` statistics the model was trained with,
    keeps the empirical statistics from public feedback (``update``), maps [-1, 1] actions back to
    device units for Box actions, and passes action masks (from ``info["action_mask"]``) to
    MaskablePPO. ``deterministic`` (default True) selects the policy's mode.
    """

    name = "sb3"

    def __init__(self, path: str, deterministic: bool = True):
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
        _check_side_car(self.meta, side)
        self.path = path
        self.deterministic = bool(deterministic)
        self.family = self.meta["family"]
        self.families = (self.family,)
        self.model = safe_load(path, self.meta)
        self._norm = None
        if self.meta.get("normalize"):
            norm = os.path.join(run_dir, NORM_FILE)
            if not os.path.exists(norm):
                raise ValueError(f"{run_dir!r} has no {NORM_FILE} (a run written by an older clustergym keeps its "
                                 "statistics in a pickle, which is not loaded: train it again)")
            with np.load(norm, allow_pickle=False) as z:
                self._norm = {k: np.asarray(z[k], dtype=np.float64) for k in ("mean", "var", "clip_obs", "epsilon")}

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        space = _obs_space_for(self.meta, problem)
        self.pipeline = ObsPipeline(self.family, problem, space, self.meta["stats"])
        expected = self.model.observation_space.shape
        if (self.pipeline.size,) != tuple(expected):
            raise ValueError(f"model {self.path!r} expects observations of size {expected[0]}, this env gives "
                             f"{self.pipeline.size}: evaluate it on the scenario it was trained on")
        self._box = None
        if self.meta.get("rescale_action"):
            self._box = _box_bounds(self.family, problem)
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
        self.pipeline.update(info)


def save_normalization(venv, out: str) -> str:
    """Save a ``VecNormalize``'s observation statistics as plain arrays (``vecnormalize.npz``), which the
    ``sb3:`` agent reads with ``allow_pickle=False`` (a pickled VecNormalize could carry code)."""
    rms = venv.obs_rms
    path = os.path.join(out, NORM_FILE)
    np.savez(path, mean=np.asarray(rms.mean, dtype=np.float64), var=np.asarray(rms.var, dtype=np.float64),
             count=np.float64(rms.count), clip_obs=np.float64(venv.clip_obs), epsilon=np.float64(venv.epsilon))
    return path


# Pickled entries of a model.zip that the sb3: agent supplies itself (everything else is refused).
_STATE_ENTRIES = ("_last_obs", "_last_episode_starts", "_last_original_obs", "ep_info_buffer", "ep_success_buffer",
                  "rollout_buffer_class", "replay_buffer_class", "_last_dones")


def safe_load(path: str, meta: dict):
    """Load a saved SB3 model without unpickling anything from the file (module docstring)."""
    import zipfile

    cls = _algo_class(meta["algo"])
    try:
        with zipfile.ZipFile(path) as z:
            data = json.loads(z.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path!r} is not a model saved by SB3 ({exc})") from None
    env = make_train_env(meta["env_id"], meta["env_kwargs"], algo=meta["algo"], stats=bool(meta["stats"]))
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    lr = data.get("learning_rate")
    lr = float(lr) if isinstance(lr, (int, float)) else 3e-4
    custom: dict[str, Any] = {}
    for key, val in data.items():
        if not (isinstance(val, dict) and ":serialized:" in val):
            continue
        if key == "policy_class":
            custom[key] = cls.policy_aliases["MlpPolicy"]
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
