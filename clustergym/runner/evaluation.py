"""``evaluate``: agents × instances × seeds on one env, with common random numbers.

A run is (agent, instance, seed). The **instance** is the scenario seed (env kwarg ``scenario_seed``:
graph, demands, hidden means, topology, job list); the **seed** drives the dynamics (arrivals, realised
utilities, service rates; on P3, whose job stream is the instance's, only what the agents draw). Comparisons are made over instances (:mod:`clustergym.core.stats`): a result that
holds on one instance may flip on the next.

**Normalised score.** Where the env reports a bound, every run gets
``score = (V − V_random) / (B − V_random)`` on the same instance and seed, where

- ``V`` is the run's evaluated total: the expected reward (``Σ_t expected_reward``) when the env reports
  it, else the total reward;
- ``B`` is the bound: the per-slot oracle summed (``Σ_t oracle_reward``: P1's exact knapsack, P3's
  per-slot MILP when enabled), else ``info["metrics"]["episode_bound"]`` at the last step (an upper bound
  on the episode's total reward, e.g. P4's), else ``episode_best_static`` (P2: the best static allocation
  in hindsight, eq. 6; an online policy may beat it, so P2 scores can exceed 1);
- ``V_random`` is the evaluated total of the ``random`` agent on the same instance and seed (run for the
  purpose when ``random`` is not among the agents; those runs go to ``reference_runs``).

So ``random`` scores 0 and a policy that plays the oracle's actions scores 1.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from clustergym.core.agent import AgentSpec, evaluation_hooks, list_agents, make, object_agent_spec
from clustergym.core.scenario import check_memory
from clustergym.runner.episode import make_env, scenario_fingerprint
from clustergym.core.family import env_family
from clustergym.core.progress import CostBar
from clustergym.runner.ray_backend import import_ray, run_ray
from clustergym.runner.results import Results, RunResult, attach_scores
from clustergym.core.version import __version__
from clustergym.runner.workers import run_local

__all__ = ["BACKENDS", "MAX_VALUES", "check_count", "check_size", "evaluate", "planned_runs"]

BACKENDS = ("local", "ray")


MAX_VALUES = 100_000  # the most seeds (or instances) one call takes: each is at least one run per agent


def check_size(name: str, values) -> None:
    """Refuse a huge ``seeds`` / ``instances`` (e.g. ``range(0, 10**15)``) before iterating over it."""
    n = len(values) if hasattr(values, "__len__") else None
    if n is not None and n > MAX_VALUES:
        raise ValueError(f"{name} has {n:,} values; at most {MAX_VALUES:,} per call")


def check_count(name: str, value, lo: int = 1) -> int:
    """An integer argument (no floats, bools or strings: ``horizon=5.9`` is an error, not 5)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name}: {value!r} is invalid: expected an integer >= {lo}")
    return int(value)


