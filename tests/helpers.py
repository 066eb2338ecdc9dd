"""Shared test helpers: rollouts and deep equality of observations/infos (they live in
``clustergym.testing``, which users' own envs and agents can run too)."""

from __future__ import annotations

from clustergym.testing import deep_equal, rollout, valid_random_action

__all__ = ["deep_equal", "rollout", "valid_random_action"]
