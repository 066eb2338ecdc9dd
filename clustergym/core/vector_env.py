"""Base class of the native vector envs: N sub-envs stepped as arrays with a leading batch axis.

A native vector env runs the same per-slot dynamics code as its single env (a per-env kernel that
the single env calls directly and the vector env calls for every sub-env in one batched kernel), and
keeps per sub-env exactly the randomness the single env keeps: its own ``np_random`` (seeded as
``gymnasium.utils.seeding.np_random(s_i)``, like ``Env.reset(seed=s_i)``) and the child generators
drawn from it at every reset. Sub-env i seeded with s_i therefore replays the trajectory of a
single env reset with ``seed=s_i`` and, after each episode end, reset without a seed.

Conventions (Gymnasium 1.x ``VectorEnv``):

* ``reset(seed=None | int | list)``: an int s seeds sub-env i with s + i, a list gives one seed
  (or None) per sub-env, as ``SyncVectorEnv``; ``options={"reset_mask": mask}`` resets only the
  sub-envs where the (N,) bool mask is True; ``options={"scenario_seed": k}`` switches the sub-envs
  it resets to instance k (as the single env); other keys raise ValueError.
* Instances: every sub-env has its own instance (``scenario_seeds``). With the ``instances`` kwarg,
  each sub-env's reset (autoresets included) draws one from the set with its own generator, derived
  from the sub-env's seed as the single env derives it, so sub-env i seeded with s_i still replays a
  single env built with the same kwargs and reset with ``seed=s_i``.
* Autoreset: ``metadata["autoreset_mode"] = AutoresetMode.NEXT_STEP`` (Gymnasium's default). A
  sub-env whose episode ended at step t is reset at step t+1: its action is ignored, it returns
  the first observation of the new episode, reward 0, terminated = truncated = False, and no
  ``feedback``/``metrics`` (their ``_key`` masks are False there).
* Infos hold arrays with a leading batch axis and, for every key, a boolean ``_key`` mask saying
  which sub-envs returned it (nested for the ``feedback`` and ``metrics`` dicts), as
  ``SyncVectorEnv`` builds them.
* Errors: action form errors (shape, dtype, NaN/inf, out-of-range values) follow the single env's
  rules on every row; constraint violations follow ``infeasible`` on the rows of sub-envs that
  step. Messages name the sub-env index; a rejected step changes no state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv

from clustergym.core.scenario import INFEASIBLE_MODES, check_choice, check_int, child_generators
from clustergym.core.env import RESET_OPTIONS, ActType, ClusterEnv, InstanceSource, ObsType, check_reset_options

VECTOR_RESET_OPTIONS = (*RESET_OPTIONS, "reset_mask")

__all__ = ["ClusterVectorEnv", "with_masks"]


def with_masks(info: dict, present: np.ndarray) -> dict:
    """Add a ``_key`` mask (a copy of ``present``) for every key, recursing into dicts (Gymnasium's layout)."""
    out = {}
    for key, value in info.items():
        out[key] = with_masks(value, present) if isinstance(value, dict) else value
        out[f"_{key}"] = present.copy()
    return out


VectorStepReturn = tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]
"""(observations, rewards, terminations, truncations, infos), each with a leading (N,) batch axis."""