def evaluate(env_id: str, agents: Sequence[Any], seeds: Sequence[int], horizon: int,
             env_kwargs: dict | None = None, workers: int = 1, backend: str = "local",
             progress: bool = True, instances: Sequence[int] | None = None, score: bool = True) -> Results:
    """Run every agent on every (instance, seed) (the same for every agent: common random numbers).

    Args:
        env_id: a registered id, e.g. ``"clustergym/MultiServerChannel-v0"``.
        agents: agent names, optionally with options: ``"esdp[only_active=true]"``, or loaded SB3 models
            (``PPO(...)`` after ``learn``, acting on the env kwargs given here: labelled ``sb3:PPO``, ...).
        seeds: env (dynamics) seeds; each (agent, instance, seed) run is independent.
        horizon: slots per run.
        env_kwargs: keyword arguments for ``gym.make`` (scenario parameters etc.). A
            ``scenario_seed`` here pins that one instance for every run.
        workers: parallel processes (1 = in this process). With ``backend="ray"``, the CPUs of the
            local Ray instance started for this call (unused when Ray is already initialised or
            ``RAY_ADDRESS`` is set: the cluster's own CPUs decide).
        backend: ``"local"`` (processes on this machine) or ``"ray"`` (one Ray task per run; needs
            ``pip install 'clustergym[ray]'``). Uses the Ray instance this process is connected to
            (``ray.init(address=...)`` beforehand), else ``$RAY_ADDRESS``, else starts and afterwards
            shuts down a local one. The results are identical to the local backend's: same runs in
            the same order; only the timing fields (:data:`TIMING_FIELDS`) differ, as they do between
            any two runs.
        progress: show a progress bar (tqdm) over all slots of all runs.
        instances: scenario seeds. ``None`` (default): a new instance per seed, the run with seed s
            uses instance s. A list: every instance × every seed. Cannot be combined with
            ``env_kwargs["scenario_seed"]``. When the scenario does not depend on ``scenario_seed``
            (a trace preset, a Scenario object), every run shares one instance (``instance`` None)
            and ``Results.instance_axis`` says so; an explicit list of several instances is an error.
        score: compute the normalised score (module docstring) where the env reports a bound; runs
            the ``random`` agent on every (instance, seed) when it is not among ``agents``.
    """
    if not isinstance(agents, str) and any(not isinstance(a, str) for a in agents):
        with tempfile.TemporaryDirectory(prefix="clustergym-models-") as tmp:
            specs = [a if isinstance(a, str) else object_agent_spec(a, env_id, dict(env_kwargs or {}),
                                                                     os.path.join(tmp, f"model{i}"))
                     for i, a in enumerate(agents)]
            res = evaluate(env_id, specs, seeds, horizon, env_kwargs, workers, backend, progress, instances, score)
        names = [f"sb3:{type(a).__name__}" for a in agents if not isinstance(a, str)]
        labels = {s: f"sb3:{type(a).__name__}" + (f"#{i}" if names.count(f"sb3:{type(a).__name__}") > 1 else "")
                  for i, (s, a) in enumerate(zip(specs, agents)) if not isinstance(a, str)}
        return _relabelled(res, labels)
    agents, seeds, horizon, env_kwargs, workers, instances = _checked_inputs(agents, seeds, horizon, env_kwargs,
                                                                            workers, backend, instances)
    known, models, env_kwargs = _checked_agents(env_id, agents, horizon, env_kwargs, score)
    plan = _plan_runs(env_id, agents, seeds, horizon, workers, env_kwargs, instances, models)
    runs, reference = _run_and_score(plan, workers, backend, progress, score and "random" in known)
    for r in runs:  # was this run's instance among the model's training instances?
        hooks = models.get(r.agent)
        if hooks is not None:
            r.trained_on = hooks.trained_on(r.instance, plan.pinned_by_model)
    return Results(env_id=env_id, env_kwargs=plan.env_kwargs, horizon=int(horizon), runs=list(runs),
                   version=__version__, reference_runs=reference, instance_axis=plan.axis)


def planned_runs(env_id: str, agents: Sequence[str], seeds: Sequence[int], horizon: int,
                 env_kwargs: dict | None = None, instances: Sequence[int] | None = None,
                 score: bool = True) -> tuple[list[tuple], dict]:
    """The runs :func:`evaluate` would make, checked as it checks them but not run: one
    ``(env_id, agent, seed, horizon, env_kwargs)`` per (agent, instance, seed), each agent's env kwargs those
    its run gets (the instance a model was trained on, a model's padding and action kwargs, and with
    ``score`` the kwargs that turn the env's bound on); and the agents trained on instances made to check
    them (by name: a caller may run these instead of loading the models again). ``clustergym replay`` builds
    its envs from them."""
    agents, seeds, horizon, env_kwargs, _, instances = _checked_inputs(agents, seeds, horizon, env_kwargs, 1,
                                                                       "local", instances)
    _, models, env_kwargs = _checked_agents(env_id, agents, horizon, env_kwargs, score)
    return _plan_runs(env_id, agents, seeds, horizon, 1, env_kwargs, instances, models).tasks, models


def _relabelled(res: Results, labels: dict) -> Results:
    """``res`` with the agents named by ``labels`` (a model given as an object: its saved copy is gone)."""
    for r in res.runs:
        r.agent = labels.get(r.agent, r.agent)
    return res


