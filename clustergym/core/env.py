"""Base class with the conventions every clustergym environment shares."""

from __future__ import annotations

from typing import Any, SupportsFloat, TypeVar

import gymnasium as gym
import numpy as np

from clustergym.core.scenario import INFEASIBLE_MODES, Scenario, check_choice, check_int, resolve_scenario
from clustergym.core.viewer import VISUAL_MODES, require_pygame


class ResetNeeded(gym.error.ResetNeeded, RuntimeError):
    """``step`` after the episode ended (terminated or truncated), before ``reset``: Gymnasium's
    ``ResetNeeded`` (what ``OrderEnforcing`` raises for a step before the first reset) and a
    ``RuntimeError`` (what clustergym raises for that case)."""


ObsType = TypeVar("ObsType")
"""The observation of a family's env: a ``TypedDict`` of arrays (e.g. ``ChannelObservation``)."""
ActType = TypeVar("ActType")
"""The action the env's action space holds (``np.ndarray`` for every clustergym env)."""

StepReturn = tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]  # (obs, reward, terminated, truncated, info)


class ClusterEnv(gym.Env[ObsType, ActType]):
    """Common plumbing: horizon, ``infeasible`` mode, render modes, action validation.

    Subclasses set ``family`` (the agent-registry family name) and expose ``problem`` (the public
    problem handed to agents) and ``scenario`` (public problem + hidden truth). A family's env is typed as
    Gymnasium's are, ``ClusterEnv[ObsType, ActType]``: ``ObsType`` is the family's observation
    ``TypedDict`` and ``ActType`` the array its action space holds; ``reset`` returns
    ``(ObsType, info)`` and ``step`` a :data:`StepReturn`.
    """

    metadata = {"render_modes": ["ansi", "rgb_array", "human"], "render_fps": 4}
    family: str = ""
    scenario: Scenario  # the current instance: public problem + hidden truth (set by each env)
    problem: Any  # the public problem handed to agents, ``scenario.problem`` (the family's frozen dataclass)
    # The keys of info["metrics"] and their kind (clustergym/core/metrics.py); every env declares its own.
    metrics_spec: dict = {}
    # Evaluation-only oracles and bounds are off by default (``oracle=False``: a training env pays nothing for
    # them); the env kwargs that turn on the bound a score needs, which ``clustergym.evaluate`` (and so
    # ``clustergym run`` / ``reproduce``) adds when it computes a score, unless the caller gives them.
    score_env_kwargs: dict = {}
    # False for an env whose episode is a function of its instance alone (the dynamics draw nothing once the
    # instance is set): its reset seed then changes an episode only by drawing the instance (``instances``).
    seed_drives_dynamics: bool = True

    def __init__(self, *, horizon: int, infeasible: str = "repair", render_mode: str | None = None,
                 oracle: bool = False):
        self.horizon = check_int("horizon", horizon, 1, None)
        self.infeasible = check_choice("infeasible", infeasible, INFEASIBLE_MODES)
        self.render_mode = check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        if self.render_mode == "human":
            require_pygame()  # one clear line now, not a traceback at the first step
        if not isinstance(oracle, (bool, np.bool_)):
            raise ValueError(f"oracle={oracle!r} is invalid: expected true or false")
        self.oracle = bool(oracle)

    # -- instances -------------------------------------------------------------------
    _source: InstanceSource | None = None  # InstanceSource of an env that can switch instances (set by the subclass)
    pad_kwargs: tuple[str, ...] = ()  # the family's padding kwargs (FamilySpec.pad_kwargs)

    @property
    def reset_seed_changes_episode(self) -> bool:
        """Whether two reset seeds give two episodes: the dynamics draw from the seed, or it draws the instance."""
        return self.seed_drives_dynamics or (self._source is not None and self._source.instances is not None)

    @property
    def scenario_seed(self) -> int | None:
        """The current instance (the scenario seed of ``scenario``); None for an env built from a Scenario object."""
        return None if self._source is None else self._source.current

    @property
    def instance_source(self) -> "InstanceSource | None":
        """The instances this env can switch between (:class:`InstanceSource`; the vector envs share their
        single env's)."""
        return self._source

    @property
    def instances(self):
        """The ``instances`` kwarg (a range or tuple of scenario seeds drawn at each reset), or None."""
        return None if self._source is None else self._source.instances

    _episode_over = False  # the last step terminated or truncated: step() raises until reset()
    _rngs: dict[str, np.random.Generator] | None  # the dynamics' child generators of the episode (None before reset)

    def _over(self) -> "ResetNeeded":
        return ResetNeeded(f"the episode is over (terminated or truncated at t={getattr(self, '_t', '?')}): call "
                           f"reset() before step() (Gymnasium's step contract; the vector env autoresets instead)")

    def _begin_instance(self, seed: Any, options: Any) -> None:
        """Switch to this episode's instance; call right after ``super().reset(seed=seed)`` and before the
        dynamics' child generators are drawn (this draws nothing from ``np_random``). Starts a new episode
        (``step`` is allowed again)."""
        self._episode_over = False
        if self._source is None:
            check_reset_options(options)
            return
        k = self._source.choose(self.np_random, seed, options)
        if k is not None and k != self._source.current:
            self._use_scenario(self._source.get(k), k)  # validates the spaces first: all or nothing
            self._source.current = k

    # Each env defines ``_spaces(problem, k) -> (action space, observation space)`` and ``_load(scenario)``;
    # the instance switch below is the same for every env.
    def _spaces(self, problem: Any, k: int | None) -> tuple[gym.Space, gym.Space]:
        """(action space, observation space) of ``problem`` in this env (each env defines it)."""
        raise NotImplementedError  # pragma: no cover - abstract: every family's env overrides it

    def _load(self, scenario: Scenario) -> None:
        """Take the problem-derived state of ``scenario`` (each env defines it)."""
        raise NotImplementedError  # pragma: no cover - abstract: every family's env overrides it

    def _instance_sizes(self, problem) -> dict:
        """The instance's natural size per padding kwarg (``FamilySpec.instance_sizes``); {} where none."""
        return {}

    def check_instance(self, scenario: Scenario, k: int) -> None:
        """ValueError (naming the padding kwarg) unless instance ``k`` fits this env's spaces."""
        act, obs = self._spaces(scenario.problem, k)
        self._check_same_spaces(k, act, obs, self._instance_sizes(scenario.problem))

    def _use_scenario(self, scenario: Scenario, k: int) -> None:
        """Load instance ``k`` (same spaces, else ValueError naming the padding kwargs)."""
        self.check_instance(scenario, k)
        self._load(scenario)

    def _check_same_spaces(self, k: int, action_space, observation_space, sizes: dict) -> None:
        """ValueError (naming the padding kwargs) if instance k's spaces differ from this env's."""
        assert self._source is not None, "only an env that switches instances checks an instance's spaces"
        if action_space != self.action_space:
            raise self._source.mismatch(k, "action space", self.action_space, action_space, sizes)
        if observation_space != self.observation_space:
            raise self._source.mismatch(k, "observation space", self.observation_space, observation_space, sizes)

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Exact float64 (low, high) of a Box action space (used by ``clustergym.learning.wrappers.RescaleBox``);
        envs whose float32 space bounds are rounded override it."""
        if not isinstance(self.action_space, gym.spaces.Box):
            raise ValueError(f"action_bounds: the action space is {self.action_space}, not a Box")
        return self.action_space.low.astype(np.float64), self.action_space.high.astype(np.float64)

    # -- rendering (clustergym/core/viewer.py) ----------------------------------------------------------
    # Under "rgb_array" / "human" the env owns its family's EpisodeViewer: reset hands it the static data
    # (_viewer_reset), step its slot's arrays (``if self._viewer is not None: self._viewer.record(...)``).
    # Without a picture mode there is no viewer and nothing is recorded.
    _viewer = None

    def _make_viewer(self):
        """The family's :class:`clustergym.core.viewer.EpisodeViewer` (each env defines it)."""
        raise NotImplementedError  # pragma: no cover - abstract: every family's env overrides it

    def _render_ansi(self) -> str:
        """The text summary of the slot (each env defines it)."""
        raise NotImplementedError  # pragma: no cover - abstract: every family's env overrides it

    def _viewer_reset(self, **static: Any) -> None:
        if self.render_mode in VISUAL_MODES:
            if self._viewer is None:
                self._viewer = self._make_viewer()
            self._viewer.reset(**static)

    @property
    def viewer(self):
        """The episode viewer (``render_mode="rgb_array"`` or ``"human"``, after ``reset``), else None:
        ``env.unwrapped.viewer.figure()`` is the matplotlib figure of the episode so far."""
        return self._viewer

    def render(self):
        """``"rgb_array"``: the episode so far as an (H, W, 3) uint8 image (a timeline, the same size every
        slot); ``"human"``: the same picture in a pygame window (shown after every step); ``"ansi"``: a
        text summary of the slot. Without a render mode: a warning, as Gymnasium's envs give, and None."""
        if self.render_mode is None:
            spec_id = getattr(getattr(self, "spec", None), "id", None) or type(self).__name__
            gym.logger.warn("You are calling render method without specifying any render mode. You can specify the "
                            f'render_mode at initialization, e.g. gym.make("{spec_id}", render_mode="rgb_array")')
            return None
        if self.render_mode == "ansi":
            return self._render_ansi()
        if self._viewer is None:
            raise RuntimeError("call reset() before render() (the viewer starts with the episode)")
        if self.render_mode == "human":
            self._viewer.show()
            return None
        return self._viewer.frame()

    def close(self) -> None:
        if self._viewer is not None:
            self._viewer.close()
        super().close()

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


