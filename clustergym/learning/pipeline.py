"""The observation pipeline shared by training and evaluation, and the family DRL hooks.

Every clustergym env's Dict observation already carries what a learner needs besides the current
slot (the Gymnasium convention: ``info`` is diagnostics): the last slot's public feedback, the
empirical statistics of that feedback, and the public problem data a paper policy reads. The
statistics are computed by the env's simulator core from public feedback only (each family's
``learner_stats.py``; the single, native vector and PettingZoo envs share them):

=========================  =====================================================================
family                     statistics in the observation (the keys of ``drl_hooks.STATS_KEYS``)
=========================  =====================================================================
multiserver-channel (P1)   per channel: mean realised utility v̂_e ``utility_mean`` (0 if untried)
                           and the share of slots it was used n_e / t ``channel_share``; per
                           port: the share of slots with a job ``arrival_share``
multiserver-allocation     per port: the share of slots with a job ``arrival_share`` (the hidden
(P2)                       ρ_l, eq. 1) and the mean realised reward x_l q_l when it had a job
                           ``port_reward_mean``
ringallreduce (P3)         none: the observation already holds jobs, servers and links; what is
                           hidden is future arrivals only
approxjobs (P4)            per machine: the mean work per used slot ``machine_rate`` (the hidden
                           service rate, §III) and the share of slots it was used ``machine_share``
=========================  =====================================================================

A saved model must see at evaluation exactly the observations it was trained on, so both sides use
:class:`ObsPipeline`, which flattens the observation keys of a **layout** into one float32 vector:

* ``"full"`` (what ``clustergym train`` writes now, side-car ``"obs_layout": "full"``): every key of
  the Dict observation in the space's order, i.e. ``gymnasium.spaces.flatten(space, obs)``
  (``gymnasium.wrappers.FlattenObservation`` gives the same vector);
* ``"compact"``: the keys the family's ``drl_hooks.compact_keys`` names (in the space's order; every key
  where the family has none), and of some keys only the entries ``drl_hooks.compact_columns`` names.
  P2's are the per-port ones (arrivals, their shares, the mean and last per-port rewards, β and t: 47
  numbers instead of 13,549), what a learner in the per-port action modes needs; P3's leave out what
  repeats another entry (``job_mask``, ``link_present`` and the download columns of ``links``: 581
  numbers instead of 778) (docs/drl.md, "What the learner sees");
* ``"legacy"`` (side-cars without ``obs_layout``, e.g. the shipped pretrained models): the vector of
  earlier versions, [flatten(the observation keys of then, ``drl_hooks.legacy_keys``), the statistics
  in ``drl_hooks.STATS_KEYS`` order], read from today's observation, so the values are the same.

``stats=False`` leaves the statistics keys out of either layout. ``time_cap`` (side-car ``"time_cap"``, what
``clustergym train`` writes for a flat MLP: :data:`clustergym.core.env.TIME_CAP`) flattens the slot index ``t`` as
``min(t, time_cap)``: a flat network's input then stays in the range it trained on at any horizon (docs/drl.md,
"Time features"). The per-entity networks read ``t`` as it is and bound their own time features. :class:`DRLObservation` is the
Gymnasium wrapper around it (training, and the public :class:`clustergym.learning.wrappers.FlattenWithStats`);
:class:`clustergym.learning.sb3_agent.SB3Agent` uses the same pipeline when it acts in ``clustergym run``
(evaluation). :func:`flatten_batch` flattens a native vector env's batched Dict observation, row by
row equal to ``gymnasium.spaces.flatten``. :class:`EmpiricalStats` computes the same statistics outside the
env, from observations and ``info["feedback"]`` only; the tests check that the env's own statistics equal it.

No torch or SB3 here: importing this module is cheap. It belongs to the core: the public wrappers of
:mod:`clustergym.learning.wrappers` are built on it, and the learning stack imports it from here.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from clustergym.core.family import FAMILIES

__all__ = ["EmpiricalStats", "ObsPipeline", "DRLObservation", "LAYOUTS", "layout_keys", "layout_columns", "flatten_keys", "time_caps",
           "flat_size", "flatten_batch", "sb3_mask", "unscale_action", "box_bounds", "hook"]

LAYOUTS = ("full", "compact", "legacy")  # the flat observation layouts (module docstring)


def hook(family: str, name: str):
    """The family's DRL hook ``name`` (``FamilySpec.drl_hooks``), or None (no hook, or an unknown family)."""
    spec = FAMILIES.get(family)
    return None if spec is None else spec.hook(name)