def _checked_inputs(agents, seeds, horizon, env_kwargs, workers, backend, instances) -> tuple:
    """The arguments of :func:`evaluate` checked and normalised before any work: ``(agents, seeds, horizon,
    env_kwargs, workers, instances)`` (one agent name becomes a list, instances lose repeats)."""
    env_kwargs = dict(env_kwargs or {})
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is invalid: expected one of {', '.join(map(repr, BACKENDS))}")
    horizon, workers = check_count("horizon", horizon), check_count("workers", workers)
    if isinstance(agents, str):  # one agent, not its letters
        agents = [agents]
    if not agents:
        raise ValueError("no agents given")
    twice = [a for a in dict.fromkeys(agents) if list(agents).count(a) > 1]
    if twice:  # the runs are keyed by agent: a repeat would pool two copies' runs under one name
        raise ValueError(f"agents lists {twice[0]!r} more than once: list each agent once (every agent already "
                         "runs on every instance and seed)")
    if not seeds:
        raise ValueError("no seeds given")
    check_size("seeds", seeds)
    seeds = [check_count("seeds", s, lo=0) for s in seeds]
    if "horizon" in env_kwargs:
        raise ValueError("pass the episode length as horizon=, not in env_kwargs")
    if "instances" in env_kwargs:  # an env drawing its instance per episode would run unlabelled instances
        raise ValueError("the env kwarg 'instances' draws a new instance every episode, and a run is labelled with "
                         "one instance: pass the instances to the runner instead (--instances / instances=)")
    if "scenario_seed" in env_kwargs:
        env_kwargs["scenario_seed"] = check_count("scenario_seed", env_kwargs["scenario_seed"], lo=0)
    if instances is not None:
        if "scenario_seed" in env_kwargs:
            raise ValueError("instances= and env_kwargs['scenario_seed'] cannot be combined: scenario_seed "
                             "pins one instance for every run")
        if not len(instances):
            raise ValueError("instances is empty")
        check_size("instances", instances)
        instances = list(dict.fromkeys(check_count("instances", i, lo=0) for i in instances))
    if backend == "ray":
        import_ray()  # fail before any work when Ray is missing
    return agents, seeds, horizon, env_kwargs, workers, instances


def _checked_agents(env_id: str, agents: Sequence[str], horizon: int, env_kwargs: dict, score: bool) -> tuple:
    """Fail fast on an unknown env or agent, bad env kwargs and bad agent options, before any long run starts.

    Returns ``(known, models, env_kwargs)``: the agents of the env's family, the evaluation hooks of the agents
    trained on instances (by agent name) and the env kwargs, with the kwargs that turn the bound on when
    ``score``."""
    family = env_family(env_id)  # validates env_id
    known = list_agents(family=family)
    specs = [AgentSpec.parse(a) for a in agents]
    for spec in specs:
        if spec.is_registered_form and spec.name not in known:
            raise ValueError(f"unknown agent {spec.name!r} for {env_id}; available: {', '.join(known)}")
    probe = make_env(env_id, horizon=int(horizon), **env_kwargs)
    # A score needs a bound: an env whose bound is off by default (to spare training runs) names the
    # kwargs that turn it on (``score_env_kwargs``, e.g. P4's fluid bound); the user's own value wins.
    if score:
        env_kwargs = {**getattr(probe.unwrapped, "score_env_kwargs", {}), **env_kwargs}
    probe.close()
    made = [make(spec, family=family) for spec in specs]
    models = {a: h for a, h in ((a, evaluation_hooks(m)) for a, m in zip(agents, made)) if h is not None}
    return known, models, env_kwargs