# The largest slot index a learner's time feature tells apart: the last slot of a 200-slot episode, the training
# horizon of every shipped model. The flat MLP reads min(t, TIME_CAP) (clustergym.learning.pipeline), the per-entity
# networks min(t, TIME_CAP) / (TIME_CAP + 1) (P1) or log(1 + min(t, TIME_CAP)) / 10 (P2, P4; clustergym.core.entity_features).
# A model trained on episodes of at most TIME_CAP + 1 slots sees exactly the inputs it saw without the cap, and a
# longer run never takes a time feature outside them.
TIME_CAP = 199

# -- instances per episode -----------------------------------------------------------------
RESET_OPTIONS = ("scenario_seed",)
"""The ``reset(options=...)`` keys every clustergym env accepts (the native vector envs add ``reset_mask``)."""

_INSTANCE_TAG = 0x1257_A9CE  # spawn key of the instance generator (independent of the dynamics' children)
_CACHE_SIZE = 256  # scenarios kept per env (re-drawing a cached instance costs a dict look-up)


def check_reset_options(options: Any, valid: tuple[str, ...] = RESET_OPTIONS) -> dict:
    """The validated ``reset`` options: ``{}`` or ``{"scenario_seed": k}`` (plus any other ``valid`` key as is).

    Unknown keys and malformed values are a ValueError naming the valid options (Gymnasium leaves
    ``options`` to the env; clustergym never ignores one silently). ``scenario_seed`` must be an int
    >= 0 (numpy ints too; not a bool, float or string); ``None`` means "no explicit instance".
    """
    if options is None:
        return {}
    names = ", ".join(repr(v) for v in valid)
    if not isinstance(options, dict):
        raise ValueError(f"reset options must be a dict or None, got {type(options).__name__}; valid options: {names}")
    unknown = [k for k in options if k not in valid]
    if unknown:
        raise ValueError(f"unknown reset option(s) {', '.join(map(repr, unknown))}; valid options: {names}")
    out = dict(options)
    if "scenario_seed" in out:
        v = out["scenario_seed"]
        if v is None:
            del out["scenario_seed"]
        elif isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"options['scenario_seed']={v!r} is invalid: expected an integer >= 0 (the instance "
                             f"to switch to, as the scenario_seed kwarg); valid options: {names}")
        else:
            out["scenario_seed"] = int(v)
    return out


