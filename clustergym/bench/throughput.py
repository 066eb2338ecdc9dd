"""Training-throughput rows of ``clustergym bench``: SB3 training as ``clustergym train`` runs it, beside
CartPole-v1 with the same PPO settings, and the memory row (flat memory over 10^6 steps)."""

from __future__ import annotations

import time

import numpy as np

from clustergym.bench.rates import Row, is_tiny, sized
from clustergym.core.env import TIME_CAP
from clustergym.core.family import env_ids, family_specs
from clustergym.learning.algos import algo_class, algo_gamma
from clustergym.learning.hyperparams import load_hyperparams, split_run_keys
from clustergym.learning.policies import policy_class
from clustergym.learning.train_envs import make_train_env, normalizer, training_envs
from clustergym.learning.training import make_train_vec, resolve_vec

__all__ = ["ppo_rate", "training_rates", "cartpole_rate", "bench_hyperparams", "memory_rows", "throughput_rows", "plain_sb3_rows",
           "clear_anchor", "throughput_envs", "plain_envs", "memory_envs"]


# -- DRL training throughput (target: "PPO training, every env, end to end") --------------------------
def bench_hyperparams(algo: str, env_id: str, quick: bool) -> tuple[dict, dict]:
    """(run settings, algorithm kwargs) of the bench's training rows: the shipped entry of ``env_id``
    (:func:`clustergym.learning.hyperparams.load_hyperparams`) with ``n_steps`` cut to 16 (quick) / 64 per env, so one
    rollout + update stays short even with SB3's own heads on P3 (about 6 env-steps/s), and
    ``batch_size`` at most one rollout. Every row (CartPole included) gets the same cut."""
    run, hp = split_run_keys(load_hyperparams(algo, env_id))
    n_envs = int(run.get("n_envs", 4))
    hp["n_steps"] = sized(16, 4) if quick else 64
    hp["batch_size"] = min(int(hp.get("batch_size", 64)), hp["n_steps"] * n_envs)
    if is_tiny():  # smoke-test sizes: one epoch per update (SB3's head takes seconds per epoch on P3)
        hp["n_epochs"] = 1
    return {"n_envs": n_envs, "normalize": bool(run.get("normalize", True))}, hp


def _settings(hp: dict, run: dict) -> str:
    return f"{run['n_envs']} envs, n_steps={hp['n_steps']}, batch {hp['batch_size']}, {hp.get('n_epochs', 10)} epochs"


def _training_model(env_id: str, algo: str, head: str, quick: bool, **env_kw):
    """An SB3 model as ``clustergym train`` builds it (``make_train_env`` in a DummyVecEnv, VecNormalize, the
    bench's hyperparameters), one torch thread. ``env_id`` may be a Gymnasium id outside clustergym
    (CartPole-v1: plain ``gym.make`` + Monitor)."""
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    _set_torch_threads(1)
    run, hp = bench_hyperparams(algo, env_id, quick)
    if env_id in env_ids():
        fns = [lambda i=i: make_train_env(env_id, env_kw, algo=algo, rank=i) for i in range(run["n_envs"])]
    else:
        fns = [lambda: Monitor(gym.make(env_id, **env_kw)) for _ in range(run["n_envs"])]
    venv = DummyVecEnv(fns)
    venv.seed(0)
    if run["normalize"]:
        venv = normalizer(venv, gamma=algo_gamma(algo, hp))
    cls = algo_class(algo)
    model = cls(policy_class(algo, head), venv, seed=0, verbose=0, device="cpu", **hp)
    return model, run["n_envs"] * hp["n_steps"], _settings(hp, run)


def _learn_rate(model, steps: int) -> float:
    t0 = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    return steps / (time.perf_counter() - t0)


_CARTPOLE: dict = {}


def cartpole_rate(quick: bool) -> tuple[float, str]:
    """PPO env-steps/s on CartPole-v1 with the bench's PPO settings (measured once per process and mode):
    the anchor of the target "PPO training >= 0.5x CartPole-v1 with the same PPO settings"."""
    key = (quick, sized(16, 4))  # tiny sizes are measured apart
    if key not in _CARTPOLE:
        model, per, settings = _training_model("CartPole-v1", "ppo", "sb3", quick)
        model.learn(per)  # warm-up, untimed
        rates = [_learn_rate(model, per) for _ in range(2 if quick else 4)]
        model.get_env().close()
        _CARTPOLE[key] = (float(np.median(rates)), settings)
    return _CARTPOLE[key]


