"""Index of the multi-agent (PettingZoo ``ParallelEnv``) versions, keyed by the single env's id.

    from clustergym.envs.multiagent import parallel_env
    env = parallel_env("clustergym/MultiServerChannel-v0", horizon=500, oracle=False)

Each entry lives beside its family and takes exactly the single env's kwargs (docs/multiagent.md).
Modules load on first use, so importing ``clustergym`` does not import PettingZoo.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from clustergym.core.family import family_specs

__all__ = ["PARALLEL_ENVS", "parallel_env", "parallel_env_ids"]


class _ParallelIndex(Mapping):
    """single-env id -> "module:constructor" of its ParallelEnv, read live from every registered
    family's ``EnvEntry.parallel_entry_point`` (so a user family registered later is included)."""

    def _index(self) -> dict[str, str]:
        return {e.id: e.parallel_entry_point for f in family_specs() for e in f.envs if e.parallel_entry_point}

    def __getitem__(self, env_id: str) -> str:
        return self._index()[env_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())

    def __repr__(self) -> str:
        return f"PARALLEL_ENVS({self._index()!r})"


# P1: ports as agents; P2: servers; P4: machines (docs/multiagent.md)
PARALLEL_ENVS: Mapping[str, str] = _ParallelIndex()


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
