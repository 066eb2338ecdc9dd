"""Runner: agents × instances × seeds on one env, with common random numbers.

What a run is and how its normalised score is computed: :mod:`clustergym.evaluation`.

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

__all__ = ["BACKENDS", "TIMING_FIELDS", "Episode", "RunResult", "Results", "evaluate", "run_episode", "run_one",
           "run_tasks", "time_decisions", "Transition", "make_env", "scenario_fingerprint", "worker_pool",
           "Interrupted", "WorkerDied", "was_interrupted", "attach_scores", "aligned_table", "SCORE_DEFINITION"]

# earlier private names, kept for code that imported them
_scenario_fingerprint, _check_size, _check_count = scenario_fingerprint, check_size, check_count
_atomic_write, _strict_json = atomic_write, strict_json