def training_rates(env_id: str, label: str, quick: bool, algo: str = "ppo", heads: tuple[str, ...] = ("sb3", "fast"),
                   ratio_target: float | None = None, reps: int | None = None, **env_kw) -> list[Row]:
    """End-to-end training throughput (env-steps/s of ``model.learn``, rollouts + gradient updates) of
    ``algo`` on ``env_id`` with SB3's own action distribution ("before") and the fast heads of
    :mod:`clustergym.learning.heads` ("after"), same settings (:func:`bench_hyperparams`), measured
    interleaved: one untimed rollout + update each, then ``reps`` timed ones alternating the order; medians.
    Rows: the CartPole-v1 anchor (first call only), one per head with its target (>= 0.5x CartPole),
    and the after/before ratio (target ``ratio_target`` when given). With one head (actions where both
    heads are the same distribution: Box, unmasked MultiBinary), one row."""
    cp, cp_settings = cartpole_rate(quick)
    rows = []
    if not any(r.what.startswith("CartPole-v1") for r in _ANCHOR_ROWS):
        _ANCHOR_ROWS.append(Row(f"CartPole-v1 PPO training (anchor; every training row: {cp_settings}, 1 torch "
                                "thread, VecNormalize)", cp, "env-steps/s", "", None))
        rows.append(_ANCHOR_ROWS[-1])
    models = {h: _training_model(env_id, algo, h, quick, **env_kw) for h in heads}
    for model, per, _ in models.values():
        model.learn(per)  # warm-up, untimed: torch and the env kernels
    reps = reps if reps is not None else (1 if quick else 5)
    rates: dict[str, list[float]] = {h: [] for h in heads}
    for r in range(reps):
        for h in (heads if r % 2 == 0 else heads[::-1]):
            model, per, _ = models[h]
            rates[h].append(_learn_rate(model, per))
    for model, _, _ in models.values():
        model.get_env().close()
    name = {"ppo": "PPO", "maskable_ppo": "MaskablePPO", "a2c": "A2C"}.get(algo, algo)
    settings = next(iter(models.values()))[2]
    med = {h: float(np.median(v)) for h, v in rates.items()}
    for h in heads:
        which = "" if len(heads) == 1 else (", SB3 head (before)" if h == "sb3" else ", fast head (after)")
        if settings != cp_settings:  # pragma: no cover - the shipped files share one setting
            which += f" ({settings})"
        rows.append(Row(f"{label} {name} training{which}", med[h], "env-steps/s",
                        f">= {0.5 * cp:,.0f} (0.5x CP)", med[h] >= 0.5 * cp))
    if len(heads) == 2:
        ratio = med[heads[1]] / med[heads[0]]
        rows.append(Row(f"{label} {name} training: fast / SB3 head (interleaved)", ratio, "x",
                        f">= {ratio_target:g}x" if ratio_target else "", ratio >= ratio_target if ratio_target else None))
    return rows


_ANCHOR_ROWS: list[Row] = []


def clear_anchor() -> None:
    """Forget the CartPole-v1 anchor row: the next training row prints it again (once per bench)."""
    _ANCHOR_ROWS.clear()

# -- which families get which rows: their drl_hooks say (BENCH_THROUGHPUT, BENCH_PLAIN, BENCH_MEMORY) ----------------
def throughput_envs() -> tuple[tuple[str, str, dict, str], ...]:
    """The "PPO training, env-steps/s" rows: (label, env id, extra env kwargs beside the shipped ones, vec) for each
    ``(extra env kwargs, vec)`` of every registered family's hook ``BENCH_THROUGHPUT``, in registry order, on the
    family's first env id, labelled with its ``number``. Each env trains in the action mode of its shipped
    hyperparameter entry (env_kwargs of ppo.yml); ``vec="auto"`` is the path ``train`` picks."""
    return tuple((s.number, s.env_ids[0], dict(extra), vec) for s in family_specs()
                 for extra, vec in (s.hook("BENCH_THROUGHPUT") or ()))


