"""The P1 rows of ``clustergym bench``: env and vector-env step rates, the oracle, ESDP's decision time, training."""

from __future__ import annotations

import time
import tracemalloc

import gymnasium as gym
import numpy as np

from clustergym.agents.esdp import ESDP
from clustergym.baselines.multiserver_channel import greedy_fill
from clustergym.bench.rates import Row, decision_times, is_tiny, sampled_action_rate, sized, vector_rate
from clustergym.bench.throughput import training_rates
from clustergym.envs.multiserver.channel.oracle import knapsack_max

__all__ = ["bench_rows", "esdp_large_rows", "esdp_rows", "late_decision", "p1_env_steps", "p1_oracle", "p1_vector_steps"]

ENV_ID = "clustergym/MultiServerChannel-v0"


def p1_env_steps(quick: bool) -> Row:
    env = gym.make("clustergym/MultiServerChannel-v0", oracle=False, horizon=10**9)
    pb = env.unwrapped.problem
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    # Warm-up, untimed: the first step loads (or, on a fresh install, compiles) the numba kernels.
    for _ in range(20):
        obs, r, term, trunc, info = env.step(np.zeros(pb.num_edges, dtype=np.int8))
    n = sized(20_000) if quick else 100_000
    spent = 0.0
    for _ in range(n):
        # a random *valid* action: random order over channels of ports with a job, first fit
        order = rng.permutation(np.flatnonzero(info["action_mask"]))
        a = greedy_fill(order, pb.demand, pb.capacity, True, pb.num_edges)
        t0 = time.perf_counter()
        obs, r, term, trunc, info = env.step(a)
        spent += time.perf_counter() - t0
    rate = n / spent
    return Row("P1 env step (paper default, gym.make, random valid, oracle off)", rate, "steps/s", ">= 20,000",
               rate >= 20_000)


