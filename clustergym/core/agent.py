"""Agent protocol and registry.

An agent sees only what a real scheduler sees: the public problem at ``reset``, observations,
rewards and ``info`` *without* ``"metrics"`` (the runner strips it; see :func:`public_info`).
One name may have one implementation per problem family (``drf`` exists for P2 and P3); the registry
itself is data of :mod:`clustergym.core.family` (``register_agent``), read here.

An agent spec names an agent in one of four forms, parsed once into an :class:`AgentSpec`:
a registered name (``"esdp"``), with options (``"esdp[only_active=true,alpha=0.3]"``), your own class
(``"pkg.module:Class"`` or ``"path/to/file.py:Class"``) or a prefixed loader of :data:`AGENT_LOADERS`
(``"sb3:PATH/model.zip"``: a model saved by ``clustergym train``).

**Evaluation hooks.** An agent that was trained on instances (a saved model) may define
:class:`EvaluationHooks`; the runner asks them, instead of knowing how models are trained, which
instance the agent acts on, which env kwargs its own env needs and whether a run's instance was one
it trained on.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from clustergym.core.family import BUILTIN_AGENT_MODULES, agent_entry_points, agent_names, env_family

__all__ = ["Agent", "BaseAgent", "AgentSpec", "EvaluationHooks", "AGENT_LOADERS", "AGENT_OBJECTS", "object_agent_spec", "make", "list_agents",
           "public_info", "parse_agent_spec", "evaluation_hooks"]


@runtime_checkable
class Agent(Protocol):
    name: str
    families: tuple[str, ...]

    def reset(self, problem: Any, *, seed: int | None = None) -> None: ...

    def act(self, obs: Any, info: dict) -> Any: ...

    def update(self, obs: Any, action: Any, reward: float, next_obs: Any, info: dict) -> None: ...


class BaseAgent:
    """Convenience base: no-op ``update``, seeded ``self.rng`` after ``reset``."""

    name: str = ""
    families: tuple[str, ...] = ()

    def reset(self, problem: Any, *, seed: int | None = None) -> None:
        self.problem = problem
        self.rng = np.random.default_rng(seed)

    def act(self, obs: Any, info: dict) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, obs, action, reward, next_obs, info) -> None:
        return None

    def run_statistics(self) -> dict[str, float]:
        """Numbers about the agent's own work over the episode so far (e.g. ESDP's DP cells per decision), added
        to a run's metrics by the runner; deterministic ones only (no timings). None by default."""
        return {}


@runtime_checkable
class EvaluationHooks(Protocol):
    """Optional methods of an agent trained on instances (a saved model, :class:`clustergym.learning.sb3_agent.SB3Agent`).

    The runner (:func:`clustergym.runner.evaluation.evaluate`) calls them before any work and when it labels the runs.
    An agent may also define ``bind_env_kwargs(env_kwargs)``: each run calls it with the kwargs of the env
    the agent acts in (those of :meth:`eval_env_kwargs` included) before the episode starts, and
    ``instance_mismatch(spec, env_id, env_kwargs, instances)``: why an agent with a :meth:`pinned_instance` cannot
    act on ``instances`` (one line), or None when it can (the runner then runs it there, with
    :meth:`eval_env_kwargs`).
    """

    def pinned_instance(self) -> int | None:
        """The one instance (scenario seed) the agent can act on, or None when it acts on any instance its
        env kwargs fit (:meth:`eval_env_kwargs`)."""

    def eval_env_kwargs(self, spec: str, env_id: str, env_kwargs: dict, instances: Sequence[int]) -> dict:
        """Check (ValueError naming ``spec``) that the agent can act on every instance of ``instances`` of the
        comparison's scenario (``env_id``, ``env_kwargs``) and return the env kwargs its own env gets on top
        (padding and action kwargs: they never change the dynamics)."""

    def trained_on(self, instance: int | None, pinned: bool) -> bool:
        """Whether a run on ``instance`` is on an instance the agent trained on (``pinned``: the comparison
        was pinned to :meth:`pinned_instance`)."""


def evaluation_hooks(agent: Any) -> EvaluationHooks | None:
    """The agent itself when it defines :class:`EvaluationHooks`, else None."""
    return agent if isinstance(agent, EvaluationHooks) else None


SB3_PREFIX = "sb3:"
# Prefixed agent specs: prefix -> "module:function" building the agent from the rest of the spec and its
# options (``loader(path, **opts)``, ``agent.families`` then checked), imported on first use.
AGENT_LOADERS: dict[str, str] = {SB3_PREFIX: "clustergym.learning.sb3_agent:SB3Agent",
                                  "rule:": "clustergym.experiments.priority_rule:load_rule"}

# Agent objects evaluate() takes besides names: a base class's qualified name -> "module:function" that saves the
# object where the runner's workers load it (``fn(obj, env_id, env_kwargs, folder)`` -> an agent spec).
AGENT_OBJECTS: dict[str, str] = {
    "stable_baselines3.common.base_class.BaseAlgorithm": "clustergym.learning.importing:saved_model_spec"}