def plain_envs() -> tuple[tuple[str, str], ...]:
    """The "plain SB3 PPO" rows: (label, first env id) of every registered family whose hook ``BENCH_PLAIN`` is
    true, in registry order."""
    return tuple((s.number, s.env_ids[0]) for s in family_specs() if s.hook("BENCH_PLAIN"))


def memory_envs() -> tuple[tuple[str, str], ...]:
    """The memory rows: (label, first env id) of every registered family whose hook ``BENCH_MEMORY`` is true, in
    registry order (the env is stepped 10^6 slots with all-zero actions: a fast env)."""
    return tuple((s.number, s.env_ids[0]) for s in family_specs() if s.hook("BENCH_MEMORY"))


# -- "PPO training, env-steps/s": what `clustergym train ENV_ID` runs, at 4 and at 256 envs --------------------
THROUGHPUT_ROLLOUT = 2048  # env steps per rollout at every n_envs (n_steps = 2048 / n_envs), CartPole included


def _throughput_model(env_id: str, n_envs: int, extra: dict, vec: str, rollout: int = THROUGHPUT_ROLLOUT):
    """(PPO model, settings text) as ``clustergym train env_id --n-envs n_envs`` builds it (the shipped
    ppo.yml entry with its env kwargs, the default training pool, VecNormalize with the algorithm's gamma,
    fast heads, one torch thread), with ``n_steps`` = THROUGHPUT_ROLLOUT / n_envs. CartPole-v1: plain
    ``gym.make`` in a DummyVecEnv with the same PPO settings."""
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    _set_torch_threads(1)
    ours = env_id in env_ids()
    run, hp = split_run_keys(load_hyperparams("ppo", env_id))  # CartPole-v1: the anchor's entry (the shared setting)
    hp["n_steps"] = max(rollout // n_envs, 1)
    hp["batch_size"] = min(int(hp.get("batch_size", 64)), hp["n_steps"] * n_envs)
    if ours:
        kw = {**(run.get("env_kwargs") or {}), **extra}
        _, train_kw, _, _ = training_envs(env_id, kw)
        vec = resolve_vec(env_id, vec, env_kwargs=train_kw)
        venv = make_train_vec(env_id, train_kw, n_envs, vec=vec, layout=run.get("obs_layout", "full"),
                              time_cap=TIME_CAP)  # a flat MLP, as clustergym train makes it
        mode = kw.get("action_mode")
        where = f"{vec}" + (f", action_mode={mode}" if mode else "")
    else:
        venv = DummyVecEnv([lambda: Monitor(gym.make(env_id)) for _ in range(n_envs)])
        where = "dummy"
    venv.seed(0)
    venv = normalizer(venv, gamma=algo_gamma("ppo", hp))
    model = algo_class("ppo")(policy_class("ppo", "fast"), venv, seed=0, verbose=0, device="cpu", **hp)
    settings = f"n_steps={hp['n_steps']}, batch {hp['batch_size']}, {hp.get('n_epochs', 10)} epochs"
    return model, where, settings


def throughput_rows(quick: bool = False, n_envs_list: tuple[int, ...] = (4, 256), envs=None,
                    rollout: int = THROUGHPUT_ROLLOUT) -> list[Row]:
    """Rows "PPO training, env-steps/s" at each n_envs: CartPole-v1 and every env of ``envs`` (label, env id,
    extra env kwargs, vec; default :func:`throughput_envs`) with the same PPO settings, measured in this run,
    interleaved (CartPole, then each env, repeated; medians), each env's row with its ratio to CartPole
    (target >= 0.5x)."""
    envs = throughput_envs() if envs is None else envs
    rows: list[Row] = []
    reps = 1 if quick else 3
    if quick:  # tiny sizes: fewer envs and a shorter rollout
        n_envs_list, rollout = tuple(sized(n, 2) for n in n_envs_list), sized(rollout, 64)
    for n in n_envs_list:
        models = {("CartPole-v1", "", ""): _throughput_model("CartPole-v1", n, {}, "dummy", rollout)}
        for label, env_id, extra, vec in envs:
            models[(label, env_id, vec)] = _throughput_model(env_id, n, extra, vec, rollout)
        for model, _, _ in models.values():
            model.learn(rollout)  # warm-up, untimed: torch, kernels, the first episode
        rates: dict = {k: [] for k in models}
        for r in range(reps):
            for k in (list(models) if r % 2 == 0 else list(models)[::-1]):
                rates[k].append(_learn_rate(models[k][0], 2 * rollout if not quick else rollout))
        for model, _, _ in models.values():
            model.get_env().close()
        cp = float(np.median(rates[("CartPole-v1", "", "")]))
        settings = models[("CartPole-v1", "", "")][2]
        rows.append(Row(f"PPO training, env-steps/s, {n} envs: CartPole-v1 ({settings})", cp, "env-steps/s", "", None))
        for k in list(models)[1:]:
            v = float(np.median(rates[k]))
            rows.append(Row(f"PPO training, env-steps/s, {n} envs: {k[0]} ({models[k][1]}), {v / cp:.2f}x CartPole",
                            v, "env-steps/s", f">= {0.5 * cp:,.0f} (0.5x CP)", v >= 0.5 * cp))
    return rows


# -- "plain SB3": PPO(policy, gym.make(id)) as a user writes it, beside CartPole-v1 in the same run ---------------
PLAIN_TARGET = 0.3  # the public fast-head policy on the default spaces: >= 0.3x CartPole-v1's rate, same settings


_TORCH_THREADS: list[int] = []  # torch's own thread count, read before the bench first sets one


def _set_torch_threads(n: int | None) -> int:
    """Set torch's intra-op threads to ``n`` (None: torch's own default, the count it had before the bench first
    set one); returns the count set."""
    import torch

    if not _TORCH_THREADS:
        _TORCH_THREADS.append(int(torch.get_num_threads()))
    n = _TORCH_THREADS[0] if n is None else int(n)
    torch.set_num_threads(n)
    return n


def _plain_model(env_id: str, policy, quick: bool):
    """A plain ``PPO(policy, gym.make(env_id))`` (one env, no wrapper of ours, default env kwargs) with the bench's
    cut: ``n_steps`` 16 (quick) / 64, batch 64, SB3's other defaults (10 epochs; 1 at the --tiny sizes)."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    n = sized(16, 4) if quick else 64
    model = PPO(policy, gym.make(env_id), n_steps=n, batch_size=min(64, n), n_epochs=_plain_epochs(), seed=0,
                device="cpu", verbose=0)
    return model, n


def _plain_epochs() -> int:
    """SB3's default 10 epochs per update (1 at the --tiny smoke sizes, where the figures mean nothing)."""
    return sized(10, 1)


def _plain_rates(models: dict, threads: int, reps: int, rollouts: int) -> dict:
    """{key: [env-steps/s]} of the ``models`` at ``threads`` torch threads, interleaved after an untimed warm-up."""
    _set_torch_threads(threads)
    for model, n in models.values():
        model.learn(n)  # warm-up, untimed
    rates: dict = {k: [] for k in models}
    for r in range(reps):
        for k in (list(models) if r % 2 == 0 else list(models)[::-1]):
            model, n = models[k]
            rates[k].append(_learn_rate(model, rollouts * n))
    return rates


def plain_sb3_rows(quick: bool = False, envs=None, reps: int | None = None) -> list[Row]:
    """Rows "plain SB3 PPO": ``PPO("MlpPolicy", gym.make("CartPole-v1"))``, then on the default spaces of each env
    of ``envs`` (label, env id; default :func:`plain_envs`) ``PPO(FastMultiInputActorCriticPolicy, gym.make(id))``
    (the public fast-head policy of
    :mod:`clustergym.learning.heads`) and ``PPO("MultiInputPolicy", ...)`` (SB3's own head, for contrast: one
    rollout + update, timed once); the same settings (:func:`_plain_model`), measured interleaved after an
    untimed warm-up: ``reps`` windows of 4 rollouts and their updates each (1 in quick mode); medians.

    Measured at torch's default thread count (what a plain SB3 script runs with; the target >= PLAIN_TARGET x
    CartPole applies there) and, when that is more than one, again at one thread (shown, no target: the bench's
    other training rows run at one thread)."""
    from clustergym.learning.heads import FastMultiInputActorCriticPolicy

    envs = plain_envs() if envs is None else envs
    reps = reps if reps is not None else (1 if quick else 5)
    rollouts = 1 if quick else 4  # rollouts (each with its update) per timed window
    models = {("CartPole-v1", "MlpPolicy"): _plain_model("CartPole-v1", "MlpPolicy", quick)}
    for _, env_id in envs:
        models[(env_id, "fast")] = _plain_model(env_id, FastMultiInputActorCriticPolicy, quick)
    default = _set_torch_threads(None)
    n = models[("CartPole-v1", "MlpPolicy")][1]
    rows = []
    for threads in dict.fromkeys((default, 1)):
        rates = _plain_rates(models, threads, reps, rollouts)
        cp = float(np.median(rates[("CartPole-v1", "MlpPolicy")]))
        setting = f"{threads} torch thread{'s' if threads > 1 else ''}" + (" (default)" if threads == default else "")
        rows.append(Row(f"plain SB3 PPO, 1 env (n_steps={n}, batch {min(64, n)}, {_plain_epochs()} epochs, {setting}): "
                        f"CartPole-v1 MlpPolicy", cp, "env-steps/s", "", None))
        for label, env_id in envs:
            v = float(np.median(rates[(env_id, "fast")]))
            target = threads == default
            rows.append(Row(f"plain SB3 PPO, {setting}: {label} default, FastMultiInputActorCriticPolicy, "
                            f"{v / cp:.2f}x CartPole", v, "env-steps/s",
                            f">= {PLAIN_TARGET * cp:,.0f} ({PLAIN_TARGET}x CP)" if target else "",
                            v >= PLAIN_TARGET * cp if target else None))
            if threads != default:
                continue
            slow, n_slow = _plain_model(env_id, "MultiInputPolicy", quick)
            if not is_tiny():  # warm-up (none at the --tiny sizes: SB3's head takes seconds per step on P3)
                slow.learn(n_slow)
            s = _learn_rate(slow, n_slow)
            rows.append(Row(f"plain SB3 PPO, {setting}: {label} default, MultiInputPolicy (SB3 head), "
                            f"{s / cp:.3f}x CartPole", s, "env-steps/s", "", None))
            slow.get_env().close()
    _set_torch_threads(1)  # the other rows' setting
    for model, _ in models.values():
        model.get_env().close()
    return rows


def ppo_rate(env_id: str, label: str, quick: bool, **env_kw) -> Row:
    """PPO training throughput with the fast heads (the row ``clustergym train`` gets); see :func:`training_rates`."""
    return training_rates(env_id, label, quick, heads=("fast",), **env_kw)[-1]


def _rss_mb() -> float:
    """Resident set size of this process (Linux /proc; 0 elsewhere)."""
    import os

    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return 0.0


def memory_rows(quick: bool) -> list[Row]:
    """Target: memory stays flat (and per-step time does not grow) over 10^6 steps.

    Steps the env of every family of :func:`memory_envs` (P1 and P2, the fast envs) for ``n`` slots (10^6; 10^5
    in quick mode) with one horizon covering them all, and compares RSS and step time between the first and last
    tenth.
    """
    import gymnasium as gym

    rows = []
    n = sized(100_000, 1000) if quick else 1_000_000
    for label, env_id in memory_envs():
        env = gym.make(env_id, oracle=False, horizon=n + 1)
        obs, info = env.reset(seed=0)
        a = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
        tenth = n // 10
        rss, rate = [], []
        for block in range(10):
            t0 = time.perf_counter()
            for _ in range(tenth):
                env.step(a)
            rate.append(tenth / (time.perf_counter() - t0))
            rss.append(_rss_mb())
        growth = rss[-1] - rss[0]
        ok = growth <= 10.0 and rate[-1] >= 0.5 * rate[0]  # timing is noisy; a leak would be sustained
        rows.append(Row(f"{label} memory over {n:,} steps: RSS growth after the first tenth "
                        f"(step rate first/last tenth {rate[0]:,.0f}/{rate[-1]:,.0f})", growth, "MB", "flat (<= 10 MB)",
                        ok))
        env.close()
    return rows
