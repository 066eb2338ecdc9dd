"""Problem families as data: one :class:`FamilySpec` per family folder, and the registry that reads them.

Every family folder (``envs/<family>/``) exports ``FAMILY = FamilySpec(...)`` from its ``__init__.py``:
its name (the agent-registry family, also written into ``results.json`` and model side-cars), the
paper, its env ids with string entry points, the scenario factory, the PettingZoo constructor, the
DRL hooks and the paper's experiment module. Everything is a ``"module:attr"`` string loaded on
first use, so importing ``clustergym`` imports no env, no torch/SB3 and no PettingZoo.

Readers of the specs (nothing else dispatches on a family name):

* ``clustergym.envs`` registers every env id of every spec with Gymnasium;
* ``clustergym.envs.multiagent.PARALLEL_ENVS`` indexes the ``parallel_entry_point`` of every env;
* ``clustergym.experiments.KNOWN`` lists the ``experiment`` modules (P1..P4 order);
* ``clustergym.learning`` takes the empirical statistics, the MaskablePPO mask and the Box
  action bounds from the family's ``drl_hooks`` module, and so do the parameter pools, ``clustergym tune``,
  the hyperparameter files, ``clustergym bench``'s training rows and the docs gallery their per-family data
  (the data hooks of :attr:`FamilySpec.drl_hooks`).

A user's own family (a package outside clustergym) is registered with one line,
``clustergym.register_family(FAMILY)``; for the command line and the runner's worker processes, name
the module in ``CLUSTERGYM_PLUGINS`` (comma-separated; each module's ``FAMILY``/``FAMILIES`` are
registered) or declare a Python entry point in the group ``clustergym.families``
(``toy = "mypkg:FAMILY"``). See docs/architecture.md, "How to add a family".
"""

from __future__ import annotations

import functools
import importlib
import os
import signal
import threading
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any, Callable, Mapping

import gymnasium as gym
from gymnasium.envs.registration import register, registry

__all__ = ["EnvEntry", "FamilySpec", "register_family", "family_specs", "family_spec", "env_ids", "env_entry",
           "env_hook", "env_family", "register_agent", "agent_entry_points", "agent_names", "load_plugins", "PLUGINS_ENV_VAR",
           "ENTRY_POINT_GROUP", "BUILTIN_AGENT_MODULES"]

PLUGINS_ENV_VAR = "CLUSTERGYM_PLUGINS"
ENTRY_POINT_GROUP = "clustergym.families"


def _load(entry_point: str) -> Any:
    mod, _, attr = entry_point.partition(":")
    obj = importlib.import_module(mod)
    return getattr(obj, attr) if attr else obj


