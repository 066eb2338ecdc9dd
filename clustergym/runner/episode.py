"""One episode: the evaluation loop every runner, experiment and benchmark shares, and one run of it.

:func:`run_episode` plays an agent on an env (the agent sees ``info`` without ``"metrics"``), :func:`run_one`
turns one (agent, instance, seed) into a :class:`clustergym.runner.results.RunResult`. :func:`make_env` is the
runner's ``gym.make``; :func:`scenario_fingerprint` tells whether two env kwargs build the same scenario.
"""

from __future__ import annotations

import hashlib
import pickle
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np

from clustergym.core.agent import make as make_agent, public_info
from clustergym.core.metrics import MetricsAccumulator, _scalar, metrics_spec_of
from clustergym.runner.results import RunResult

__all__ = ["Episode", "Transition", "agent_statistics", "bound_agent", "make_env", "run_episode", "run_one", "scenario_fingerprint", "time_decisions"]


@dataclass
class Episode:
    """What :func:`run_episode` measured (arrays cover the ``steps`` slots played)."""

    steps: int
    rewards: np.ndarray  # (steps,) reward of each slot
    decision_s: np.ndarray  # (steps,) seconds spent in agent.act per slot
    regrets: np.ndarray  # (steps,) metrics["regret"], NaN where the env reported none
    oracle: np.ndarray  # (steps,) metrics["oracle_reward"], NaN where none
    metrics: MetricsAccumulator  # every slot's metrics, aggregated as the env declares them
    wall_s: float  # wall time from the first act to the last step
    obs: Any = None  # the last observation
    info: dict = field(default_factory=dict)  # the last info (with metrics)
    terminated: bool = False
    truncated: bool = False

    @property
    def final_metrics(self) -> dict:
        return self.metrics.last


class Transition(NamedTuple):
    """One slot as :func:`run_episode` saw it (full infos, with metrics: for evaluation code only)."""

    t: int  # slot index from 0
    obs: Any  # the observation the agent acted on
    info: dict  # the info that came with it
    action: Any
    reward: float
    next_obs: Any
    next_info: dict  # the info env.step returned


