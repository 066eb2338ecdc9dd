"""DRL comparisons: the names that lived here, re-exported from :mod:`clustergym.learning`.

The learning stack has its own package now: the observation pipeline
(:mod:`clustergym.pipeline`, in the core), the fast action heads (:mod:`clustergym.learning.heads`),
training (:mod:`clustergym.learning.training`), the hyperparameter files
(:mod:`clustergym.learning.hyperparams`) and the ``sb3:`` evaluation agent with its no-pickle loader
(:mod:`clustergym.learning.agent`). Import from there; these names keep working.
"""

from __future__ import annotations

from clustergym.pipeline import (DRLObservation, EmpiricalStats, ObsPipeline, box_bounds as _box_bounds, hook as _hook,
                                 sb3_mask, unscale_action)

__all__ = ["ALGOS", "EmpiricalStats", "ObsPipeline", "DRLObservation", "SB3Agent", "make_train_env", "train",
           "sb3_mask", "plot_training_curve"]

_TRAINING = ("ALGOS", "SIDE_CAR", "NORM_FILE", "check_algo", "make_train_env", "train", "save_normalization",
             "plot_training_curve", "_monitor_curve")
_AGENT = ("SB3Agent", "safe_load", "_Constant", "_obs_space_for", "_STATE_ENTRIES")


def __getattr__(name: str):
    """Training and agent names load lazily (they import SB3 pieces); ``RescaleBox`` lives in
    :mod:`clustergym.wrappers`."""
    if name in _TRAINING:
        from clustergym.learning import training

        return getattr(training, name)
    if name == "_algo_class":
        from clustergym.learning.training import algo_class

        return algo_class
    if name == "_check_side_car":
        from clustergym.learning.sidecar import check_side_car

        return check_side_car
    if name in _AGENT:
        from clustergym.learning import agent

        return getattr(agent, name)
    if name == "RescaleBox":
        from clustergym.wrappers import RescaleBox

        return RescaleBox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
