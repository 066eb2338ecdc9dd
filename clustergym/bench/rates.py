"""Timing helpers of ``clustergym bench``: decision times, sampled-action step rates, the vector env's rate
and the ``Row`` every bench row is.

Timings are medians; they depend on the machine and on what else runs on it (run it on an idle machine).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from clustergym.core.agent import make
from clustergym.core.family import env_family
from clustergym.runner.episode import time_decisions

__all__ = ["Row", "vector_rate", "decision_times", "sampled_action_rate", "vector_sampled_rate", "numba_threads",
           "tiny_sizes", "sized", "is_tiny"]

_TINY: list[bool] = []  # non-empty inside ``tiny_sizes()``


@contextmanager
def tiny_sizes():
    """Inside it, :func:`sized` cuts every quick-mode count to a smoke-test size (``clustergym bench --quick
    --tiny``: every row runs end to end at the smallest counts; the figures mean nothing)."""
    _TINY.append(True)
    try:
        yield
    finally:
        _TINY.pop()


def is_tiny() -> bool:
    """Whether the counts are the --tiny smoke-test sizes (inside :func:`tiny_sizes`)."""
    return bool(_TINY)


def sized(n: int, least: int = 1) -> int:
    """``n`` (a quick-mode count), or ``max(least, n // 50)`` inside :func:`tiny_sizes`."""
    return max(least, n // 50) if _TINY else n


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


def vector_rate(env, batches: list, steps: int) -> float:
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
    horizon=slots, **env_kw)`` (:func:`clustergym.runner.episode.time_decisions`: the runner's own episode
    loop, public info only); returns the times and the public problem. Every paper's decision-timing
    row uses it."""
    import gymnasium as gym

    env = gym.make(env_id, oracle=False, horizon=slots, **env_kw)
    times = time_decisions(env, make(agent, family=env_family(env_id)), slots, seed=seed, on_step=on_step)
    return times, env.unwrapped.problem


def sampled_action_rate(env_id: str, label: str, n: int, target: float | None = None, **env_kw) -> Row:
    """Steps/s of ``gym.make(env_id)`` on ``env.action_space.sample()`` actions: what a random policy
    (or an untrained learner) sends, nearly always outside the feasible set, so the env's default
    ``infeasible="repair"`` path runs. 64 pre-drawn actions (space seeded 0) are cycled; only
    ``env.step`` is timed; an episode end resets untimed. ``horizon`` (in ``env_kw``): default 10**9, never
    reached; an env that draws its whole arrival sequence up front (P4) passes ``n`` + the warm-up instead."""
    import gymnasium as gym

    env_kw.setdefault("horizon", 10**9)
    env = gym.make(env_id, oracle=False, **env_kw)
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


def numba_threads() -> int:
    """Threads the numba kernels run on (a native vector env's parallel kernel uses them all)."""
    try:
        import numba

        return int(numba.get_num_threads())
    except ImportError:  # pragma: no cover - numba is a core dependency
        return 1


def vector_sampled_rate(env_id: str, label: str, steps: int, num_envs: int = 1024, target: float | None = None,
                        per_core: bool = False, **env_kw) -> Row:
    """Env-steps/s of the native vector env on ``action_space.sample()`` batches (the repair path).

    ``per_core``: divide by :func:`numba_threads` (the kernel is parallel over sub-envs, so the total
    depends on the core count; ``target`` is then per core)."""
    import gymnasium as gym

    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", oracle=False,
                       horizon=10**9, **env_kw)
    env.reset(seed=0)
    env.action_space.seed(0)
    batches = [env.action_space.sample() for _ in range(4)]
    rate = vector_rate(env, batches, steps)
    unit = "env-steps/s"
    what = f"{label} native vector env, {num_envs} envs, action_space.sample()"
    if per_core:
        threads = numba_threads()
        rate, unit = rate / threads, "/s/core"
        what += f", per core ({threads} numba threads)"
    return Row(what, rate, unit, f">= {target:,.0f}" if target else "", rate >= target if target else None)
