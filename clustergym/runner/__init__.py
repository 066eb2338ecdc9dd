"""The runner layer: evaluating agents on envs (:func:`~clustergym.runner.evaluation.evaluate`), its worker processes
and Ray backend, the resumable run store, episodes, results files, replays and the checkers of
:mod:`~clustergym.runner.testing`. It imports the core, the envs, the agents and the baselines, never the
learning stack."""
