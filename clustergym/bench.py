"""``clustergym bench``: the performance table of SPEC §10, measured on this machine.

Each row prints the measured value beside its target. Timings are medians; they depend on the
machine and on what else runs on it (run it on an idle machine).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["run_bench", "Row", "decision_times", "ppo_rate", "sampled_action_rate",
           "vector_sampled_rate", "memory_rows"]


@dataclass
class Row:
    what: str
    measured: float
    unit: str
    target: str
    ok: bool | None  # None: informative row without a target

    def line(self) -> str:
        flag = {True: "ok", False: "MISS", None: ""}[self.ok]
        return f"{self.what:<62} {self.measured:>12,.2f} {self.unit:<10} {self.target:<14} {flag}"


def _vector_rate(env, batches: list, steps: int) -> float:
    """Median env-steps/s over 3 timed runs of ``steps`` calls to ``env.step`` (only the call is timed)."""
    env.step(batches[0])  # warm (compiled kernels are cached on disk, but not yet loaded)
    rates = []
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(steps):
            env.step(batches[i % len(batches)])
        rates.append(steps * env.num_envs / (time.perf_counter() - t0))
    return float(np.median(rates))


def decision_times(env_id: str, agent: str, slots: int, seed: int = 0, on_step=None, **env_kw) -> tuple[np.ndarray, object]:
    """Seconds per decision of ``agent`` over ``slots`` slots of ``gym.make(env_id, oracle=False,
    horizon=slots, **env_kw)`` (:func:`clustergym.runner.time_decisions`: the runner's own episode
    loop, public info only); returns the times and the public problem. Every paper's decision-timing
    row uses it."""
    import gymnasium as gym

    import clustergym  # noqa: F401
    from clustergym.agent import env_family, make
    from clustergym.runner import time_decisions

    env = gym.make(env_id, oracle=False, horizon=slots, **env_kw)
    times = time_decisions(env, make(agent, family=env_family(env_id)), slots, seed=seed, on_step=on_step)
    return times, env.unwrapped.problem


def sampled_action_rate(env_id: str, label: str, n: int, target: float | None = None, **env_kw) -> Row:
    """Steps/s of ``gym.make(env_id)`` on ``env.action_space.sample()`` actions: what a random policy
    (or an untrained learner) sends, nearly always outside the feasible set, so the env's default
    ``infeasible="repair"`` path runs. 64 pre-drawn actions (space seeded 0) are cycled; only
    ``env.step`` is timed; an episode end resets untimed."""
    import gymnasium as gym

    import clustergym  # noqa: F401

    env = gym.make(env_id, oracle=False, horizon=10**9, **env_kw)
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(64)]
    repaired = 0
    for i in range(20):  # warm-up, untimed: loads the compiled kernels
        env.step(actions[i])
    spent = 0.0
    for i in range(n):
        t0 = time.perf_counter()
        obs, r, term, trunc, info = env.step(actions[i & 63])
        spent += time.perf_counter() - t0
        repaired += bool(info.get("metrics", {}).get("repaired", 0))
        if term or trunc:
            env.reset()
    rate = n / spent
    what = f"{label} env step, action_space.sample() ({100 * repaired / n:.0f}% repaired)"
    return Row(what, rate, "steps/s", f">= {target:,.0f}" if target else "", rate >= target if target else None)


def vector_sampled_rate(env_id: str, label: str, steps: int, num_envs: int = 1024, target: float | None = None,
                        **env_kw) -> Row:
    """Env-steps/s of the native vector env on ``action_space.sample()`` batches (the repair path)."""
    import gymnasium as gym

    import clustergym  # noqa: F401

    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", oracle=False,
                       horizon=10**9, **env_kw)
    env.reset(seed=0)
    env.action_space.seed(0)
    batches = [env.action_space.sample() for _ in range(4)]
    rate = _vector_rate(env, batches, steps)
    return Row(f"{label} native vector env, {num_envs} envs, action_space.sample()", rate, "env-steps/s",
               f">= {target:,.0f}" if target else "", rate >= target if target else None)


def ppo_rate(env_id: str, label: str, quick: bool, n_envs: int = 4, n_steps: int = 256, rollouts: int | None = None,
             **env_kw) -> Row:
    """SB3 PPO training throughput (env steps/s of ``model.learn``), as ``clustergym train`` sets it up:
    ``make_train_env`` (flattened observation + statistics, [-1, 1] Box actions) in a DummyVecEnv of
    ``n_envs``, VecNormalize, an MLP policy with SB3's defaults except ``n_steps``, one torch thread.
    One rollout + update is run first, untimed (torch and the env kernels warm up); then ``rollouts``
    (default 2 quick, 6 full) rollouts + updates are timed, so the rate includes PPO's gradient steps."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import clustergym  # noqa: F401
    from clustergym.learning.training import make_train_env

    torch.set_num_threads(1)
    venv = DummyVecEnv([lambda i=i: make_train_env(env_id, env_kw, rank=i) for i in range(n_envs)])
    venv.seed(0)
    venv = VecNormalize(venv, norm_obs=True, norm_reward=True, clip_obs=10.0)
    model = PPO("MlpPolicy", venv, n_steps=n_steps, seed=0, verbose=0, device="cpu")
    per_rollout = n_envs * n_steps
    model.learn(per_rollout)  # warm-up, untimed
    total = per_rollout * (rollouts if rollouts is not None else (2 if quick else 6))
    t0 = time.perf_counter()
    model.learn(total, reset_num_timesteps=False)
    rate = total / (time.perf_counter() - t0)
    venv.close()
    return Row(f"{label} SB3 PPO training ({n_envs} envs, n_steps={n_steps}, 1 torch thread)", rate, "steps/s", "",
               None)


def _rss_mb() -> float:
    """Resident set size of this process (Linux /proc; 0 elsewhere)."""
    import os

    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return 0.0


def memory_rows(quick: bool) -> list[Row]:
    """SPEC §10: memory stays flat (and per-step time does not grow) over 10^6 steps.

    Steps every env for ``n`` slots (10^6 for P1 and P2, the fast envs; 10^5 in quick mode) with
    one horizon covering them all, and compares RSS and step time between the first and last tenth.
    """
    import gymnasium as gym

    import clustergym  # noqa: F401

    rows = []
    n = 100_000 if quick else 1_000_000
    for env_id, label in (("clustergym/MultiServerChannel-v0", "P1"), ("clustergym/MultiServerAllocation-v0", "P2")):
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


def run_bench(only: str | None = None, quick: bool = False, out: str | None = None) -> list[Row]:
    """Measure and print every paper's rows (or only one paper's); optionally write JSON to ``out``."""
    import platform

    from tqdm.auto import tqdm

    from clustergym.experiments import load

    if only is not None and only not in list_papers():
        raise ValueError(f"unknown paper {only!r} for --only; expected one of {', '.join(list_papers())}")
    names = list_papers() if only is None else [only]
    rows: list[Row] = []
    for name in tqdm(names, desc="bench", leave=False):
        rows.extend(load(name).bench_rows(quick))
    if only is None:
        rows.extend(memory_rows(quick))
    print(f"clustergym bench on {platform.node()} ({platform.machine()}, {_cores()} cores), "
          f"{'quick' if quick else 'full'} mode")
    print(f"{'what':<62} {'measured':>12} {'unit':<10} {'target':<14}")
    print("-" * 104)
    for r in rows:
        print(r.line())
    if out:
        with open(out, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
    return rows


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def list_papers() -> list[str]:
    from clustergym.experiments import list_papers as lp

    return lp()