# The most scenario seeds a sequence (not a range) of ``instances`` may list: it is copied into a tuple. A range
# is checked and drawn from in O(1) whatever its length (up to 2**63 - 1 seeds, what the instance draw takes).
MAX_LISTED_INSTANCES = 1_000_000


def check_instances(instances: Any) -> range | tuple[int, ...] | None:
    """The ``instances`` kwarg: None, or a non-empty range/sequence of distinct ints >= 0 (a range is kept as is)."""
    if instances is None:
        return None
    msg = "expected a non-empty range or sequence of distinct integers >= 0 (scenario seeds)"
    if isinstance(instances, range):  # O(1): a range's smallest element is its first or its last
        n = instances.stop - instances.start
        n = max(0, (n + instances.step - (1 if instances.step > 0 else -1)) // instances.step)
        if n == 0 or min(instances[0], instances[-1]) < 0:
            raise ValueError(f"instances={instances!r} is invalid: {msg}")
        if n > 2**63 - 1:
            raise ValueError(f"instances={instances!r} is invalid: {n} scenario seeds, at most 2**63 - 1 in a range")
        return instances
    if isinstance(instances, (str, bytes, dict, set, frozenset)) or not hasattr(instances, "__len__"):
        raise ValueError(f"instances={instances!r} is invalid: {msg}")
    if len(instances) > MAX_LISTED_INSTANCES:
        raise ValueError(f"instances (a {type(instances).__name__} of {len(instances):,} seeds) is invalid: at most "
                         f"{MAX_LISTED_INSTANCES:,} listed seeds; give a range(start, stop) for more")
    vals = list(instances)
    ok = bool(vals) and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= 0
                            for v in vals)
    if not ok or len(set(int(v) for v in vals)) != len(vals):
        shown = instances if len(vals) <= 10 else f"{vals[:10]}..."
        raise ValueError(f"instances={shown!r} is invalid: {msg}")
    return tuple(int(v) for v in vals)