@dataclass
class _Plan:
    """The runs of one :func:`evaluate` call and how their instances were chosen."""

    env_id: str
    horizon: int
    env_kwargs: dict  # the comparison's env kwargs (with the scenario_seed a model pinned)
    pairs: list  # (instance or None, seed) of each agent's runs
    axis: str  # Results.instance_axis
    pinned_by_model: bool
    tasks: list = field(default_factory=list)  # (env_id, agent, seed, horizon, env kwargs) of every run

    def kwargs_of(self, inst) -> dict:
        """The env kwargs of a run on instance ``inst``."""
        env_kwargs = self.env_kwargs
        return env_kwargs if inst is None or "scenario_seed" in env_kwargs else {**env_kwargs, "scenario_seed": inst}


def _plan_runs(env_id: str, agents: Sequence[str], seeds: Sequence[int], horizon: int, workers: int, env_kwargs: dict,
               instances: Sequence[int] | None, models: dict) -> _Plan:
    """Every run of the comparison: the instance of each seed, each agent's env kwargs (a pool-trained
    model's padding), and a check that the per-slot curves fit in memory."""
    instances, pinned_by_model, freed = _pin_to_model(models, env_id, env_kwargs, instances, seeds)
    pairs, distinct, axis = _instance_pairs(env_id, horizon, env_kwargs, seeds, instances, pinned_by_model)
    plan = _Plan(env_id, int(horizon), env_kwargs, pairs, axis, pinned_by_model)
    plan.tasks = _tasks(plan, agents, models, distinct, freed)
    # per running run: 4 float64 arrays of length horizon; kept for every run: 2 (reward, cumulative regret)
    check_memory(8.0 * horizon * (4 * min(workers, len(plan.tasks)) + 2 * len(plan.tasks)), f"horizon={horizon}",
                 f"the per-slot curves of {len(plan.tasks)} runs")
    return plan


def _pin_to_model(models: dict, env_id: str, env_kwargs: dict, instances: Sequence[int] | None,
                  seeds: Sequence[int]) -> tuple[Sequence[int] | None, bool, set]:
    """Pin the comparison to the instance an agent was trained on, if one was and it cannot act elsewhere (it
    sets ``env_kwargs["scenario_seed"]``); returns ``(instances, pinned_by_model, freed)``, ``freed`` the
    agents trained on one instance that act on the comparison's instances too.

    Agents trained on instances (clustergym.core.agent.EvaluationHooks, e.g. sb3: models): one trained on a pool
    of instances acts on any instance its padding fits (checked before any work); one trained on a single
    instance acts wherever its ``instance_mismatch`` finds nothing (a model imported from plain SB3 whose spaces
    fit), else only there: ``instances`` given are then refused with the reason, and without them the
    comparison is pinned to that instance."""
    pinned = {a: m.pinned_instance() for a, m in models.items()}
    trained_on = {k for k in pinned.values() if k is not None}
    if not trained_on or "scenario_seed" in env_kwargs:
        return instances, False, set()
    wanted = list(instances) if instances is not None else [int(s) for s in seeds]
    why = {}
    for a, m in models.items():
        if pinned[a] is not None:
            check = getattr(m, "instance_mismatch", None)
            why[a] = (check(a, env_id, env_kwargs, wanted) if check is not None
                      else f"{a!r} was trained on instance {pinned[a]} (scenario_seed) and acts only there")
    if not any(why.values()):
        return instances, False, set(why)
    if instances is not None:
        raise ValueError(next(w for w in why.values() if w) + ": pass the instances it fits, or --set scenario_seed=K")
    if len(trained_on) > 1:
        raise ValueError(f"the sb3: models were trained on instance(s) {sorted(trained_on)} (scenario_seed) and "
                         "act only there: pass those instances, or --set scenario_seed=K, not others")
    env_kwargs["scenario_seed"] = trained_on.pop()
    return None, True, set()


