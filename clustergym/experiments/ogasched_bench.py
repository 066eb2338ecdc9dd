"""The P2 rows of ``clustergym bench``: env and vector-env step rates, OGASched's decision time, the large-scale run,
training."""

from __future__ import annotations

import time

import numpy as np

from clustergym.agents.ogasched import proportional_share
from clustergym.bench.rates import (Row, decision_times, is_tiny, numba_threads, sampled_action_rate, sized, vector_rate,
                                   vector_sampled_rate)
from clustergym.bench.throughput import training_rates
from clustergym.runner.episode import run_one
from clustergym.experiments.ogasched_runs import ENV_ID

__all__ = ["bench_rows", "large_run", "p2_env_steps", "p2_vector_steps"]


def p2_env_steps(quick: bool):
    import gymnasium as gym

    env = gym.make(ENV_ID, oracle=False, horizon=10**9)
    pb = env.unwrapped.problem
    rng = np.random.default_rng(0)
    base = proportional_share(pb)
    actions = [base * rng.random(base.shape) for _ in range(64)]  # feasible (inside Y), varied
    env.reset(seed=0)
    for i in range(20):  # warm-up, untimed: loads (or on a fresh install compiles) the numba kernels
        env.step(actions[i])
    n = sized(20_000) if quick else 100_000
    t0 = time.perf_counter()
    for i in range(n):
        env.step(actions[i & 63])
    rate = n / (time.perf_counter() - t0)
    return Row("P2 env step (paper default |R|=128 K=6, gym.make, feasible, oracle off)", rate, "steps/s",
               ">= 10,000", rate >= 10_000)


def p2_vector_steps(quick: bool, num_envs: int = 1024):
    import gymnasium as gym

    env = gym.make_vec(ENV_ID, num_envs=num_envs, vectorization_mode="vector_entry_point", oracle=False,
                       horizon=10**9)
    pb = env.unwrapped.problem
    rng = np.random.default_rng(0)
    base = proportional_share(pb)
    # Feasible float32 batches (inside Y; the factor 0.99 keeps float32 rounding inside the tolerance).
    batches = [(base * rng.uniform(0.0, 0.99, size=(num_envs, *base.shape))).astype(np.float32) for _ in range(4)]
    env.reset(seed=0)
    rate = vector_rate(env, batches, sized(30) if quick else 200)
    threads = numba_threads()  # the kernel is parallel over sub-envs: report per core, no target
    return Row(f"P2 native vector env, {num_envs} envs (|E|={pb.num_edges}, K={pb.num_device_types}, float32), per core "
               f"({threads} numba threads)", rate / threads, "/s/core", "", None)


def _ogasched_decisions(slots: int, scenario: str):
    return decision_times(ENV_ID, "ogasched", slots, scenario=scenario)


def large_run(horizon: int, seed: int = 0, oracle: bool = True) -> dict:
    """The §4.3 large-scale run (|L|=100, |R|=1024), with the hindsight optimum at the end unless not ``oracle``."""
    t0 = time.perf_counter()
    r = run_one(ENV_ID, "ogasched", seed, horizon, {"scenario": "large", "oracle": oracle})
    return {"wall_s": time.perf_counter() - t0, "total_reward": r.total_reward, "regret": r.regret,
            "decision_ms_median": r.decision_ms_median}


def bench_rows(quick: bool):
    rows = [p2_env_steps(quick),
            sampled_action_rate(ENV_ID, "P2", sized(5_000) if quick else 30_000, target=10_000),
            sampled_action_rate(ENV_ID, "P2 port mode", sized(5_000) if quick else 30_000, target=10_000, action_mode="port"),
            sampled_action_rate(ENV_ID, "P2 port_device mode", sized(5_000) if quick else 30_000, target=10_000,
                                action_mode="port_device"),
            p2_vector_steps(quick),
            # per core: the kernel is parallel over sub-envs; the learner, not the env, bounds training
            vector_sampled_rate(ENV_ID, "P2", sized(10) if quick else 60, target=40_000, per_core=True),
            # Box actions: SB3's Gaussian in both heads, one row
            *training_rates(ENV_ID, "P2", quick, heads=("fast",))]
    times, pb = _ogasched_decisions(sized(300, 5) if quick else 2000, "paper")
    ms = float(np.median(times) * 1000)
    rows.append(Row(f"OGASched decision, paper default (|E|={pb.num_edges}, K={pb.num_device_types})", ms,
                    "ms median", "<= 2 ms", ms <= 2.0))
    times, pb = _ogasched_decisions(sized(50, 3) if quick else 300, "large")
    ms = float(np.median(times) * 1000)
    rows.append(Row(f"OGASched decision, large (|L|=100, |R|=1024, |E|={pb.num_edges})", ms, "ms median",
                    "<= 50 ms", ms <= 50.0))
    T = sized(1000, 20) if quick else 10_000
    oracle = not is_tiny()  # the best static oracle's LP at this size takes ~20 s: not at the smoke-test sizes
    out = large_run(T, oracle=oracle)
    rows.append(Row(f"Large-scale run, T={T}, {'incl.' if oracle else 'without'} best static oracle "
                    "(paper T=10,000: ~15 h)", out["wall_s"], "s wall", "completes", True))
    return rows
