"""The P3 rows of ``clustergym bench``: env step rates, GADGET's decision time, the per-slot MILP oracle, training."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

from clustergym.core.agent import make, public_info
from clustergym.bench.rates import Row, sampled_action_rate, sized
from clustergym.bench.throughput import training_rates
from clustergym.runner.episode import time_decisions

__all__ = ["agent_act", "bench_rows"]

ENV_ID = "clustergym/RingAllReduce-v0"


def _env_rate(mode: str, n: int) -> float:
    env = gym.make(ENV_ID, action_mode=mode, horizon=10**9)
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    space = env.action_space
    for _ in range(20):  # warm the compiled placement
        obs, r, term, trunc, info = env.step(np.where(info["action_mask"], space.sample(), 0))
    spent = 0.0
    for _ in range(n):
        # random valid action: random entries for visible jobs (env repairs the rest)
        a = np.where(info["action_mask"], rng.integers(0, space.nvec), 0)
        t0 = time.perf_counter()
        obs, r, term, trunc, info = env.step(a)
        spent += time.perf_counter() - t0
    return n / spent


def bench_rows(quick: bool):
    rows = []
    n = sized(3000) if quick else 20000
    rate = _env_rate("ring_size", n)
    rows.append(Row("P3 env step (paper default, ring_size mode, random actions)", rate, "steps/s", ">= 2,000",
                    rate >= 2000))
    rows.append(Row("P3 env step (paper default, placement mode, random actions)", _env_rate("placement", n // 3),
                    "steps/s", "", None))

    rows.append(sampled_action_rate(ENV_ID, "P3", sized(300) if quick else 2000))
    # Placement mode (the default): 1,600 categorical dimensions; SB3's own head runs ~6 env-steps/s here.
    rows.extend(training_rates(ENV_ID, "P3", quick, ratio_target=10.0))
    # ring_size mode (MultiDiscrete(J_max)): the faster DRL option, fast head only
    rows.extend(training_rates(ENV_ID, "P3 ring_size", quick, heads=("fast",), action_mode="ring_size"))
    slots = sized(100, 10) if quick else 200
    # The paper-default env (horizon 200, its default oracle=False) as before; the runner's episode loop.
    times = list(time_decisions(gym.make(ENV_ID, horizon=200), make("gadget", family="ringallreduce"), slots))
    times = np.asarray(times[5:]) * 1000
    med = float(np.median(times))
    rows.append(Row(f"GADGET decision, paper default (T=200, slots 5-{slots})", med, "ms median", "<= 200 ms",
                    med <= 200))
    rows.append(Row("GADGET decision, paper default, p95", float(np.percentile(times, 95)), "ms", "", None))
    from clustergym.envs.ringallreduce.oracle import solve_slot

    env = gym.make(ENV_ID, num_servers=12, max_jobs=6, arrival_rate=1.0, horizon=10**6).unwrapped
    obs, info = env.reset(seed=0)
    tm = []
    for _ in range(sized(10) if quick else 40):
        w = info["window"]
        t0 = time.perf_counter()
        solve_slot(env.problem.topology, w["cap"], w["zeta"], w["attained"], w["lam1"], w["lam2"], w["lam3"], w["bw"])
        tm.append(time.perf_counter() - t0)
        obs, r, term, trunc, info = env.step(agent_act(env, info))
    rows.append(Row("P3 MILP oracle per slot (12 servers, <= 6 jobs)", float(np.median(tm) * 1000), "ms median", "",
                    None))
    return rows


def agent_act(env, info):
    """FIFO-like feasible action for the oracle benchmark (keeps jobs progressing)."""
    agent = make("fifo", family="ringallreduce")
    agent.reset(env.problem, seed=0)
    return agent.act(None, public_info(info))