def p1_vector_steps(quick: bool, num_envs: int = 1024) -> Row:
    env = gym.make_vec("clustergym/MultiServerChannel-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                       oracle=False, horizon=10**9)
    pb = env.unwrapped.problem
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    # Valid action batches: random first fit over all channels, restricted to each sub-env's current
    # active channels would need the state; channels of idle ports are dropped by the repair at no
    # extra cost, so we pre-generate capacity-feasible batches over all channels.
    batches = [np.stack([greedy_fill(rng.permutation(pb.num_edges), pb.demand, pb.capacity, True, pb.num_edges)
                         for _ in range(num_envs)]).astype(np.int8) for _ in range(4)]
    rate = vector_rate(env, batches, sized(50) if quick else 300)
    return Row(f"P1 native vector env, {num_envs} envs", rate, "env-steps/s", ">= 300,000 (goal 1M)",
               rate >= 300_000)


def p1_oracle(quick: bool) -> Row:
    env = gym.make("clustergym/MultiServerChannel-v0", horizon=10**9).unwrapped
    obs, info = env.reset(seed=0)
    v, pb = env.scenario.truth.mean_utility, env.problem
    times = []
    for _ in range(sized(300) if quick else 2000):
        active = np.flatnonzero(info["action_mask"])
        t0 = time.perf_counter()
        knapsack_max(v[active], pb.demand[active], pb.capacity)
        times.append(time.perf_counter() - t0)
        obs, r, term, trunc, info = env.step(np.zeros(pb.num_edges, dtype=np.int8))
    ms = float(np.median(times) * 1000)
    return Row("P1 oracle per slot (exact knapsack DP, paper default)", ms, "ms", "<= 5 ms", ms <= 5.0)


def _esdp_decisions(slots: int, **env_kw) -> tuple[np.ndarray, object]:
    return decision_times(ENV_ID, "esdp", slots, **env_kw)


def esdp_rows(quick: bool) -> list:
    # Warm the compiled DP once so the first decision's JIT time is not counted.
    _esdp_decisions(3, num_servers=8)
    slots = sized(400, 20) if quick else 1500
    times, pb = _esdp_decisions(slots)
    late = times[slots // 2:]  # after exploration: every channel tried, full-size DP
    ms = float(np.median(late) * 1000)
    rows = [Row(f"ESDP decision, paper default (|E|={pb.num_edges}, c={pb.capacity.tolist()}, slots {slots // 2}-{slots})",
                ms, "ms median", "<= 100 ms", ms <= 100.0),
            Row("ESDP decision, paper default, p95", float(np.percentile(late, 95) * 1000), "ms", "", None)]
    for ratio in (0.1, 0.15, 0.2, 0.25, 0.3):
        n = sized(150, 10) if quick else 400
        times, pb = _esdp_decisions(n, capacity_ratio=ratio)
        grid = int(np.prod(np.asarray(pb.capacity) + 1))
        rows.append(Row(f"  ESDP vs capacity: ratio {ratio:.2f}, c={pb.capacity.tolist()}, Π(c_k+1)={grid}",
                        float(np.median(times[n // 2:]) * 1000), "ms median", "(growth)", None))
    return rows


def late_decision(backend: str, servers: int = 80, t: int = 2000, repeats: int = 3, seed: int = 0
                  ) -> tuple[float, float, int]:
    """ESDP's decision at slot ``t`` of the |R| = ``servers`` scenario (the paper's |R| sweep), the statistics set
    as a run leaves them by then (every channel tried, counts up to t/4, means in [0, 1]); returns the median
    seconds over ``repeats`` decisions made as a run makes them (the DP's buffers kept from the previous
    decision), the peak of the memory allocated during a first decision (tracemalloc: numpy's arrays, the DP
    tables included) and the DP cells it evaluated (pruned kernel)."""
    env = gym.make(ENV_ID, horizon=10, num_servers=servers).unwrapped
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    E = env.problem.num_edges
    ag = ESDP(backend=backend)
    ag.reset(env.problem, seed=seed)
    ag.t = t - 1
    ag.n[:] = rng.integers(20, t // 4, E)
    ag.sum_z[:] = ag.n * rng.random(E)
    ag.decide(obs["arrivals"])  # compiles the kernels (first call) and sizes the workspace
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ag.decide(obs["arrivals"])
        times.append(time.perf_counter() - t0)
    ag._workspace.clear()
    tracemalloc.start()
    ag.decide(obs["arrivals"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return float(np.median(times)), float(peak), ag.last_dp_cells


def esdp_large_rows(quick: bool) -> list:
    """ESDP at |R| = 80 (the |R| sweep's largest size) at slot 2,000 (|R| = 20 at slot 200 at the --tiny sizes): the
    pruned kernel beside the dense reference kernel in the same run."""
    reps = sized(2) if quick else 5
    # at the --tiny smoke-test sizes a smaller scenario (the dense kernel takes seconds and 1.6 GiB at |R| = 80)
    servers, t = (20, 200) if is_tiny() else (80, 2000)
    ms_new, mem_new, cells = late_decision("pruned", servers, t, repeats=reps)
    ms_ref, mem_ref, _ = late_decision("numba", servers, t, repeats=1 if quick else 3)
    ms_new, ms_ref = 1000 * ms_new, 1000 * ms_ref
    at = f"|R| = {servers}, slot {t:,}"
    return [Row(f"ESDP decision, {at} (pruned kernel), median", ms_new, "ms", "<= 250 ms", ms_new <= 250.0),
            Row(f"ESDP decision, {at} (pruned kernel), peak memory", mem_new / 2**20, "MiB", "<= 1,024 MiB",
                mem_new <= 2**30),
            Row(f"  the same decision with the dense reference kernel (DP cells: pruned {cells:,})", ms_ref, "ms",
                f"{ms_ref / max(ms_new, 1e-9):.1f}x slower, {mem_ref / 2**20:,.0f} MiB", None)]


def bench_rows(quick: bool):
    return [p1_env_steps(quick), sampled_action_rate(ENV_ID, "P1", sized(1_000) if quick else 5_000), p1_vector_steps(quick),
            p1_oracle(quick), *esdp_rows(quick), *esdp_large_rows(quick),
            # PPO on MultiBinary: SB3's Bernoulli is already one tensor op (same in both heads): one row.
            *training_rates(ENV_ID, "P1", quick, heads=("fast",)),
            *training_rates(ENV_ID, "P1", quick, algo="maskable_ppo", ratio_target=3.0)]