def object_agent_spec(obj: Any, env_id: str, env_kwargs: dict, folder: str) -> str:
    """The agent spec of an agent object (an SB3 model, :data:`AGENT_OBJECTS`) saved into ``folder``."""
    for cls in type(obj).__mro__:
        entry = AGENT_OBJECTS.get(f"{cls.__module__}.{cls.__qualname__}")
        if entry:
            return _load(entry)(obj, env_id, env_kwargs, folder)
    raise ValueError(f"agent {type(obj).__name__} object is neither an agent name nor a model evaluate() takes "
                     "(an SB3 model)")


_BUILTINS_LOADED = False


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        for mod in BUILTIN_AGENT_MODULES:
            importlib.import_module(mod)


def _load(entry_point: str):
    mod, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(mod), attr)


def list_agents(env_id: str | None = None, family: str | None = None) -> list[str]:
    """Agent names, all or those that can act in ``env_id`` / ``family``."""
    _load_builtins()
    if env_id is not None:
        family = env_family(env_id)
    return agent_names(family)


@dataclass(frozen=True)
class AgentSpec:
    """An agent spec, parsed: ``"esdp[only_active=true]"`` -> ``AgentSpec("esdp", {"only_active": True})``."""

    name: str
    """The agent name without options: a registered name, ``pkg.module:Class``, ``path/file.py:Class`` or
    ``PREFIX:REST`` of :data:`AGENT_LOADERS`."""
    options: dict = field(default_factory=dict)
    """Keyword arguments for the agent's constructor (values parsed as JSON when they parse)."""

    @classmethod
    def parse(cls, spec: str) -> "AgentSpec":
        """``"esdp"`` or ``"esdp[only_active=true,alpha=0.3]"``; ValueError on a malformed spec."""
        spec = spec.strip()
        if "[" not in spec:
            return cls(spec, {})
        if not spec.endswith("]"):
            raise ValueError(f"malformed agent spec {spec!r}: expected name[key=value,...]")
        name, _, body = spec[:-1].partition("[")
        kwargs = {}
        for part in filter(None, (p.strip() for p in body.split(","))):
            key, eq, val = part.partition("=")
            if not eq or not key.strip():
                raise ValueError(f"malformed agent option {part!r} in {spec!r}: expected key=value")
            try:
                kwargs[key.strip()] = json.loads(val)
            except json.JSONDecodeError:
                kwargs[key.strip()] = val
        return cls(name.strip(), kwargs)

    @property
    def prefix(self) -> str | None:
        """The :data:`AGENT_LOADERS` prefix the name starts with, or None."""
        return next((p for p in AGENT_LOADERS if self.name.startswith(p)), None)

    @property
    def is_custom(self) -> bool:
        """``pkg.module:Class`` or ``path/to/file.py:Class`` (not a prefixed spec)."""
        return ":" in self.name and self.prefix is None

    @property
    def is_registered_form(self) -> bool:
        """Neither prefixed nor custom: the name must be in the registry."""
        return self.prefix is None and ":" not in self.name


def parse_agent_spec(spec: str) -> tuple[str, dict]:
    """``"esdp"`` or ``"esdp[only_active=true,alpha=0.3]"`` -> (name, kwargs); values parsed as JSON."""
    parsed = AgentSpec.parse(spec)
    return parsed.name, dict(parsed.options)


def make(name: str | AgentSpec, family: str | None = None, *, env_id: str | None = None, **kwargs) -> Agent:
    """Build agent ``name`` for ``family`` (or the family of ``env_id``).

    ``name`` may carry options: ``"esdp[only_active=true]"`` (or be an :class:`AgentSpec`).
    ``"sb3:PATH/model.zip"`` loads a model saved by ``clustergym train``
    (:class:`clustergym.learning.sb3_agent.SB3Agent`, through :data:`AGENT_LOADERS`).
    """
    _load_builtins()
    spec = name if isinstance(name, AgentSpec) else AgentSpec.parse(name)
    base, opts = spec.name, {**spec.options, **kwargs}
    if env_id is not None:
        family = env_family(env_id)
    prefix = spec.prefix
    if prefix is not None:  # e.g. a saved Stable-Baselines3 model (``clustergym train``)
        loader = _load(AGENT_LOADERS[prefix])
        try:
            agent = loader(base[len(prefix):], **opts)
        except TypeError as exc:
            raise ValueError(f"bad options for agent {base!r}: {exc}") from None
        if family is not None and family not in agent.families:
            raise ValueError(f"model {base!r} was trained on {agent.meta['env_id']} (family {agent.family!r}) "
                             f"and cannot act in family {family!r}")
        agent.name = base
        return agent
    if spec.is_custom:  # your own agent: "pkg.module:Class" or "path/to/file.py:Class"
        cls = load_custom_agent(base)
        own = tuple(getattr(cls, "families", ()) or ())
        if family is not None and own and family not in own:
            raise ValueError(f"agent {base!r} cannot act in family {family!r}; its families are {', '.join(own)}")
        opts = coerce_options(cls, base, opts)
        try:
            agent = cls(**opts)
        except TypeError as exc:
            raise ValueError(f"bad options for agent {base!r}: {exc}") from None
        agent.name = base
        return agent
    fams = agent_entry_points(base)
    if fams is None:
        raise ValueError(f"unknown agent {base!r}; known: {', '.join(agent_names())} (or your own: "
                         "pkg.module:Class, path/to/file.py:Class, sb3:PATH/model.zip)")
    if family is None:
        if len(fams) != 1:
            raise ValueError(f"agent {base!r} exists for several families ({', '.join(fams)}); pass family=")
        family = next(iter(fams))
    if family not in fams:
        raise ValueError(f"agent {base!r} cannot act in family {family!r}; it supports {', '.join(fams)}")
    cls = _load(fams[family])
    opts = coerce_options(cls, base, opts)
    try:
        return cls(**opts)
    except TypeError as exc:
        raise ValueError(f"bad options for agent {base!r}: {exc}") from None
    except ValueError as exc:
        msg = str(exc)
        raise ValueError(msg if base in msg else f"agent {base!r}: {msg}") from None