def instance_generator(np_random: np.random.Generator) -> np.random.Generator:
    """The generator that draws the instance of each episode, derived from the seed of ``np_random``
    *without drawing from it*: the dynamics' child generators (drawn from ``np_random`` at the same
    reset) are exactly those of an env built with ``scenario_seed=k`` and reset with the same seed."""
    ss = getattr(np_random.bit_generator, "seed_seq", None)
    if not isinstance(ss, np.random.SeedSequence):  # a user-set generator without a seed sequence
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(entropy=ss.entropy, spawn_key=(*ss.spawn_key, _INSTANCE_TAG)))


class InstanceSource:
    """The instances one env can switch between: the scenario regenerated by name and parameters with
    another seed (cached), or a fixed Scenario object (which cannot switch)."""

    def __init__(self, scenario: Any, params: dict, factory, names: tuple, scenario_seed: int, instances: Any,
                 pad_kwargs: tuple[str, ...] = ()):
        self.fixed = isinstance(scenario, Scenario)
        self.instances = check_instances(instances)
        if self.fixed and self.instances is not None:
            raise ValueError("instances cannot be combined with a Scenario object (it has no scenario_seed to vary); "
                             "pass the scenario by name with its parameters instead")
        first = resolve_scenario(scenario, params, factory, names, scenario_seed)
        self.name = first.name if self.fixed else scenario
        self._factory, self._params, self._names = factory, dict(params), names
        self.pad_kwargs = tuple(pad_kwargs)
        self.current = None if self.fixed else int(scenario_seed)
        self._cache: dict[int, Scenario] = {} if self.fixed else {int(scenario_seed): first}
        self.first = first
        self._rngs: dict[int, np.random.Generator] = {}  # instance generator per slot (sub-env)

    def get(self, k: int) -> Scenario:
        """Instance ``k`` (built once, then cached)."""
        if self.fixed:
            raise ValueError("options['scenario_seed'] cannot switch the instance of an env built from a Scenario "
                             "object; pass the scenario by name (scenario='paper', ...) to switch instances")
        sc = self._cache.get(k)
        if sc is None:
            sc = resolve_scenario(self.name, self._params, self._factory, self._names, k)
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[k] = sc
        return sc

    def choose(self, np_random: np.random.Generator, seed: Any, options: Any, slot: int = 0,
               valid: tuple[str, ...] = RESET_OPTIONS) -> int | None:
        """The instance of the episode starting now (after ``np_random`` was (re)seeded with ``seed``): the
        option ``scenario_seed``, else a draw from ``instances`` (a generator seeded from ``seed``, see
        :func:`instance_generator`; an unseeded reset continues its stream), else None (keep the current one).
        ``slot``: the sub-env of a vector env (each has its own stream)."""
        k = check_reset_options(options, valid).get("scenario_seed")
        if k is None and self.instances is not None:
            rng = self._rngs.get(slot)
            if seed is not None or rng is None:
                rng = self._rngs[slot] = instance_generator(np_random)
            k = int(self.instances[int(rng.integers(len(self.instances)))])
        if k is not None and self.fixed:
            self.get(k)  # raises
        return k

    def mismatch(self, k: int, what: str, ours: Any, theirs: Any, sizes: dict) -> ValueError:
        """The error for an instance whose spaces differ from the env's (no padding, or maxima too small)."""
        pads = ", ".join(f"{n}=N (N >= {v} for this instance)" for n, v in sizes.items())
        a, b = describe_space(theirs), describe_space(ours)
        if a == b:
            a, b = a + " (other bounds)", b
        fix = (f"build the env with the padding kwarg(s) {pads} for fixed-shape spaces across instances" if pads
               else "this family has no padding kwargs")
        return ValueError(f"instance scenario_seed={k} of scenario {self.name!r} has {what} {a}, this env has {b} "
                          f"(spaces are fixed for an env's lifetime); {fix}")


