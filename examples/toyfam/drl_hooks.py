"""The toy family's learning hooks (each optional; ``clustergym.core.family.FamilySpec.drl_hooks`` lists them)."""

import os

PARAM_RANGES = {"fast": (0.6, 0.9)}  # what --param-draws varies: the fast machine's rate [0.8]
TUNING_REFERENCE = "greedy"  # clustergym tune's objective: 0 = random, 1 = greedy
BENCH_THROUGHPUT = (({}, "auto"),)  # one "PPO training, env-steps/s" row of clustergym bench
HYPERPARAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hyperparams")