def _option_params(cls) -> dict:
    """The keyword parameters of ``cls.__init__``, following ``**kwargs`` into the base classes."""
    params: dict = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        sig = inspect.signature(init)
        for name, p in sig.parameters.items():
            if name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                params.setdefault(name, p)
        if not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
            break
    return params


_TRUE, _FALSE = ("true",), ("false",)


def coerce_options(cls, base: str, opts: dict) -> dict:
    """Check and convert agent options against the types of their defaults in ``cls.__init__``.

    A bool option accepts only ``true``/``false`` (JSON booleans, or the strings in any case:
    ``False`` from a shell); an int option only integers (``2.5`` and ``true`` are errors); a float
    option only numbers. Options whose default is None or a string pass through (the agent checks
    them). An unknown option is an error naming the agent's options.
    """
    params = _option_params(cls)
    out = {}
    for key, val in opts.items():
        if key not in params:
            raise ValueError(f"agent {base!r} has no option {key!r}; options: {', '.join(params) or 'none'}")
        default = params[key].default
        bad = f"agent {base!r} option {key}={val!r} is invalid: expected "
        if isinstance(default, bool):
            if isinstance(val, str) and val.strip().lower() in _TRUE + _FALSE:
                val = val.strip().lower() in _TRUE
            if not isinstance(val, bool):
                raise ValueError(bad + "true or false")
        elif isinstance(default, int):
            if isinstance(val, bool) or not isinstance(val, int):
                raise ValueError(bad + "an integer")
        elif isinstance(default, float) or (default is None and "float" in str(params[key].annotation)):
            if (isinstance(val, bool) or not isinstance(val, (int, float))) and not (default is None and val is None):
                raise ValueError(bad + "a number")
        out[key] = val
    return out


def load_custom_agent(spec: str):
    """The class named by ``pkg.module:Class`` or ``path/to/file.py:Class``; it must follow the Agent
    protocol (``reset``, ``act``, ``update``). A file is loaded by path (relative to the working
    directory, which worker processes share); a module must be importable (on ``sys.path``)."""
    where, _, cls_name = spec.rpartition(":")
    if not where or not cls_name.isidentifier():
        raise ValueError(f"malformed agent {spec!r}: expected pkg.module:Class or path/to/file.py:Class")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise ValueError(f"agent {spec!r}: no file {where!r}")
        mod_name = "clustergym_user_" + "".join(c if c.isalnum() else "_" for c in path)
        module = sys.modules.get(mod_name)
        if module is None:
            loader_spec = importlib.util.spec_from_file_location(mod_name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise ValueError(f"agent {spec!r}: {where!r} cannot be imported as a Python module")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[mod_name] = module
            try:
                loader_spec.loader.exec_module(module)
            except Exception as exc:  # noqa: BLE001 - the user's file failed to import
                del sys.modules[mod_name]
                raise ValueError(f"agent {spec!r}: importing {where!r} failed: {type(exc).__name__}: {exc}") from None
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ValueError(f"agent {spec!r}: cannot import module {where!r} ({exc})") from None
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise ValueError(f"agent {spec!r}: {where!r} has no {cls_name!r}")
    missing = [m for m in ("reset", "act", "update") if not callable(getattr(cls, m, None))]
    if not isinstance(cls, type) or missing:
        raise ValueError(f"agent {spec!r} is not an agent: it lacks {', '.join(missing) or 'a class'} "
                         "(see clustergym.core.agent.Agent)")
    return cls


def public_info(info: dict) -> dict:
    """``info`` as an agent may see it: everything but the evaluation-only ``"metrics"``."""
    return {k: v for k, v in info.items() if k != "metrics"}