def describe_space(space: Any) -> str:
    """A short description of a space (shapes, not bound arrays) for error messages."""
    from gymnasium import spaces as sp

    if isinstance(space, sp.Dict):
        return "Dict(" + ", ".join(f"{k}: {describe_space(v)}" for k, v in space.spaces.items()) + ")"
    if isinstance(space, sp.Box):
        return f"Box{space.shape}"
    if isinstance(space, sp.MultiDiscrete):
        nv = np.asarray(space.nvec)
        return f"MultiDiscrete(shape={nv.shape}, nvec {nv.min()}..{nv.max()}, sum {int(nv.sum())})"
    return str(space)


def env_padding(env: Any) -> dict:
    """The padding kwargs an env was built with, ``{name: value}`` (``{}`` for an unpadded env).
    Accepts a wrapped env."""
    u = getattr(env, "unwrapped", env)
    return {n: getattr(u, n) for n in getattr(u, "pad_kwargs", ()) if getattr(u, n, None) is not None}


def check_maxima(sizes: dict, maxima: dict, where: str) -> None:
    """ValueError when an instance's natural size exceeds the padding maximum (``maxima[name]``)."""
    for name, n in sizes.items():
        m = maxima.get(name)
        if m is not None and n > m:
            raise ValueError(f"{where} has {name.removeprefix('max_')} = {n} > {name}={m}: choose {name} >= {n}")
