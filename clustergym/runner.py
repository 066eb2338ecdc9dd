"""Runner: agents × instances × seeds on one env, with common random numbers.

A run is (agent, instance, seed). The **instance** is the scenario seed (env kwarg ``scenario_seed``:
graph, demands, hidden means, topology, job list); the **seed** drives the dynamics (arrivals, realised
utilities, service rates). Comparisons are made over instances (:mod:`clustergym.stats`): a result that
holds on one instance may flip on the next.

**Normalised score.** Where the env reports a bound, every run gets
``score = (V − V_random) / (B − V_random)`` on the same instance and seed, where

- ``V`` is the run's evaluated total: the expected reward (``Σ_t expected_reward``) when the env reports
  it, else the total reward;
- ``B`` is the bound: the per-slot oracle summed (``Σ_t oracle_reward``: P1's exact knapsack, P3's
  per-slot MILP when enabled), else ``info["metrics"]["episode_bound"]`` at the last step (an upper bound
  on the episode's total reward, e.g. P4's), else ``episode_best_static`` (P2: the best static allocation
  in hindsight, eq. 6; an online policy may beat it, so P2 scores can exceed 1);
- ``V_random`` is the evaluated total of the ``random`` agent on the same instance and seed (run for the
  purpose when ``random`` is not among the agents; those runs go to ``reference_runs``).

So ``random`` scores 0 and a policy that plays the oracle's actions scores 1.

The runner is four modules, one idea each; this module gathers their public names:

==============================  =================================================================
:mod:`clustergym.episode`       one episode (:func:`run_episode`) and one run (:func:`run_one`)
:mod:`clustergym.results`       :class:`RunResult`, :class:`Results` and the ``results.json`` they write
:mod:`clustergym.workers`       the worker pool (death recovery, signals) and the Ray backend
:mod:`clustergym.evaluation`    :func:`evaluate`: every agent on every (instance, seed)
==============================  =================================================================
"""

from clustergym.episode import Episode, Transition, make_env, run_episode, run_one, scenario_fingerprint, time_decisions
from clustergym.evaluation import BACKENDS, MAX_VALUES, check_count, check_size, evaluate
from clustergym.results import (Results, RunResult, SCORE_DEFINITION, TIMING_FIELDS, aligned_table, atomic_write,
                                attach_scores, strict_json)
from clustergym.workers import (Interrupted, WorkerDied, _SHARED_POOL, run_tasks, terminate_pool, was_interrupted,
                                worker_pool)
from clustergym.workers import _run_local  # noqa: F401  (the local backend, under its earlier name)

__all__ = ["BACKENDS", "TIMING_FIELDS", "Episode", "RunResult", "Results", "evaluate", "run_episode", "run_one",
           "run_tasks", "time_decisions", "Transition", "make_env", "scenario_fingerprint", "worker_pool",
           "Interrupted", "WorkerDied", "was_interrupted", "attach_scores", "aligned_table", "SCORE_DEFINITION"]

# earlier private names, kept for code that imported them
_scenario_fingerprint, _check_size, _check_count = scenario_fingerprint, check_size, check_count
_atomic_write, _strict_json = atomic_write, strict_json
