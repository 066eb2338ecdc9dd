"""Shared contracts: scenarios, parameter validation, seeding and action checks.

Every problem family builds its environment from a :class:`Scenario`: the *public problem*
(what a real scheduler knows and what agents receive) plus the *hidden truth* (what must be
learned or cannot be known: mean utilities, arrival probabilities, ...; only the environment's
dynamics, the oracles and the metrics read it).
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass
from typing import Any, Generic, Iterable, TypeVar

import numpy as np

__all__ = [
    "Scenario",
    "load_entry_point",
    "resolve_scenario",
    "check_choice",
    "check_int",
    "check_real",
    "child_generators",
    "as_generator",
    "freeze",
    "INFEASIBLE_MODES",
    "available_memory",
    "check_memory",
    "json_depth",
    "MAX_REAL",
    "MIN_POSITIVE",
]

P = TypeVar("P")
H = TypeVar("H")

INFEASIBLE_MODES = ("repair", "raise")


@dataclass(frozen=True)
class Scenario(Generic[P, H]):
    """A problem instance: ``problem`` is public, ``truth`` is hidden from agents."""

    name: str
    problem: P  # public problem (frozen dataclass of the family)
    truth: H  # hidden truth (frozen dataclass of the family)
    params: dict  # generator parameters that produced it (for results.json)


# The keyword arguments every env constructor takes besides its scenario parameters.
ENV_KWARGS = ("scenario", "scenario_seed", "instances", "horizon", "oracle", "infeasible", "render_mode")


class UnknownParameterError(TypeError, ValueError):
    """An unknown keyword argument of an env or scenario factory.

    A ``TypeError``, as Python and Gymnasium raise for an unexpected keyword (clients such as
    TorchRL's ``GymEnv`` probe optional kwargs and retry on ``TypeError`` only), and a ``ValueError``, as
    every other invalid argument of clustergym, so ``except ValueError`` catches it too.

    ``gym.make`` re-raises a ``TypeError`` of the env's constructor as ``type(e)(f"{e} was raised from the
    environment creator for ID with kwargs (...)")``: that tail is replaced by the env id in front, so the
    message stays one line in our words: ``clustergym/...-v0: got an unexpected keyword argument 'x' (...)``.
    """

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str):
            m = _GYM_TAIL.search(args[0])
            if m is not None:
                args = (f"{m.group(1)}: {args[0][:m.start()]}",)
        super().__init__(*args)


_GYM_TAIL = re.compile(r" was raised from the environment creator for (\S+) with kwargs \(.*\)\Z", re.S)


def check_known(params: dict, valid, scenario: str | None = None) -> None:
    """:class:`UnknownParameterError` naming the unknown keys of ``params`` and every valid keyword:
    the scenario parameters ``valid`` and the env's own :data:`ENV_KWARGS`."""
    unknown = set(params) - set(valid)
    if unknown:
        names = ", ".join(repr(k) for k in sorted(unknown))
        # Python's own wording ("got an unexpected keyword argument 'x'"), which clients match on.
        head = (f"got an unexpected keyword argument {names}" if len(unknown) == 1
                else f"got unexpected keyword arguments {names}")
        where = f" of scenario {scenario!r}" if scenario else ""
        own = [v for v in valid if v not in ENV_KWARGS]  # a parameter that is also an env argument is listed once
        raise UnknownParameterError(
            f"{head} (not an env argument nor a scenario parameter{where}); valid keyword arguments: "
            f"{', '.join(ENV_KWARGS)} and " + (f"the scenario parameters {', '.join(own)}" if own
                                              else "no scenario parameters"))


def resolve_scenario(scenario: Any, params: dict, factory, names: tuple, seed: int) -> Scenario:
    """The Scenario an env is built from: a Scenario object as is, or ``factory(name, seed, **params)``.

    Every env constructor takes ``scenario`` (a name or a Scenario) plus scenario parameters as
    kwargs; this is the one place that checks the combination.
    """
    if isinstance(scenario, Scenario):
        if params:
            raise UnknownParameterError(
                f"scenario parameters cannot be combined with a Scenario object (got {', '.join(sorted(params))}); "
                f"valid keyword arguments: {', '.join(ENV_KWARGS)}")
        return scenario
    if isinstance(scenario, str):
        return factory(scenario, seed=check_int("scenario_seed", seed, 0), **params)
    raise ValueError(f"scenario={scenario!r} is invalid: expected one of {names} or a Scenario")


def as_generator(seed: int | np.random.Generator | None) -> np.random.Generator:
    """An explicit generator from a seed; never the global numpy state."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def child_generators(rng: np.random.Generator, names: Iterable[str]) -> dict[str, np.random.Generator]:
    """Independent child generators, one per named source of randomness.

    Drawing arrivals from one child and utilities from another means that what an agent does
    (which never touches these generators) cannot shift either stream: the same seed gives every
    agent the same arrivals and the same realised randomness (common random numbers).
    """
    names = list(names)
    seeds = rng.integers(0, 2**63 - 1, size=len(names), dtype=np.int64)
    return {n: np.random.default_rng(int(s)) for n, s in zip(names, seeds)}


def _fmt_interval(lo, hi, lo_open, hi_open) -> str:
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    lo_s = "-inf" if lo is None else f"{lo:g}"
    hi_s = "inf" if hi is None else f"{hi:g}"
    return f"{left}{lo_s}, {hi_s}{right}"


# Every real parameter lies in [-MAX_REAL, MAX_REAL] and a lower bound open at 0 means >= MIN_POSITIVE: the
# models multiply, sum and divide parameters over many slots, and 1e308 (or 1e-308 as a divisor) gives inf/NaN
# rewards. These caps keep every accepted configuration finite and are printed in the error's range.
MAX_REAL = 1e9
MIN_POSITIVE = 1e-9


def check_real(
    name: str,
    value: Any,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """Validate a real parameter; ``ValueError`` names it and its valid range.

    An unbounded side is capped at ±:data:`MAX_REAL`, a lower bound open at 0 becomes
    :data:`MIN_POSITIVE` (closed), so no accepted value can overflow the model; the printed range is the
    one checked.
    """
    lo = -MAX_REAL if lo is None else max(float(lo), -MAX_REAL)
    hi = MAX_REAL if hi is None else min(float(hi), MAX_REAL)
    if lo_open and lo == 0.0:
        lo, lo_open = MIN_POSITIVE, False
    interval = _fmt_interval(lo, hi, lo_open, hi_open)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name}={value!r} is invalid: expected a number in {interval}")
    v = float(value) + 0.0  # -0.0 -> 0.0 (numpy refuses a scale of -0.0 as "scale < 0")
    bad = not math.isfinite(v)
    bad |= v <= lo if lo_open else v < lo
    bad |= v >= hi if hi_open else v > hi
    if bad:
        raise ValueError(f"{name}={value!r} is invalid: expected a number in {interval}")
    return v


def check_int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """Validate an integer parameter; ``ValueError`` names it and its valid range."""
    interval = _fmt_interval(lo, hi, False, False)
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if isinstance(value, float) and value.is_integer():
        ok, value = True, int(value)
    if not ok or (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{name}={value!r} is invalid: expected an integer in {interval}")
    return int(value)


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name}={value!r} is invalid: expected one of {', '.join(map(repr, choices))}")
    return value


def freeze(a: np.ndarray) -> np.ndarray:
    """Read-only view, so a public problem handed to an agent cannot be mutated by it."""
    a = np.asarray(a)
    a.setflags(write=False)
    return a


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable`` of /proc/meminfo; elsewhere the free pages)."""
    import os

    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - unknown platform: no guard
        return 1 << 62


def check_memory(nbytes: float, names: str, what: str, fraction: float = 0.8) -> None:
    """ValueError naming the parameters when ``nbytes`` (an estimate) exceeds ``fraction`` of the
    memory available: a clear line before the work, not an allocation that swaps or kills the machine."""
    avail = available_memory()
    if nbytes > fraction * avail:
        raise ValueError(f"{names} would need about {nbytes / 2**30:.1f} GiB ({what}), more than the "
                         f"{avail / 2**30:.1f} GiB of memory available; choose smaller values")


def load_entry_point(entry_point: str) -> Any:
    """The object a ``"module:attr"`` string names (the module when there is no ``:attr``), imported on first use.

    Tables of such strings (the family specs, the agent loaders, a scenario factory's trace presets) name code
    in higher layers, or code that imports the module holding the table, without importing it up front."""
    mod, _, attr = entry_point.partition(":")
    obj = importlib.import_module(mod)
    return getattr(obj, attr) if attr else obj


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text, outside strings: one pass, no recursion, so a value
    nested far too deep for ``json.loads`` is measured (and refused by the caller) before it is parsed."""
    depth = deepest = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            escaped, in_str = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
