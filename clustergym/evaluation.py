"""``evaluate``: agents × instances × seeds on one env, with common random numbers.

A run is (agent, instance, seed). The **instance** is the scenario seed (env kwarg ``scenario_seed``:
graph, demands, hidden means, topology, job list); the **seed** drives the dynamics (arrivals, realised
utilities, service rates; on P3, whose job stream is the instance's, only what the agents draw). Comparisons are made over instances (:mod:`clustergym.stats`): a result that
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

from typing import Sequence

import numpy as np

from clustergym.agent import AgentSpec, evaluation_hooks, list_agents, make
from clustergym.core import check_memory
from clustergym.episode import make_env, scenario_fingerprint
from clustergym.family import env_family
from clustergym.progress import CostBar
from clustergym.results import Results, RunResult, attach_scores
from clustergym.version import __version__
from clustergym.workers import import_ray, run_local, run_ray

__all__ = ["BACKENDS", "MAX_VALUES", "check_count", "check_size", "evaluate"]

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


def evaluate(env_id: str, agents: Sequence[str], seeds: Sequence[int], horizon: int,
             env_kwargs: dict | None = None, workers: int = 1, backend: str = "local",
             progress: bool = True, instances: Sequence[int] | None = None, score: bool = True) -> Results:
    """Run every agent on every (instance, seed) (the same for every agent: common random numbers).

    Args:
        env_id: a registered id, e.g. ``"clustergym/MultiServerChannel-v0"``.
        agents: agent names, optionally with options: ``"esdp[only_active=true]"``.
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
    env_kwargs = dict(env_kwargs or {})
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is invalid: expected one of {', '.join(map(repr, BACKENDS))}")
    horizon, workers = check_count("horizon", horizon), check_count("workers", workers)
    if isinstance(agents, str):  # one agent, not its letters
        agents = [agents]
    if not agents:
        raise ValueError("no agents given")
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
    family = env_family(env_id)  # validates env_id
    known = list_agents(family=family)
    specs = [AgentSpec.parse(a) for a in agents]
    for spec in specs:
        if spec.is_registered_form and spec.name not in known:
            raise ValueError(f"unknown agent {spec.name!r} for {env_id}; available: {', '.join(known)}")
    # Fail fast on bad env kwargs and agent options, before any long run starts.
    probe = make_env(env_id, horizon=int(horizon), **env_kwargs)
    # A score needs a bound: an env whose bound is off by default (to spare training runs) names the
    # kwargs that turn it on (``score_env_kwargs``, e.g. P4's fluid bound); the user's own value wins.
    if score:
        env_kwargs = {**getattr(probe.unwrapped, "score_env_kwargs", {}), **env_kwargs}
    probe.close()
    made = [make(spec, family=family) for spec in specs]
    # Agents trained on instances (clustergym.agent.EvaluationHooks, e.g. sb3: models): one trained on a pool
    # of instances acts on any instance its padding fits (checked below, before any work); one trained on a
    # single instance acts only there (its spaces depend on the graph, the job window, ...): such a
    # comparison is pinned to it.
    models = {a: h for a, h in ((a, evaluation_hooks(m)) for a, m in zip(agents, made)) if h is not None}
    trained_on = {k for k in (m.pinned_instance() for m in models.values()) if k is not None}
    pinned_by_model = False
    if trained_on and "scenario_seed" not in env_kwargs:
        if len(trained_on) > 1 or (instances is not None and set(instances) != trained_on):
            raise ValueError(f"the sb3: models were trained on instance(s) {sorted(trained_on)} (scenario_seed) and "
                             "act only there: pass those instances, or --set scenario_seed=K, not others")
        env_kwargs["scenario_seed"] = trained_on.pop()
        instances, pinned_by_model = None, True

    # The instance of each seed: pinned, explicit (instance × seed) or one per seed.
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

    def kwargs_of(inst):
        return env_kwargs if inst is None or "scenario_seed" in env_kwargs else {**env_kwargs, "scenario_seed": inst}

    # A pool-trained model's env gets its own padding kwargs (they never change the dynamics); the other
    # agents run unpadded.
    agent_kwargs: dict[str, dict] = {}
    for a, m in models.items():
        if m.pinned_instance() is None:
            agent_kwargs[a] = m.eval_env_kwargs(  # padding and action kwargs (P3's action_mode)
                a, env_id, env_kwargs, [i for i in distinct if i is not None] or [env_kwargs.get("scenario_seed", 0)])
    tasks = [(env_id, a, s, int(horizon), {**kwargs_of(i), **agent_kwargs.get(a, {})}) for a in agents for i, s in pairs]
    # per running run: 4 float64 arrays of length horizon; kept for every run: 2 (reward, cumulative regret)
    check_memory(8.0 * horizon * (4 * min(workers, len(tasks)) + 2 * len(tasks)), f"horizon={horizon}",
                 f"the per-slot curves of {len(tasks)} runs")
    total = len(tasks) * int(horizon)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = CostBar(tqdm(total=total, unit="slot", desc=env_id.split("/")[-1], leave=False, dynamic_ncols=True),
                      tasks, 1 if backend == "ray" else workers)  # ETA weighted by each agent's measured cost
    run = run_ray if backend == "ray" else run_local
    reference: list[RunResult] = []
    try:
        runs = run(tasks, int(workers), bar)
        if score and any(r.bound_total is not None for r in runs) and "random" in known:
            reference = [r for r in runs if r.agent == "random"]
            if not reference:
                ref_tasks = [(env_id, "random", s, int(horizon), kwargs_of(i)) for i, s in pairs]
                if bar is not None:
                    bar.total += len(ref_tasks) * int(horizon)
                    bar.add_tasks(ref_tasks)
                    bar.set_description_str("random (score reference)")
                reference = run(ref_tasks, int(workers), bar)
                runs_ref = reference
            else:
                runs_ref = []
            attach_scores(runs, reference)
            attach_scores(runs_ref, reference)
            reference = runs_ref
    finally:
        if bar is not None:
            bar.close()
    for r in runs:  # was this run's instance among the model's training instances?
        hooks = models.get(r.agent)
        if hooks is not None:
            r.trained_on = hooks.trained_on(r.instance, pinned_by_model)
    return Results(env_id=env_id, env_kwargs=env_kwargs, horizon=int(horizon), runs=list(runs),
                   version=__version__, reference_runs=reference, instance_axis=axis)