def make_env(env_id: str, **kwargs):
    """``gym.make`` for the runner's own runs, without Gymnasium's passive-checker warning about Box
    entries with low == high: on P2's trace preset (``alibaba-v2023``) servers that lack a device type
    really have [0, 0] bounds, and the warning would print once per worker in the middle of a sweep."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Box action space maximum and minimum values are equal")
        return gym.make(env_id, **kwargs)


def scenario_fingerprint(env_id: str, horizon: int, env_kwargs: dict) -> str | None:
    """A hash of the scenario an env is built from (None if it cannot be pickled): two env kwargs with the
    same fingerprint build the same instance (e.g. a trace preset whatever its ``scenario_seed``)."""
    env = make_env(env_id, horizon=horizon, **env_kwargs)
    try:
        return hashlib.sha256(pickle.dumps(env.unwrapped.scenario)).hexdigest()
    except Exception:  # noqa: BLE001 - an unpicklable scenario: assume the seed matters
        return None
    finally:
        env.close()


def run_episode(env, agent, seed: int | None, max_steps: int | None = None, *,
                progress: Callable[[int], None] | None = None,
                on_step: Callable[[Transition], None] | None = None) -> Episode:
    """The evaluation loop every runner, experiment and decision benchmark shares.

    ``env.reset(seed)``, ``agent.reset(problem, seed)``, then per slot: ``agent.act(obs, info)`` (timed),
    ``env.step``, ``agent.update(...)``, with ``info`` always passed through
    :func:`clustergym.core.agent.public_info` (no ``"metrics"``: agents never see evaluation quantities), and
    the metrics accumulated as the env declares them (:mod:`clustergym.core.metrics`). Stops at the end of the
    episode or after ``max_steps`` slots (default: the env's ``horizon``).

    Args:
        env: a single env (``gym.make(...)`` or its ``.unwrapped``).
        agent: an agent (:class:`clustergym.core.agent.Agent`).
        seed: the dynamics seed for ``env.reset`` and ``agent.reset``.
        max_steps: at most this many slots.
        progress: called with the number of slots done, every 200 slots and at the end.
        on_step: called with each slot's :class:`Transition` after the agent's update (diagnostics that
            read the state an agent acted on, e.g. the jobs in the window when its decision was timed).
    """
    base = getattr(env, "unwrapped", env)
    n = int(base.horizon if max_steps is None else max_steps)
    obs, info = env.reset(seed=seed)
    agent.reset(base.problem, seed=seed)
    rewards = np.zeros(n)
    regrets = np.full(n, np.nan)
    oracle = np.full(n, np.nan)
    decision = np.zeros(n)
    acc = MetricsAccumulator(metrics_spec_of(env))
    t0 = time.perf_counter()
    steps = 0
    terminated = truncated = False
    for t in range(n):
        pub = public_info(info)
        d0 = time.perf_counter()
        action = agent.act(obs, pub)
        decision[t] = time.perf_counter() - d0
        next_obs, reward, terminated, truncated, next_info = env.step(action)
        agent.update(obs, action, reward, next_obs, public_info(next_info))
        if on_step is not None:
            on_step(Transition(t, obs, info, action, reward, next_obs, next_info))
        info = next_info
        rewards[t] = reward
        m = info.get("metrics", {})
        if "regret" in m:
            regrets[t] = m["regret"]
        if "oracle_reward" in m:
            oracle[t] = m["oracle_reward"]
        acc.add(m)
        obs = next_obs
        steps = t + 1
        if progress is not None and (steps % 200 == 0 or terminated or truncated):
            progress(200 if steps % 200 == 0 else steps % 200)
        if terminated or truncated:
            break
    wall = time.perf_counter() - t0
    return Episode(steps=steps, rewards=rewards[:steps], decision_s=decision[:steps], regrets=regrets[:steps],
                   oracle=oracle[:steps], metrics=acc, wall_s=wall, obs=obs, info=info, terminated=bool(terminated),
                   truncated=bool(truncated))


def time_decisions(env, agent, slots: int, seed: int = 0, on_step: Callable[[Transition], None] | None = None
                   ) -> np.ndarray:
    """Seconds per ``agent.act`` over ``slots`` slots of :func:`run_episode` (the decision-timing rows
    of ``clustergym bench``); ``env`` should have ``oracle=False`` so only the agent is timed."""
    return run_episode(env, agent, seed, max_steps=slots, on_step=on_step).decision_s


def agent_statistics(agent) -> dict[str, float]:
    """The agent's :meth:`~clustergym.core.agent.BaseAgent.run_statistics` as ``agent_<name>`` metrics (none for an agent
    without the method)."""
    fn = getattr(agent, "run_statistics", None)
    return {f"agent_{k}": float(v) for k, v in (fn() if callable(fn) else {}).items()}


def bound_agent(agent_spec: str, env_id: str, env_kwargs: dict | None = None, made=None):
    """The agent ``agent_spec`` (``made``: that agent, already made) for an env of ``env_id`` built with
    ``env_kwargs``: a trained model is told the kwargs (``bind_env_kwargs``: the padding its env was built
    with) before its episode."""
    agent = make_agent(agent_spec, env_id=env_id) if made is None else made
    bind = getattr(agent, "bind_env_kwargs", None)
    if callable(bind):
        bind(dict(env_kwargs or {}))
    return agent


def run_one(env_id: str, agent_spec: str, seed: int, horizon: int, env_kwargs: dict | None = None,
            progress: Callable[[int], None] | None = None) -> RunResult:
    """One episode of ``agent_spec`` on ``env_id`` with env seed ``seed`` (:func:`run_episode`).

    The instance is ``env_kwargs["scenario_seed"]`` when given (recorded as ``RunResult.instance``).
    The agent gets the public problem and ``info`` without ``"metrics"``; the runner keeps the
    metrics for evaluation (per-slot ``regret`` when the env has an oracle).
    """
    env = make_env(env_id, horizon=horizon, **(env_kwargs or {}))
    agent = bound_agent(agent_spec, env_id, env_kwargs)
    ep = run_episode(env, agent, seed, max_steps=horizon, progress=progress)
    env.close()
    steps, rewards, regrets, oracle, decision = ep.steps, ep.rewards, ep.regrets, ep.oracle, ep.decision_s
    final_metrics = ep.final_metrics
    sums = ep.metrics.sums
    has_regret = not np.all(np.isnan(regrets))
    regret: float | None  # None where the env reports no regret
    cum: np.ndarray | None  # (steps,) cumulative regret, or None
    if "episode_regret" in final_metrics:  # problems whose regret is defined at episode end only
        regret = float(final_metrics["episode_regret"])
        has_regret = True
        cum = np.full(steps, np.nan)
        cum[-1] = regret
    else:
        regret = float(np.nansum(regrets)) if has_regret else None
        cum = np.nancumsum(regrets) if has_regret else None
    oracle_total = float(np.nansum(oracle)) if not np.all(np.isnan(oracle)) else None
    value_total = float(sums["expected_reward"]) if "expected_reward" in sums else float(rewards.sum())
    if oracle_total is not None:
        bound_total = oracle_total
    elif _scalar(final_metrics.get("episode_bound")) is not None:
        bound_total = float(final_metrics["episode_bound"])
    elif _scalar(final_metrics.get("episode_best_static")) is not None:
        bound_total = float(final_metrics["episode_best_static"])
    else:
        bound_total = None
    instance = (env_kwargs or {}).get("scenario_seed")
    return RunResult(
        agent=agent_spec, seed=int(seed), total_reward=float(rewards.sum()),
        mean_reward=float(rewards.mean()) if steps else 0.0,
        regret=regret, oracle_total=oracle_total,
        steps=steps, wall_s=ep.wall_s,
        decision_ms_median=float(np.median(decision) * 1000) if steps else 0.0,
        decision_ms_p95=float(np.percentile(decision, 95) * 1000) if steps else 0.0,
        metrics={**ep.metrics.summary(steps), **agent_statistics(agent)},
        instance=None if instance is None else int(instance),
        value_total=value_total, bound_total=bound_total, reward=rewards, cum_regret=cum,
    )