@dataclass(frozen=True)
class EnvEntry:
    """One registered env id of a family (Gymnasium ``register`` arguments, strings only)."""

    id: str
    """``"namespace/Name-vN"``, e.g. ``"clustergym/MultiServerChannel-v0"``."""
    entry_point: str
    """``"module:Class"`` of the single env."""
    vector_entry_point: str | None = None
    """``"module:Class"`` of the native vector env (``gym.make_vec(..., vectorization_mode="vector_entry_point")``)."""
    parallel_entry_point: str | None = None
    """``"module:function"`` building the PettingZoo ``ParallelEnv`` from the single env's kwargs, or None."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Default kwargs passed to the entry point."""
    check_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Kwargs of a small instance for quick contract checks (``tests/contract/test_contracts.py``, ``clustergym.runner.testing``)."""

    def register_kwargs(self) -> dict:
        """The keyword arguments of ``gymnasium.register`` for this id."""
        kw = dict(id=self.id, entry_point=self.entry_point, kwargs=dict(self.kwargs))
        if self.vector_entry_point is not None:
            kw["vector_entry_point"] = self.vector_entry_point
        return kw


@dataclass(frozen=True)
class FamilySpec:
    """Everything clustergym needs to know about a problem family, as lazy ``"module:attr"`` strings."""

    name: str
    """Agent-registry family name (``Env.family``, ``Agent.families``), e.g. ``"multiserver-channel"``.
    Stored in results.json and in ``clustergym train`` side-cars: never rename a shipped one."""
    number: str
    """Problem number in the docs, e.g. ``"P1"`` (a user family may use any short label)."""
    paper: str
    """The source paper's policy/short name, e.g. ``"ESDP"``."""
    envs: tuple[EnvEntry, ...]
    """The family's env ids (one family may have several)."""
    scenario: str
    """``"module:function"`` of the scenario factory ``make(name="paper", seed=0, **params) -> Scenario``."""
    drl_hooks: str | None = None
    """Module with the DRL hooks (all optional), read with :meth:`hook`. Functions and classes:
    ``Stats`` (empirical statistics appended to observations:
    ``Stats(problem, pad=None)`` with ``size``, ``reset()``, ``update(obs, feedback)``, ``parts(t)``; ``pad``
    is the env's padding kwargs, ``clustergym.core.env.env_padding(env)``, for the same size on every instance),
    ``sb3_mask(mask)``
    (MaskablePPO's flat mask from ``info["action_mask"]``; its presence enables ``maskable_ppo``),
    ``box_bounds(problem, pad=None)`` (exact float64 bounds of a Box action; its presence enables ``sac``) and
    ``compact_keys(space)`` / ``compact_columns(space)`` (what the ``"compact"`` observation layout keeps:
    :mod:`clustergym.learning.pipeline`) and ``privileged_features(env)`` (a fixed-size float vector from the env's
    hidden truth, the critic's extra input with ``clustergym train --privileged critic``, never the acting policy's:
    :mod:`clustergym.learning.privileged`) and ``oracle_action(env)`` (the per-slot oracle's action from the hidden
    truth, the teacher of ``--warm-start oracle``: :mod:`clustergym.learning.imitation`). Data (plain constants):

    * ``PARAM_RANGES: dict[str, tuple[float, float]]``: the generator parameters a parameter pool
      (``clustergym train --param-draws N``, :mod:`clustergym.learning.pools`) draws, name -> (low, high), uniformly,
      in this order; absent: the family has no parameter pool;
    * ``TUNING_REFERENCE: str``: the agent that scores 1 in ``clustergym tune``'s objective
      (:func:`clustergym.learning.tuning.reference_agent`); absent: ``--reference`` must be given;
    * ``INSTANCE_IS_SEED: bool``: ``clustergym tune``'s default validation runs pair instance and seed
      (instance = seed 900-909) instead of instances 900-909 at seed 0; absent: False;
    * ``HYPERPARAMS_DIR: str``: the folder of the family's hyperparameter files (:mod:`clustergym.learning.hyperparams`):
      ``<algo>.yml`` with the entries of its env ids, each read over the algorithm file's ``default`` entry,
      ``defaults.yml`` and ``tuning/`` (the records of its tuning studies); absent: the algorithm files only;
    * ``BENCH_THROUGHPUT: tuple[tuple[dict, str], ...]``: ``clustergym bench``'s "PPO training, env-steps/s" rows
      of the family's first env id, one per (extra env kwargs, vec mode); ``BENCH_PLAIN: bool``: a "plain SB3
      PPO" row; ``BENCH_MEMORY: bool``: a memory row (10^6 slots with all-zero actions); the rows are labelled
      with :attr:`number`, in registry order (:mod:`clustergym.bench.throughput`); absent: no such rows;
    * ``REFERENCE_OPTIONS: tuple[str, ...]``: option specs of the paper policy (e.g. a variant beyond the
      paper's algorithm) that ``clustergym drl`` evaluates beside the paper policy and the registered agents;
      absent: none;
    * ``GALLERY: tuple[tuple[str, ...], int, int]``: the docs gallery's (baselines beside the paper policy,
      comparison horizon, viewer frame slot) of the family's first env id (:mod:`clustergym.experiments.gallery`;
      with :attr:`paper_agent`); absent: not in the gallery."""
    experiment: str | None = None
    """Module name under ``clustergym.experiments`` that reproduces the paper (``clustergym reproduce NAME``)."""
    paper_file: str | None = None
    """The paper's markdown file name (docs), e.g. ``"esdp.md"``."""
    paper_agent: str | None = None
    """Registered name of the family's paper policy, e.g. ``"esdp"`` (None: no paper policy)."""
    agents: tuple[tuple[str, str], ...] = ()
    """``(name, "module:Class")`` agents registered together with the family (a user family's own agents;
    the shipped families register theirs in ``agents/__init__.py`` and ``baselines/__init__.py``)."""
    pad_kwargs: tuple[str, ...] = ()
    """The env kwargs that pad the family's spaces to fixed shapes across instances, e.g.
    ``("max_edges",)``; empty when the spaces do not vary by instance. Given any of them, the env's spaces
    depend only on these maxima and the scenario parameters, never on the instance."""
    action_kwargs: tuple[str, ...] = ()
    """Env kwargs that change only how actions are expressed, never the dynamics (P3's ``action_mode``:
    ``"ring_size"`` = ring sizes placed by the env's greedy ring placement). A trained model's env gets the
    values it trained with, like its padding kwargs; the other agents of a comparison keep theirs."""
    sizes: str | None = None
    """``"module:function"`` of ``sizes(problem) -> dict[str, int]``: an instance's natural sizes keyed by
    the ``pad_kwargs`` names (the smallest values those kwargs may take for it), computed from the public
    problem without building an env (see :meth:`instance_sizes`). None when ``pad_kwargs`` is empty."""
    entity: str | None = None
    """Dotted name of the module with the family's per-entity network hooks (``clustergym train --net entity``),
    e.g. ``"clustergym.envs.approxjobs.entity"``; None: the family trains the flat MLP only. The module has
    ``layout(env) -> dict``, the index layout of a training env's flat observation (``env.unwrapped`` is the
    family's env; plain JSON numbers, saved in the model as ``policy_kwargs["entity"]``; keys ``"family"``,
    ``"num_inputs"``, ``"t_index"``, the index lists, and ``"logits_per_entity"`` unless ``SELECT``; a
    ValueError for an action mode or observation it cannot read); ``BUFFERS``, ``{layout key: attribute
    name}`` of the index lists the network registers as (non-persistent) buffers; ``features(net, obs) -> (x,
    present, glob)``, from flat observations (B, N) the per-entity features (B, P, f), the presence mask
    (B, P) and the global features (B, g), reading ``net.t_index`` and the buffers; optional ``SELECT = True``
    (one binary "select" logit per entity, never chosen for an absent one; else ``layout["logits_per_entity"]``
    outputs per entity) and ``check(layout)`` (a ValueError for a layout the network cannot read). Torch at
    its top is fine: the learning stack loads it on first use (:mod:`clustergym.core.entity_features` has the helpers
    the shipped families share)."""
    decoder: str | None = None
    """Dotted name of the module with the family's hooks for the masked autoregressive decoder
    (``clustergym train --net autoregressive``, :mod:`clustergym.learning.autoregressive`): one count per entity,
    entity after entity, from a capacity the entities share. None: the family has no such decoder. The module
    has ``layout(env)``, ``BUFFERS`` and ``features(net, obs)`` as the ``entity`` hooks (the layout's extra key
    ``"levels"``: the counts 0..levels−1 of an entity), and ``allocation(net, obs) -> (cap, pool)``, from raw
    flat observations (B, N) each entity's largest count (B, P) (0 for an absent one) and the shared capacity
    (B,), both integer-valued."""

    @property
    def env_ids(self) -> tuple[str, ...]:
        return tuple(e.id for e in self.envs)

    def scenario_factory(self) -> Callable[..., Any]:
        """The scenario factory (imports the family's scenario module)."""
        return _load(self.scenario)

    def hooks(self) -> ModuleType | None:
        """The DRL hooks module, or None when the family has none."""
        return None if self.drl_hooks is None else importlib.import_module(self.drl_hooks)

    def entity_hooks(self) -> ModuleType | None:
        """The per-entity network hooks module (imports torch), or None when the family has none."""
        return None if self.entity is None else importlib.import_module(self.entity)

    def decoder_hooks(self) -> ModuleType | None:
        """The autoregressive decoder's hooks module (imports torch), or None when the family has none."""
        return None if self.decoder is None else importlib.import_module(self.decoder)

    def instance_sizes(self, problem: Any) -> dict[str, int]:
        """An instance's natural sizes keyed by ``pad_kwargs`` (``{}`` for a family without padding).

        The maxima over a pool of instances are the padding kwargs that fit all of them::

            make = spec.scenario_factory()
            sizes = [spec.instance_sizes(make("paper", seed=k).problem) for k in pool]
            pads = {n: max(s[n] for s in sizes) for n in spec.pad_kwargs}
        """
        if self.sizes is None:
            return {}
        return dict(_load(self.sizes)(problem))

    def hook(self, name: str) -> Any:
        """One DRL hook of :attr:`drl_hooks` (``"Stats"``, ``"sb3_mask"``, ``"PARAM_RANGES"``, ...) or None when
        the family has no hooks module or the module does not define ``name``."""
        mod = self.hooks()
        return None if mod is None else getattr(mod, name, None)


