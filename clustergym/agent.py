"""Agent protocol and registry.

An agent sees only what a real scheduler sees: the public problem at ``reset``, observations,
rewards and ``info`` *without* ``"metrics"`` (the runner strips it; see :func:`public_info`).
One name may have one implementation per problem family (``drf`` exists for P2 and P3).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

__all__ = ["Agent", "BaseAgent", "register_agent", "make", "list_agents", "env_family", "public_info",
           "parse_agent_spec"]


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
        import numpy as np

        self.problem = problem
        self.rng = np.random.default_rng(seed)

    def act(self, obs: Any, info: dict) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, obs, action, reward, next_obs, info) -> None:
        return None


SB3_PREFIX = "sb3:"

# name -> family -> "module:Class"
_REGISTRY: dict[str, dict[str, str]] = {}
_BUILTINS_LOADED = False


def register_agent(name: str, family: str, entry_point: str) -> None:
    """Register ``entry_point`` ("module:Class") as agent ``name`` for problem ``family``."""
    _REGISTRY.setdefault(name, {})[family] = entry_point


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        importlib.import_module("clustergym.agents")
        importlib.import_module("clustergym.baselines")


def _load(entry_point: str):
    mod, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(mod), attr)


def env_family(env_id: str) -> str:
    """The problem family of a registered env id (its ``FamilySpec``; for an id registered with Gymnasium
    directly, its class attribute ``family``)."""
    import clustergym.envs  # noqa: F401  (registers the ids)
    from clustergym.family import env_entry

    found = env_entry(env_id)
    if found is not None:
        return found[0].name
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        known = ", ".join(sorted(i for i in gym.registry if i.startswith("clustergym/")))
        raise ValueError(f"unknown env id {env_id!r}; known: {known}") from None
    ep = spec.entry_point
    cls = _load(ep) if isinstance(ep, str) else ep
    return getattr(cls, "family", "")


def list_agents(env_id: str | None = None, family: str | None = None) -> list[str]:
    """Agent names, all or those that can act in ``env_id`` / ``family``."""
    _load_builtins()
    if env_id is not None:
        family = env_family(env_id)
    names = [n for n, fams in _REGISTRY.items() if family is None or family in fams]
    return sorted(names)


def parse_agent_spec(spec: str) -> tuple[str, dict]:
    """``"esdp"`` or ``"esdp[only_active=true,alpha=0.3]"`` -> (name, kwargs); values parsed as JSON."""
    import json

    spec = spec.strip()
    if "[" not in spec:
        return spec, {}
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
    return name.strip(), kwargs


def make(name: str, family: str | None = None, *, env_id: str | None = None, **kwargs) -> Agent:
    """Build agent ``name`` for ``family`` (or the family of ``env_id``).

    ``name`` may carry options: ``"esdp[only_active=true]"``. ``"sb3:PATH/model.zip"`` loads a model
    saved by ``clustergym train`` (:class:`clustergym.learning.agent.SB3Agent`).
    """
    _load_builtins()
    base, opts = parse_agent_spec(name)
    opts.update(kwargs)
    if env_id is not None:
        family = env_family(env_id)
    if base.startswith(SB3_PREFIX):  # a saved Stable-Baselines3 model (``clustergym train``)
        from clustergym.learning.agent import SB3Agent

        try:
            agent = SB3Agent(base[len(SB3_PREFIX):], **opts)
        except TypeError as exc:
            raise ValueError(f"bad options for agent {base!r}: {exc}") from None
        if family is not None and family not in agent.families:
            raise ValueError(f"model {base!r} was trained on {agent.meta['env_id']} (family {agent.family!r}) "
                             f"and cannot act in family {family!r}")
        agent.name = base
        return agent
    if is_custom_spec(base):  # your own agent: "pkg.module:Class" or "path/to/file.py:Class"
        cls = load_custom_agent(base)
        fams = tuple(getattr(cls, "families", ()) or ())
        if family is not None and fams and family not in fams:
            raise ValueError(f"agent {base!r} cannot act in family {family!r}; its families are {', '.join(fams)}")
        opts = coerce_options(cls, base, opts)
        try:
            agent = cls(**opts)
        except TypeError as exc:
            raise ValueError(f"bad options for agent {base!r}: {exc}") from None
        agent.name = base
        return agent
    if base not in _REGISTRY:
        raise ValueError(f"unknown agent {base!r}; known: {', '.join(sorted(_REGISTRY))} (or your own: "
                         "pkg.module:Class, path/to/file.py:Class, sb3:PATH/model.zip)")
    fams = _REGISTRY[base]
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
    import inspect

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


def is_custom_spec(name: str) -> bool:
    """``pkg.module:Class`` or ``path/to/file.py:Class`` (not ``sb3:...``)."""
    return ":" in name and not name.startswith(SB3_PREFIX)


def load_custom_agent(spec: str):
    """The class named by ``pkg.module:Class`` or ``path/to/file.py:Class``; it must follow the Agent
    protocol (``reset``, ``act``, ``update``). A file is loaded by path (relative to the working
    directory, which worker processes share); a module must be importable (on ``sys.path``)."""
    import importlib.util
    import os
    import sys

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
                         "(see clustergym.agent.Agent)")
    return cls


def public_info(info: dict) -> dict:
    """``info`` as an agent may see it: everything but the evaluation-only ``"metrics"``."""
    return {k: v for k, v in info.items() if k != "metrics"}