def _instance_pairs(env_id: str, horizon: int, env_kwargs: dict, seeds: Sequence[int], instances: Sequence[int] | None,
                    pinned_by_model: bool) -> tuple[list, list, str]:
    """The (instance, seed) of each agent's runs: pinned, explicit (instance × seed) or one per seed; the
    instance is None where the scenario does not depend on ``scenario_seed``. Returns ``(pairs, distinct,
    axis)``: the pairs, the distinct instances asked for and ``Results.instance_axis``."""
    axis = "scenario_seed"
    if "scenario_seed" in env_kwargs:
        pairs = [(env_kwargs["scenario_seed"], int(s)) for s in seeds]
        axis = f"scenario_seed pinned to {env_kwargs['scenario_seed']}" + (
            " (the instance the sb3: model was trained on)" if pinned_by_model else "")
    elif instances is not None:
        pairs = [(i, int(s)) for i in instances for s in seeds]
    else:
        pairs = [(int(s), int(s)) for s in seeds]
    distinct = list(dict.fromkeys(i for i, _ in pairs))
    if "scenario_seed" not in env_kwargs and len(distinct) > 1:
        fp = [scenario_fingerprint(env_id, int(horizon), {**env_kwargs, "scenario_seed": i}) for i in distinct[:2]]
        if fp[0] is not None and fp[0] == fp[1]:
            scen = env_kwargs.get("scenario", "the default scenario")
            scen = scen if isinstance(scen, str) else "a Scenario object"
            if instances is not None and len(instances) > 1:
                raise ValueError(f"scenario {scen!r} does not depend on scenario_seed, so instances={instances} "
                                 "would repeat one instance; vary the seeds instead")
            axis = f"none: scenario {scen!r} does not depend on scenario_seed (one instance)"
            pairs = [(None, s) for _, s in pairs]
    return pairs, distinct, axis


def _tasks(plan: _Plan, agents: Sequence[str], models: dict, distinct: list, freed: set) -> list[tuple]:
    """One task per (agent, instance, seed). A pool-trained model's env gets its own padding kwargs (they never
    change the dynamics); the other agents run unpadded."""
    env_id, env_kwargs = plan.env_id, plan.env_kwargs
    agent_kwargs: dict[str, dict] = {}
    for a, m in models.items():
        if a in freed or m.pinned_instance() is None:
            agent_kwargs[a] = m.eval_env_kwargs(  # padding and action kwargs (P3's action_mode)
                a, env_id, env_kwargs, [i for i in distinct if i is not None] or [env_kwargs.get("scenario_seed", 0)])
    return [(env_id, a, s, plan.horizon, {**plan.kwargs_of(i), **agent_kwargs.get(a, {})})
            for a in agents for i, s in plan.pairs]


def _run_and_score(plan: _Plan, workers: int, backend: str, progress: bool,
                   score: bool) -> tuple[list[RunResult], list[RunResult]]:
    """Run the plan's tasks on the backend (behind a progress bar over every slot) and score them where the env
    reports a bound; returns ``(runs, reference_runs)``."""
    run = run_ray if backend == "ray" else run_local
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = CostBar(tqdm(total=len(plan.tasks) * plan.horizon, unit="slot", desc=plan.env_id.split("/")[-1],
                           leave=False, dynamic_ncols=True),
                      plan.tasks, 1 if backend == "ray" else workers)  # ETA weighted by each agent's measured cost
    reference: list[RunResult] = []
    try:
        runs = run(plan.tasks, int(workers), bar)
        if score and any(r.bound_total is not None for r in runs):
            reference = _score(plan, runs, run, workers, bar)
    finally:
        if bar is not None:
            bar.close()
    return runs, reference


def _score(plan: _Plan, runs: list[RunResult], run, workers: int, bar) -> list[RunResult]:
    """Attach the normalised score to ``runs``, against the ``random`` agent's runs on the same (instance,
    seed): its own when it is among the agents, else reference runs made here (scored too and returned;
    ``[]`` otherwise)."""
    reference = [r for r in runs if r.agent == "random"]
    runs_ref: list[RunResult] = []
    if not reference:
        ref_tasks = [(plan.env_id, "random", s, plan.horizon, plan.kwargs_of(i)) for i, s in plan.pairs]
        if bar is not None:
            bar.total += len(ref_tasks) * plan.horizon
            bar.add_tasks(ref_tasks)
            bar.set_description_str("random (score reference)")
        reference = runs_ref = run(ref_tasks, int(workers), bar)
    attach_scores(runs, reference)
    attach_scores(runs_ref, reference)
    return runs_ref