# family name -> spec, in registration order (P1..P4 first)
_FAMILIES: dict[str, FamilySpec] = {}
FAMILIES = MappingProxyType(_FAMILIES)

# The agent registry: agent name -> family -> "module:Class". The shipped agents register themselves when
# their packages are imported (BUILTIN_AGENT_MODULES, loaded on first use by clustergym.core.agent); a family's
# own agents (FamilySpec.agents) when the family is registered.
_AGENTS: dict[str, dict[str, str]] = {}
BUILTIN_AGENT_MODULES = ("clustergym.agents", "clustergym.baselines")


def register_agent(name: str, family: str, entry_point: str) -> None:
    """Register ``entry_point`` ("module:Class") as agent ``name`` for problem ``family``."""
    _AGENTS.setdefault(name, {})[family] = entry_point


def agent_entry_points(name: str) -> dict[str, str] | None:
    """``{family: "module:Class"}`` of a registered agent name, or None."""
    return _AGENTS.get(name)


def agent_names(family: str | None = None) -> list[str]:
    """Registered agent names (of the shipped packages once they are loaded), all or those of ``family``."""
    return sorted(n for n, fams in _AGENTS.items() if family is None or family in fams)


def register_family(spec: FamilySpec) -> FamilySpec:
    """Register ``spec``: its env ids with Gymnasium, its ``agents`` with the agent registry.

    Registering the same spec again is a no-op; a different spec under a registered name, or an env id
    that another family owns, is a ValueError.
    """
    if not isinstance(spec, FamilySpec):
        raise ValueError(f"register_family expects a clustergym.core.family.FamilySpec, got {type(spec).__name__}")
    old = _FAMILIES.get(spec.name)
    if old is not None:
        if old == spec:
            return old
        raise ValueError(f"family {spec.name!r} is already registered with a different spec")
    owners = {i: f.name for f in _FAMILIES.values() for i in f.env_ids}
    clash = [i for i in spec.env_ids if i in owners]
    if clash:
        raise ValueError(f"env id {clash[0]!r} already belongs to family {owners[clash[0]]!r}")
    for entry in spec.envs:
        if entry.id not in registry:
            register(**entry.register_kwargs())
    for name, entry_point in spec.agents:
        register_agent(name, spec.name, entry_point)
    _FAMILIES[spec.name] = spec
    return spec


