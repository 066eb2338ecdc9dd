"""The P4 rows of ``clustergym bench``: env step rates, OPM's decision time, a paper-scale run, training."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

from clustergym.core.agent import make
from clustergym.bench.rates import Row, sampled_action_rate, sized
from clustergym.bench.throughput import training_rates
from clustergym.experiments.opm_runs import ENV, episode
from clustergym.runner.episode import time_decisions

__all__ = ["bench_rows"]


WARM_UP = 20


def _env_steps(quick: bool):
    n = sized(5_000) if quick else 30_000
    env = gym.make(ENV, horizon=WARM_UP + n + 1)  # P4 draws every arrival of the horizon up front: no more slots
    ag = make("random", family="approxjobs")
    obs, info = env.reset(seed=0)
    ag.reset(env.unwrapped.problem, seed=0)
    for _ in range(WARM_UP):  # warm-up, untimed (first calls load compiled code and caches)
        obs, r, term, trunc, info = env.step(ag.act(obs, info))
    spent = 0.0
    for _ in range(n):
        a = ag.act(obs, info)  # a random *valid* action (budgets respected)
        t0 = time.perf_counter()
        obs, r, term, trunc, info = env.step(a)
        spent += time.perf_counter() - t0
    rate = n / spent
    return Row("P4 env step (M=100, J_max=20, gym.make, random valid actions)", rate, "steps/s", ">= 5,000", rate >= 5_000)


def _opm_decision(quick: bool):
    # Enough long-lived jobs that the 100-slot window stays full.
    env = gym.make(ENV, num_machines=1000, max_jobs=100, horizon=10**6, arrival_rate=2.0, life_min=5000,
                   life_max=6000).unwrapped
    active = []
    times = time_decisions(env, make("opm", family="approxjobs"), 150 if quick else 600,
                           on_step=lambda tr: active.append(int(tr.obs["job_mask"].sum())))
    full = times[np.array(active) == 100]
    ms = float(np.median(full) * 1000)
    return [Row(f"OPM decision, M=1000, 100 active jobs ({full.size} slots)", ms, "ms median", "<= 10 ms", ms <= 10.0),
            Row("OPM decision, M=1000, 100 active jobs, p95", float(np.percentile(full, 95) * 1000), "ms", "", None)]


def _paper_scale(quick: bool):
    if quick:
        h = sized(2000, 40)
        r = episode(dict(scale="paper", horizon=h), "opm", 0)
        return [Row(f"P4 paper scale (M=1000), OPM, first {h:,} of 50,000 slots (quick)", r["wall_s"], "s", "(completes)",
                    True)]
    r = episode(dict(scale="paper"), "opm", 0)
    ok = r["steps"] == 50_000
    return [Row("P4 paper scale run: OPM, M=1000, 50,000 slots, wall time", r["wall_s"], "s", "(completes)", ok),
            Row("  its OPM decision median", r["decision_ms_median"], "ms", "", None)]


def bench_rows(quick: bool):
    n, n_job = (sized(2_000), sized(5_000)) if quick else (10_000, 30_000)
    return [_env_steps(quick), sampled_action_rate(ENV, "P4", n, horizon=WARM_UP + n + 1),
            sampled_action_rate(ENV, "P4 job mode", n_job, target=5_000, action_mode="job", horizon=WARM_UP + n_job + 1),
            *_opm_decision(quick),
            *_paper_scale(quick), *training_rates(ENV, "P4", quick, ratio_target=2.5),
            *training_rates(ENV, "P4", quick, algo="maskable_ppo")]