class ClusterVectorEnv(VectorEnv[ObsType, ActType, np.ndarray]):
    """Shared plumbing: seeding per sub-env, autoreset bookkeeping, ``reset_mask``, info masks.

    Typed as its single env, ``ClusterVectorEnv[ObsType, ActType]``: the observation is the single env's
    ``TypedDict`` with a leading (N,) batch axis on every array; ``step`` returns a :data:`VectorStepReturn`.

    Subclasses set ``_rng_names`` (the child generators of one sub-env, as the single env) and
    implement ``_start_episode(i)`` (state of sub-env i at t = 0, after ``self._rngs[i]`` is set),
    ``_observations()`` and ``_reset_info(mask)``.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}
    family: str = ""
    _rng_names: tuple[str, ...] = ()

    @classmethod
    def unsupported(cls, env_kwargs: dict) -> str | None:
        """Why the env kwargs ``env_kwargs`` (those of ``gym.make``) cannot be stepped by this vector env, or None
        when they can (every kwarg here; P3's steps one action mode). ``clustergym.learning.vec`` reads it to
        choose between the native vector env and single envs."""
        return None

    def __init__(self, num_envs: int, *, horizon: int, infeasible: str = "repair", oracle: bool = False,
                 render_mode: str | None = None):
        self.num_envs = check_int("num_envs", num_envs, 1, None)
        self._source: InstanceSource | None = None  # the single env's InstanceSource (set by the subclass)
        self._instance = np.zeros(self.num_envs, dtype=np.int64)  # (N,) scenario seed of each sub-env
        self.horizon = check_int("horizon", horizon, 1, None)
        self.infeasible = check_choice("infeasible", infeasible, INFEASIBLE_MODES)
        if render_mode is not None:
            raise ValueError(f"render_mode={render_mode!r} is invalid: the vector env does not render; "
                             f"render a single env (gym.make) instead")
        self.render_mode = None
        if not isinstance(oracle, (bool, np.bool_)):
            raise ValueError(f"oracle={oracle!r} is invalid: expected true or false")
        self.oracle = bool(oracle)
        N = self.num_envs
        self._np_randoms: list[np.random.Generator | None] = [None] * N  # np_random of each sub-env
        self._rngs: list[Any] = [None] * N  # child generators of each sub-env (a dict; None before its first reset)
        self._t = np.zeros(N, dtype=np.int64)  # (N,) slots elapsed in each sub-env's episode
        self._autoreset = np.zeros(N, dtype=bool)  # (N,) episode ended at the last step: reset at the next
        self._started = False

    # -- seeding and resets -------------------------------------------------------------------
    def _seeds(self, seed: int | list | None) -> list:
        N = self.num_envs
        if seed is None:
            return [None] * N
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            return [int(seed) + i for i in range(N)]
        seeds = list(cast(Iterable, seed))
        if len(seeds) != N:
            raise ValueError(f"If seeds are passed as a list the length must match num_envs={N} but got "
                             f"length={len(seeds)}.")
        return seeds

    def _reset_one(self, i: int, seed: int | None, options: dict | None = None) -> None:
        """What ``single_env.reset(seed=seed, options=options)`` does to its instance and randomness, for sub-env i."""
        rng = self._np_randoms[i]
        if seed is not None or rng is None:
            rng, _ = seeding.np_random(seed)
            self._np_randoms[i] = rng
        src = self._source
        if src is not None:
            k = src.choose(rng, seed, options, slot=i, valid=VECTOR_RESET_OPTIONS)
            if k is not None and k != self._instance[i]:
                self._use_instance(i, src.get(k), k)
                self._instance[i] = k
        self._rngs[i] = child_generators(rng, self._rng_names)
        self._t[i] = 0
        self._start_episode(i)

    def reset(self, *, seed: int | list | None = None,
              options: dict[str, Any] | None = None) -> tuple[ObsType, dict[str, Any]]:
        super().reset(seed=seed if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else None)
        seeds = self._seeds(seed)
        opts = check_reset_options(options, VECTOR_RESET_OPTIONS)
        k = opts.get("scenario_seed")
        if k is not None and self._source is not None:
            self._check_instance(self._source.get(k), k)  # a bad instance changes nothing
        mask = np.ones(self.num_envs, dtype=bool)
        if options is not None and "reset_mask" in options:
            mask = options["reset_mask"]
            if not isinstance(mask, np.ndarray) or mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be a numpy bool array of shape ({self.num_envs},)")
            if not mask.any():
                raise ValueError("options['reset_mask'] must contain at least one True value")
            if not self._started and not mask.all():
                raise ValueError("the first reset must reset every sub-env (no reset_mask)")
        for i in np.flatnonzero(mask):
            self._reset_one(int(i), seeds[i], opts)
        self._autoreset[mask] = False
        self._started = True
        return self._observations(), self._reset_info(mask)

    def _require_reset(self) -> None:
        if not self._started:
            raise RuntimeError("call reset() before step()")

    def _autoreset_envs(self) -> np.ndarray:
        """Reset (without a seed) the sub-envs whose episode ended at the last step; returns their mask."""
        done = self._autoreset.copy()
        for i in np.flatnonzero(done):
            self._reset_one(int(i), None)
        return done

    @property
    def instances(self):
        """The ``instances`` kwarg (scenario seeds drawn at each sub-env's reset), or None."""
        return None if self._source is None else self._source.instances

    @property
    def scenario_seeds(self) -> np.ndarray:
        """(N,) the instance (scenario seed) each sub-env runs."""
        return self._instance.copy()

    # Every native vector env keeps the single env it was built from (``_single``), the scenario and
    # public problem of each sub-env (``_scenarios``, ``problems``).
    _single: ClusterEnv
    @property
    def problem(self):
        """The public problem of sub-env 0 (``problems[i]`` for sub-env i)."""
        return self.problems[0]

    @property
    def scenario(self):
        """The scenario of sub-env 0 (each sub-env may run its own instance: ``scenario_seeds``)."""
        return self._scenarios[0]

    def _check_instance(self, scenario, k: int) -> None:
        """ValueError (naming the padding kwargs) if instance k does not fit this env's spaces (the single
        env's check: one set of spaces for both)."""
        self._single.check_instance(scenario, k)

    # -- hooks -------------------------------------------------------------------------------

    def _use_instance(self, i: int, scenario, k: int) -> None:  # pragma: no cover - abstract
        """Sub-env i switches to instance k (its spaces are checked here first)."""
        raise NotImplementedError

    def _start_episode(self, i: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _observations(self) -> ObsType:  # pragma: no cover - abstract
        raise NotImplementedError

    def _reset_info(self, mask: np.ndarray) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _bad_env(self, bad: np.ndarray) -> int:
        """Index of the first sub-env flagged in ``bad`` (N, ...)."""
        return int(np.argmax(bad.reshape(self.num_envs, -1).any(axis=1)))

    def _integer_actions(self, actions: Any, width: int, high: int, desc: str, range_msg: str | None = None,
                         dtype: Any = np.int64) -> np.ndarray:
        """(N, width) integer actions in 0..high, as ``dtype`` (bool actions are returned as they are); the single
        envs' form rules, with a ValueError naming the first bad sub-env: the shape, NaN or inf, non-integer
        values, then values out of range (``range_msg``, default "action values must be in 0..high")."""
        a = actions if isinstance(actions, np.ndarray) else np.asarray(actions)
        shape = (self.num_envs, width)
        if a.shape != shape:
            raise ValueError(f"actions have shape {a.shape}, expected {shape} (one row per sub-env, each {desc})")
        kind = a.dtype.kind
        if kind == "b":
            return a
        if kind == "f":
            finite = np.isfinite(a)
            if not finite.all():
                raise ValueError(f"sub-env {self._bad_env(~finite)}: action contains NaN or inf, expected {desc}")
            frac = a != np.round(a)
            if frac.any():
                raise ValueError(f"sub-env {self._bad_env(frac)}: action has non-integer values, expected {desc}")
        elif kind not in "iu":
            raise ValueError(f"actions have dtype {a.dtype}, expected {desc} per sub-env")
        if a.size:
            out = (a < 0) | (a > high)
            if out.any():
                msg = range_msg or f"action values must be in 0..{high}"
                raise ValueError(f"sub-env {self._bad_env(out)}: {msg}, expected {desc}")
        return np.ascontiguousarray(a, dtype=dtype)

    def close_extras(self, **kwargs: Any) -> None:
        pass
