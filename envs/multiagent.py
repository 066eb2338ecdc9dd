"""Index of the multi-agent (PettingZoo ``ParallelEnv``) versions, keyed by the single env's id.

    from clustergym.envs.multiagent import parallel_env
    env = parallel_env("clustergym/MultiServerChannel-v0", horizon=500, oracle=False)

Each entry lives beside its family and takes exactly the single env's kwargs (docs/multiagent.md).
Modules load on first use, so importing ``clustergym`` does not import PettingZoo.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["PARALLEL_ENVS", "parallel_env", "parallel_env_ids"]

# single-env id -> "module:constructor" of its ParallelEnv (agents in the comment)
PARALLEL_ENVS: dict[str, str] = {
    "clustergym/MultiServerChannel-v0": "clustergym.envs.multiserver.channel.parallel:parallel_env",  # ports
    "clustergym/MultiServerAllocation-v0": "clustergym.envs.multiserver.allocation.parallel:parallel_env",  # servers
    "clustergym/ApproxJobs-v0": "clustergym.envs.approxjobs.parallel:parallel_env",  # machines
}


def parallel_env_ids() -> tuple[str, ...]:
    """The single-env ids that have a ParallelEnv version."""
    return tuple(PARALLEL_ENVS)


def parallel_env(env_id: str, **kwargs: Any):
    """The ParallelEnv version of ``env_id`` (with or without the ``clustergym/`` prefix) built with ``kwargs``."""
    key = env_id if env_id in PARALLEL_ENVS else f"clustergym/{env_id}"
    if key not in PARALLEL_ENVS:
        raise ValueError(f"env_id={env_id!r} has no multi-agent version: expected one of {', '.join(PARALLEL_ENVS)}")
    module, name = PARALLEL_ENVS[key].split(":")
    return getattr(importlib.import_module(module), name)(**kwargs)