def family_specs() -> tuple[FamilySpec, ...]:
    """Every registered family, shipped ones first (P1..P4), then plugins in registration order."""
    return tuple(_FAMILIES.values())


def family_spec(name: str) -> FamilySpec:
    """The spec of family ``name``; ValueError naming the known families otherwise."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(_FAMILIES)}") from None


def env_ids() -> tuple[str, ...]:
    """Every env id of every registered family (shipped ones first)."""
    return tuple(i for f in _FAMILIES.values() for i in f.env_ids)


def env_entry(env_id: str) -> tuple[FamilySpec, EnvEntry] | None:
    """(family spec, entry) of a registered env id, or None."""
    for f in _FAMILIES.values():
        for e in f.envs:
            if e.id == env_id:
                return f, e
    return None


def env_hook(env_id: str, name: str) -> Any:
    """The DRL hook ``name`` of the family that owns the registered env id ``env_id`` (:meth:`FamilySpec.hook`);
    None for an id no family owns or a family without that hook."""
    found = env_entry(env_id)
    return None if found is None else found[0].hook(name)


def env_family(env_id: str) -> str:
    """The problem family of a registered env id (its ``FamilySpec``; for an id registered with Gymnasium
    directly, its class attribute ``family``); a ValueError naming the known ids otherwise."""
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


def _register_module(mod: ModuleType) -> None:
    specs = getattr(mod, "FAMILIES", None) or ((mod.FAMILY,) if hasattr(mod, "FAMILY") else ())
    for spec in specs:
        register_family(spec)


_PLUGINS_DONE: set[str] = set()
_PLUGIN_ERRORS: dict[str, str] = {}  # plugin -> its one-line error (a failed import is not retried)
_ENTRY_POINTS_DONE = False
PLUGIN_TIMEOUT_VAR = "CLUSTERGYM_PLUGIN_TIMEOUT"  # seconds an import may take (default 30)


class _ImportTimeout(Exception):
    pass


def _import_with_timeout(name: str, load: Callable[[], Any], timeout: float) -> Any:
    """``load()`` (an import), interrupted after ``timeout`` s by SIGALRM when called from the main thread
    on a Unix (elsewhere without a limit: an import cannot be stopped from another thread)."""
    if (timeout <= 0 or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        return load()

    def alarm(signum, frame):
        raise _ImportTimeout

    old = signal.signal(signal.SIGALRM, alarm)
    old_timer = signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return load()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if old_timer[0] > 0:  # someone else's alarm: set it again
            signal.setitimer(signal.ITIMER_REAL, *old_timer)


def _plugin_timeout() -> float:
    try:
        return float(os.environ.get(PLUGIN_TIMEOUT_VAR, "30"))
    except ValueError:
        return 30.0


def _load_plugin(name: str, load: Callable[[], Any], register: Callable[[Any], None], where: str) -> None:
    """Import one plugin and register its families; any failure is a ValueError of one line naming it."""
    if name in _PLUGIN_ERRORS:
        raise ValueError(_PLUGIN_ERRORS[name])
    timeout = _plugin_timeout()
    try:
        obj = _import_with_timeout(name, load, timeout)
        register(obj)
    except _ImportTimeout:
        msg = (f"{where}: importing {name!r} did not return within {timeout:g} s (it hangs?); fix or remove it "
               f"(the limit is ${PLUGIN_TIMEOUT_VAR})")
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever a plugin raises, it is named in one line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        msg = f"{where}: cannot import {name!r} ({type(exc).__name__}{': ' + text if text else ''})"
    else:
        return
    _PLUGIN_ERRORS[name] = msg
    raise ValueError(msg) from None


def load_plugins(entry_points: bool = True) -> None:
    """Register the user families named in ``$CLUSTERGYM_PLUGINS`` and (``entry_points=True``) in the
    entry-point group ``clustergym.families``. Idempotent; a module that fails to import (any exception)
    or whose import does not return within ``$CLUSTERGYM_PLUGIN_TIMEOUT`` seconds (default 30; main
    thread on Unix) is a ValueError of one line naming it; the other plugins are still registered.

    ``import clustergym`` reads the variable (cheap); the entry points are read by the command line and
    the runner's worker processes (scanning installed distributions costs tens of milliseconds).
    """
    global _ENTRY_POINTS_DONE
    errors = []
    for name in filter(None, (n.strip() for n in os.environ.get(PLUGINS_ENV_VAR, "").split(","))):
        if name in _PLUGINS_DONE:
            continue
        try:
            _load_plugin(name, functools.partial(importlib.import_module, name), _register_module, PLUGINS_ENV_VAR)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        _PLUGINS_DONE.add(name)
    if entry_points and not _ENTRY_POINTS_DONE:
        _ENTRY_POINTS_DONE = True
        from importlib.metadata import entry_points as _eps

        def register(obj):
            if isinstance(obj, ModuleType):
                _register_module(obj)
            else:
                for spec in obj if isinstance(obj, (list, tuple)) else (obj,):
                    register_family(spec)

        for ep in _eps(group=ENTRY_POINT_GROUP):
            try:
                _load_plugin(f"{ep.name} = {ep.value}", ep.load, register, f"entry point {ENTRY_POINT_GROUP}")
            except ValueError as exc:
                errors.append(str(exc))
    if errors:
        raise ValueError(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