def layout_keys(family: str, obs_space: gym.spaces.Dict, layout: str = "full", stats: bool = True) -> tuple[str, ...]:
    """The observation keys a flat vector of ``layout`` concatenates, in order (module docstring)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} is invalid: expected one of {', '.join(map(repr, LAYOUTS))}")
    stats_keys = tuple(hook(family, "STATS_KEYS") or ())
    if layout in ("full", "compact"):
        keys = tuple(obs_space.spaces)
        compact = hook(family, "compact_keys") if layout == "compact" else None
        if compact is not None:
            wanted = set(compact(obs_space))
            keys = tuple(k for k in keys if k in wanted)
        return keys if stats else tuple(k for k in keys if k not in stats_keys)
    legacy = hook(family, "legacy_keys")
    old = tuple(obs_space.spaces) if legacy is None else tuple(legacy(obs_space))
    return (*sorted(old), *(stats_keys if stats else ()))  # gymnasium's Dict sorted the keys of then


def layout_columns(family: str, obs_space: gym.spaces.Dict, layout: str = "full") -> dict[str, np.ndarray]:
    """Per key, the entries of its flattened vector a layout keeps, where it keeps only some: the family's
    ``drl_hooks.compact_columns`` in the ``"compact"`` layout (P3 leaves out the columns of ``links`` that
    repeat another), else none ({}: every entry of every key)."""
    if layout != "compact":
        return {}
    fn = hook(family, "compact_columns")
    return {} if fn is None else {k: np.asarray(v, dtype=np.int64) for k, v in fn(obs_space).items()}


def flatten_keys(obs_space: gym.spaces.Dict, obs: dict, keys: tuple[str, ...], plain: tuple[bool, ...] | None = None,
                 columns: dict[str, np.ndarray] | None = None, caps: dict[str, float] | None = None) -> np.ndarray:
    """float32 concatenation of ``gymnasium.spaces.flatten`` of each key of ``keys`` (one observation).

    ``plain[i]``: key i's space is a Box or MultiBinary, whose flattening is a reshape (done here directly,
    without gymnasium's dispatch: a third of a training step's Python time on P4); others go through
    ``gymnasium.spaces.flatten`` (one-hot of discrete values). ``columns``: the entries kept of some keys
    (:func:`layout_columns`). ``caps``: an upper bound on the entries of some keys (:func:`time_caps`)."""
    if plain is None:
        plain = plain_keys(obs_space, keys)
    parts = [obs[k].reshape(-1) if p else gym.spaces.flatten(obs_space[k], obs[k]) for k, p in zip(keys, plain)]
    if columns:
        parts = [v[columns[k]] if k in columns else v for k, v in zip(keys, parts)]
    if caps:
        parts = [np.minimum(v, caps[k]) if k in caps else v for k, v in zip(keys, parts)]
    return np.concatenate(parts, dtype=np.float32)


def time_caps(keys: tuple[str, ...], time_cap: float | None) -> dict[str, float]:
    """The ``caps`` of :func:`flatten_keys` for a ``time_cap`` (module docstring): ``{"t": time_cap}``, or none."""
    if time_cap is None or "t" not in keys:
        return {}
    if not float(time_cap) > 0:
        raise ValueError(f"time_cap={time_cap!r} is invalid: expected a number of slots > 0, or None")
    return {"t": float(time_cap)}


def flat_size(obs_space: gym.spaces.Dict, keys: tuple[str, ...], columns: dict[str, np.ndarray] | None = None) -> int:
    """The length of the flat vector of ``keys`` (with ``columns``: only the kept entries of those keys)."""
    columns = columns or {}
    return int(sum(len(columns[k]) if k in columns else gym.spaces.flatdim(obs_space[k]) for k in keys))


def plain_keys(obs_space: gym.spaces.Dict, keys: tuple[str, ...]) -> tuple[bool, ...]:
    """Per key: whether its flattening is a plain reshape (Box, MultiBinary)."""
    return tuple(isinstance(obs_space[k], (gym.spaces.Box, gym.spaces.MultiBinary)) for k in keys)


def flatten_batch(obs_space: gym.spaces.Space, obs: Any, keys: tuple[str, ...] | None = None,
                  columns: dict[str, np.ndarray] | None = None, caps: dict[str, float] | None = None) -> np.ndarray:
    """(N, flatdim) float32: the batched observation of a native vector env (arrays with a leading N axis,
    ``obs_space`` the *single* env's space), each row equal to ``gymnasium.spaces.flatten(obs_space, row)``
    (cast to float32); ``keys``: a Dict's keys to concatenate (default: all, in the space's order);
    ``columns``: the entries kept of some keys (:func:`layout_columns`), ``caps`` their upper bounds, as
    :func:`flatten_keys`."""
    sp = obs_space
    if isinstance(sp, gym.spaces.Dict):
        keys = tuple(sp.spaces) if keys is None else keys
        cols, caps = columns or {}, caps or {}
        parts = [flatten_batch(sp[k], obs[k])[:, cols[k]] if k in cols else flatten_batch(sp[k], obs[k]) for k in keys]
        if caps:
            parts = [np.minimum(v, caps[k]) if k in caps else v for k, v in zip(keys, parts)]
        return np.concatenate(parts, axis=1)
    x = np.asarray(obs)
    N = x.shape[0]
    if isinstance(sp, (gym.spaces.Box, gym.spaces.MultiBinary)):
        return x.reshape(N, -1).astype(np.float32)
    if isinstance(sp, gym.spaces.MultiDiscrete):  # one-hot per entry, as gymnasium flattens it
        nvec = np.asarray(sp.nvec).reshape(-1)
        offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
        out = np.zeros((N, int(nvec.sum())), dtype=np.float32)
        idx = offsets[None, :] + (x.reshape(N, -1) - np.asarray(sp.start).reshape(-1)[None, :])
        np.put_along_axis(out, idx, 1.0, axis=1)
        return out
    if isinstance(sp, gym.spaces.Discrete):
        out = np.zeros((N, int(sp.n)), dtype=np.float32)
        out[np.arange(N), x.reshape(N) - int(sp.start)] = 1.0
        return out
    raise ValueError(f"flatten_batch: unsupported space {sp}")


class EmpiricalStats:
    """Running statistics from observations and feedback only, computed outside the env (the env's
    observation carries the same values, module docstring).

    The family's ``drl_hooks.Stats`` holds and updates them; a family without it appends nothing.
    """

    def __init__(self, family: str, problem: Any, pad: dict | None = None):
        self.family = family
        self.problem = problem
        cls = hook(family, "Stats")
        # pad: the env's padding kwargs (clustergym.core.env.env_padding), for fixed-size statistics across instances
        self._impl = None if cls is None else (cls(problem, pad=pad) if pad else cls(problem))
        self.size = 0 if self._impl is None else int(self._impl.size)
        self.reset()

    def reset(self) -> None:
        self.t = 0
        if self._impl is not None:
            self._impl.reset()

    def update(self, obs: dict, info: dict) -> None:
        """After a step: ``obs`` is the *previous* observation (the slot just played), ``info`` its
        step info (only ``feedback`` is read)."""
        fb = info.get("feedback", {})
        self.t += 1
        if self._impl is not None:
            self._impl.update(obs, fb)

    def vector(self) -> np.ndarray:
        if self.size == 0:
            return np.zeros(0, dtype=np.float32)
        t = max(self.t, 1)
        return np.concatenate(self._impl.parts(t)).astype(np.float32)


class ObsPipeline:
    """Dict observation -> flat float32 vector of the keys of a layout (module docstring).

    The statistics are in the observation, so the pipeline keeps no state: ``reset`` and ``observe`` only
    flatten.
    """

    def __init__(self, family: str, problem: Any, obs_space: gym.spaces.Space, stats: bool = True,
                 pad: dict | None = None, layout: str = "full", time_cap: float | None = None):
        self.obs_space = obs_space
        self.problem = problem
        self.layout = layout
        self.keys = layout_keys(family, obs_space, layout, stats)
        self.columns = layout_columns(family, obs_space, layout)
        self.caps = time_caps(self.keys, time_cap)
        self._plain = plain_keys(obs_space, self.keys)
        self.size = flat_size(obs_space, self.keys, self.columns)
        self.space = gym.spaces.Box(-np.inf, np.inf, shape=(self.size,), dtype=np.float32)

    def reset(self, obs) -> np.ndarray:
        return self.observe(obs)

    def observe(self, obs) -> np.ndarray:
        return flatten_keys(self.obs_space, obs, self.keys, self._plain, self.columns, self.caps)


class DRLObservation(gym.ObservationWrapper):
    """The flat float32 observation of :class:`ObsPipeline` (``layout="full"``: the flattened Dict observation)."""

    def __init__(self, env: gym.Env, stats: bool = True, layout: str = "full", time_cap: float | None = None):
        super().__init__(env)
        u = env.unwrapped
        self.pipeline = ObsPipeline(u.family, u.problem, env.observation_space, stats, layout=layout, time_cap=time_cap)
        self.observation_space = self.pipeline.space

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.pipeline.problem = self.env.unwrapped.problem  # the episode's instance (same spaces, same keys)
        return self.observation(obs), info

    def observation(self, observation):
        return self.pipeline.observe(observation)


def unscale_action(a: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """[-1, 1] -> [low, high] per entry (entries with low == high map to low; see ``clustergym.learning.wrappers.RescaleBox``)."""
    a = np.clip(np.asarray(a, dtype=np.float64), -1.0, 1.0)
    return low + (a + 1.0) * 0.5 * (high - low)


def box_bounds(family: str, problem, space=None, pad: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact (float64) bounds of a Box action: the family's ``box_bounds`` hook (P2's [0, a_l^k] of eq. 3: the
    float32 space bounds can round a up by more than the env's feasibility tolerance; on a padded env, ``pad``,
    the fractions [0, 1]), else the space's."""
    bounds = hook(family, "box_bounds")
    if bounds is not None:
        return bounds(problem, pad=pad) if pad else bounds(problem)
    if space is None:
        raise ValueError(f"no Box action bounds known for family {family!r}")
    return space.low.astype(np.float64), space.high.astype(np.float64)


def sb3_mask(family: str, info: dict) -> np.ndarray | None:
    """The flat per-value action mask sb3-contrib expects, from public ``info["action_mask"]``.

    The family's ``drl_hooks.sb3_mask`` maps it; equals ``env.action_masks()`` (tested): P1 gives a
    per-channel mask (|E|,) -> per channel [0 allowed, 1 allowed]; P4's info mask is already per machine
    [idle, slot 1..J].
    """
    m = info.get("action_mask")
    if m is None:
        return None
    m = np.asarray(m, dtype=bool)
    fn = hook(family, "sb3_mask")
    if fn is None:
        raise ValueError(f"no MaskablePPO mask for family {family!r}")
    return fn(m)
