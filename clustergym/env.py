"""Base class with the conventions every clustergym environment shares (SPEC §3.2)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from clustergym.core import INFEASIBLE_MODES, check_choice, check_int


class ClusterEnv(gym.Env):
    """Common plumbing: horizon, ``infeasible`` mode, render modes, action validation.

    Subclasses set ``family`` (the agent-registry family name) and expose ``problem`` (the public
    problem handed to agents) and ``scenario`` (public problem + hidden truth).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    family: str = ""
    # The keys of info["metrics"] and their kind (clustergym/metrics.py); every env declares its own.
    metrics_spec: dict = {}

    def __init__(self, *, horizon: int, infeasible: str = "repair", render_mode: str | None = None,
                 oracle: bool = True):
        self.horizon = check_int("horizon", horizon, 1, None)
        self.infeasible = check_choice("infeasible", infeasible, INFEASIBLE_MODES)
        self.render_mode = check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        if not isinstance(oracle, (bool, np.bool_)):
            raise ValueError(f"oracle={oracle!r} is invalid: expected true or false")
        self.oracle = bool(oracle)

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Exact float64 (low, high) of a Box action space (used by ``clustergym.wrappers.RescaleBox``);
        envs whose float32 space bounds are rounded override it."""
        if not isinstance(self.action_space, gym.spaces.Box):
            raise ValueError(f"action_bounds: the action space is {self.action_space}, not a Box")
        return self.action_space.low.astype(np.float64), self.action_space.high.astype(np.float64)

    # -- helpers for subclasses ------------------------------------------------------------------
    def _as_int_action(self, action: Any, shape: tuple[int, ...], space_desc: str) -> np.ndarray:
        """Convert an action to an int array of ``shape``; ValueError on shape/NaN/non-integers."""
        try:
            a = np.asarray(action)
        except Exception as exc:  # pragma: no cover - exotic objects
            raise ValueError(f"action must be array-like matching {space_desc}: {exc}") from None
        if a.shape != shape:
            raise ValueError(f"action has shape {a.shape}, expected {shape} ({space_desc})")
        if a.dtype.kind == "b":
            return a.astype(np.int64)
        if a.dtype.kind in "iu":
            return a.astype(np.int64, copy=False)
        if a.dtype.kind == "f":
            if not np.all(np.isfinite(a)):
                raise ValueError(f"action contains NaN or inf, expected {space_desc}")
            if not np.all(a == np.round(a)):
                raise ValueError(f"action has non-integer values, expected {space_desc}")
            return a.astype(np.int64)
        raise ValueError(f"action has dtype {a.dtype}, expected {space_desc}")

    def _as_float_action(self, action: Any, shape: tuple[int, ...], space_desc: str) -> np.ndarray:
        try:
            raw = np.asarray(action)
        except Exception:  # noqa: BLE001 - ragged lists and exotic objects
            raise ValueError(f"action cannot be read as numbers, expected {space_desc}") from None
        # Real numbers only: complex (imaginary part dropped), strings, datetimes and objects are refused,
        # as the integer-action envs refuse them.
        if raw.dtype.kind not in "biuf":
            raise ValueError(f"action has dtype {raw.dtype}, expected real numbers ({space_desc})")
        a = raw.astype(np.float64, copy=False)
        if a.shape != shape:
            raise ValueError(f"action has shape {a.shape}, expected {shape} ({space_desc})")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"action contains NaN or inf, expected {space_desc}")
        return a
