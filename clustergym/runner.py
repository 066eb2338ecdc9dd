"""Runner: agents × instances × seeds on one env, with common random numbers.

A run is (agent, instance, seed). The **instance** is the scenario seed (env kwarg ``scenario_seed``:
graph, demands, hidden means, topology, job list); the **seed** drives the dynamics (arrivals, realised
utilities, service rates). Comparisons are made over instances (:mod:`clustergym.stats`): a result that
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

import contextlib
import functools
import json
import logging
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from clustergym.metrics import MetricsAccumulator, _scalar, metrics_spec_of

__all__ = ["BACKENDS", "TIMING_FIELDS", "Episode", "RunResult", "Results", "evaluate", "run_episode", "run_one",
           "run_tasks", "time_decisions", "Transition"]

BACKENDS = ("local", "ray")
# Fields of results.json that measure time on the machine that ran them: they differ between any two
# runs (even two local ones); everything else is a function of (env, agents, seeds, horizon, kwargs).
TIMING_FIELDS = ("wall_s", "decision_ms_median", "decision_ms_p95")


@dataclass
class RunResult:
    agent: str
    seed: int
    total_reward: float
    mean_reward: float
    regret: float | None
    oracle_total: float | None
    steps: int
    wall_s: float
    decision_ms_median: float
    decision_ms_p95: float
    metrics: dict = field(default_factory=dict)
    instance: int | None = None  # scenario seed of the run (None: a fixed Scenario object or preset)
    value_total: float = 0.0  # evaluated total: Σ expected_reward where reported, else total_reward
    bound_total: float | None = None  # oracle total / episode bound / best static (see module docstring)
    score: float | None = None  # (V − V_random) / (B − V_random), set by evaluate()
    trained_on: bool | None = None  # sb3: models: was this run's instance one the model trained on (None: other agents)
    # per-slot curves (not in results.json; written to curves.csv)
    reward: np.ndarray | None = field(default=None, repr=False)
    cum_regret: np.ndarray | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("reward"), d.pop("cum_regret")
        return d


@dataclass
class Episode:
    """What :func:`run_episode` measured (arrays cover the ``steps`` slots played)."""

    steps: int
    rewards: np.ndarray  # (steps,) reward of each slot
    decision_s: np.ndarray  # (steps,) seconds spent in agent.act per slot
    regrets: np.ndarray  # (steps,) metrics["regret"], NaN where the env reported none
    oracle: np.ndarray  # (steps,) metrics["oracle_reward"], NaN where none
    metrics: MetricsAccumulator  # every slot's metrics, aggregated as the env declares them
    wall_s: float  # wall time from the first act to the last step
    obs: Any = None  # the last observation
    info: dict = field(default_factory=dict)  # the last info (with metrics)
    terminated: bool = False
    truncated: bool = False

    @property
    def final_metrics(self) -> dict:
        return self.metrics.last


class Transition(NamedTuple):
    """One slot as :func:`run_episode` saw it (full infos, with metrics: for evaluation code only)."""

    t: int  # slot index from 0
    obs: Any  # the observation the agent acted on
    info: dict  # the info that came with it
    action: Any
    reward: float
    next_obs: Any
    next_info: dict  # the info env.step returned


def aligned_table(head: list[str], rows: list[list], align: tuple[str, ...] | None = None) -> str:
    """A plain-text table whose columns line up whatever the cell widths (agent names with options, long
    learner paths): ``tabulate``'s "simple" format, cells as given (strings are not re-parsed as numbers)."""
    from tabulate import tabulate

    return tabulate(rows, headers=head, tablefmt="simple", colalign=align, disable_numparse=True)


def make_env(env_id: str, **kwargs):
    """``gym.make`` for the runner's own runs, without Gymnasium's passive-checker warning about Box
    entries with low == high: on P2's trace preset (``alibaba-v2023``) servers that lack a device type
    really have [0, 0] bounds, and the warning would print once per worker in the middle of a sweep."""
    import warnings

    import gymnasium as gym

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Box action space maximum and minimum values are equal")
        return gym.make(env_id, **kwargs)

def run_episode(env, agent, seed: int | None, max_steps: int | None = None, *,
                progress: Callable[[int], None] | None = None,
                on_step: Callable[[Transition], None] | None = None) -> Episode:
    """The evaluation loop every runner, experiment and decision benchmark shares.

    ``env.reset(seed)``, ``agent.reset(problem, seed)``, then per slot: ``agent.act(obs, info)`` (timed),
    ``env.step``, ``agent.update(...)``, with ``info`` always passed through
    :func:`clustergym.agent.public_info` (no ``"metrics"``: agents never see evaluation quantities), and
    the metrics accumulated as the env declares them (:mod:`clustergym.metrics`). Stops at the end of the
    episode or after ``max_steps`` slots (default: the env's ``horizon``).

    Args:
        env: a single env (``gym.make(...)`` or its ``.unwrapped``).
        agent: an agent (:class:`clustergym.agent.Agent`).
        seed: the dynamics seed for ``env.reset`` and ``agent.reset``.
        max_steps: at most this many slots.
        progress: called with the number of slots done, every 200 slots and at the end.
        on_step: called with each slot's :class:`Transition` after the agent's update (diagnostics that
            read the state an agent acted on, e.g. the jobs in the window when its decision was timed).
    """
    from clustergym.agent import public_info

    base = getattr(env, "unwrapped", env)
    n = int(base.horizon if max_steps is None else max_steps)
    obs, info = env.reset(seed=seed)
    agent.reset(base.problem, seed=seed)
    rewards = np.zeros(n)
    regrets = np.full(n, np.nan)
    oracle = np.full(n, np.nan)
    decision = np.zeros(n)
    acc = MetricsAccumulator(metrics_spec_of(env))
    t0 = time.perf_counter()
    steps = 0
    terminated = truncated = False
    for t in range(n):
        pub = public_info(info)
        d0 = time.perf_counter()
        action = agent.act(obs, pub)
        decision[t] = time.perf_counter() - d0
        next_obs, reward, terminated, truncated, next_info = env.step(action)
        agent.update(obs, action, reward, next_obs, public_info(next_info))
        if on_step is not None:
            on_step(Transition(t, obs, info, action, reward, next_obs, next_info))
        info = next_info
        rewards[t] = reward
        m = info.get("metrics", {})
        if "regret" in m:
            regrets[t] = m["regret"]
        if "oracle_reward" in m:
            oracle[t] = m["oracle_reward"]
        acc.add(m)
        obs = next_obs
        steps = t + 1
        if progress is not None and (steps % 200 == 0 or terminated or truncated):
            progress(200 if steps % 200 == 0 else steps % 200)
        if terminated or truncated:
            break
    wall = time.perf_counter() - t0
    return Episode(steps=steps, rewards=rewards[:steps], decision_s=decision[:steps], regrets=regrets[:steps],
                   oracle=oracle[:steps], metrics=acc, wall_s=wall, obs=obs, info=info, terminated=bool(terminated),
                   truncated=bool(truncated))


def time_decisions(env, agent, slots: int, seed: int = 0, on_step: Callable[[Transition], None] | None = None
                   ) -> np.ndarray:
    """Seconds per ``agent.act`` over ``slots`` slots of :func:`run_episode` (the decision-timing rows
    of ``clustergym bench``); ``env`` should have ``oracle=False`` so only the agent is timed."""
    return run_episode(env, agent, seed, max_steps=slots, on_step=on_step).decision_s


def run_one(env_id: str, agent_spec: str, seed: int, horizon: int, env_kwargs: dict | None = None,
            progress: Callable[[int], None] | None = None) -> RunResult:
    """One episode of ``agent_spec`` on ``env_id`` with env seed ``seed`` (:func:`run_episode`).

    The instance is ``env_kwargs["scenario_seed"]`` when given (recorded as ``RunResult.instance``).
    The agent gets the public problem and ``info`` without ``"metrics"``; the runner keeps the
    metrics for evaluation (per-slot ``regret`` when the env has an oracle).
    """

    import clustergym  # noqa: F401  (registers envs)
    from clustergym.agent import make

    env = make_env(env_id, horizon=horizon, **(env_kwargs or {}))
    agent = make(agent_spec, env_id=env_id)
    ep = run_episode(env, agent, seed, max_steps=horizon, progress=progress)
    env.close()
    steps, rewards, regrets, oracle, decision = ep.steps, ep.rewards, ep.regrets, ep.oracle, ep.decision_s
    final_metrics = ep.final_metrics
    sums = ep.metrics.sums
    has_regret = not np.all(np.isnan(regrets))
    if "episode_regret" in final_metrics:  # problems whose regret is defined at episode end only
        regret = float(final_metrics["episode_regret"])
        has_regret = True
        cum = np.full(steps, np.nan)
        cum[-1] = regret
    else:
        regret = float(np.nansum(regrets)) if has_regret else None
        cum = np.nancumsum(regrets) if has_regret else None
    oracle_total = float(np.nansum(oracle)) if not np.all(np.isnan(oracle)) else None
    value_total = float(sums["expected_reward"]) if "expected_reward" in sums else float(rewards.sum())
    if oracle_total is not None:
        bound_total = oracle_total
    elif _scalar(final_metrics.get("episode_bound")) is not None:
        bound_total = float(final_metrics["episode_bound"])
    elif _scalar(final_metrics.get("episode_best_static")) is not None:
        bound_total = float(final_metrics["episode_best_static"])
    else:
        bound_total = None
    instance = (env_kwargs or {}).get("scenario_seed")
    return RunResult(
        agent=agent_spec, seed=int(seed), total_reward=float(rewards.sum()),
        mean_reward=float(rewards.mean()) if steps else 0.0,
        regret=regret, oracle_total=oracle_total,
        steps=steps, wall_s=ep.wall_s,
        decision_ms_median=float(np.median(decision) * 1000) if steps else 0.0,
        decision_ms_p95=float(np.percentile(decision, 95) * 1000) if steps else 0.0,
        metrics=ep.metrics.summary(steps), instance=None if instance is None else int(instance),
        value_total=value_total, bound_total=bound_total, reward=rewards, cum_regret=cum,
    )


@dataclass
class Results:
    env_id: str
    env_kwargs: dict
    horizon: int
    runs: list[RunResult]
    version: str = ""
    reference_runs: list[RunResult] = field(default_factory=list)  # random runs made only for the score
    instance_axis: str = "scenario_seed"  # or a note saying why the runs share one instance

    @property
    def agents(self) -> list[str]:
        return list(dict.fromkeys(r.agent for r in self.runs))

    @property
    def instances(self) -> list:
        return list(dict.fromkeys(r.instance for r in self.runs))

    def per_instance(self, agent: str, key: str = "total_reward") -> dict:
        """``{instance: mean over that instance's seeds}`` of a run field (e.g. ``total_reward``,
        ``score``, ``regret``) or of a run metric (``metrics[key]``), for one agent."""
        groups: dict = {}
        for r in self.runs:
            if r.agent != agent:
                continue
            v = getattr(r, key) if hasattr(r, key) else r.metrics.get(key)
            if v is not None:
                groups.setdefault(r.instance, []).append(float(v))
        return {i: float(np.mean(v)) for i, v in groups.items()}

    def comparisons(self, reference: str | None = None, key: str = "total_reward") -> list:
        """Every other agent vs ``reference`` (default: the first agent), paired over instances:
        mean relative improvement (%) with a 95% t-interval over instances, wins/losses/ties
        (:func:`clustergym.stats.paired_comparison`)."""
        from clustergym.stats import paired_comparison

        agents = self.agents
        reference = agents[0] if reference is None else reference
        if reference not in agents:
            raise ValueError(f"reference={reference!r} is not among the agents: {', '.join(agents)}")
        ref = self.per_instance(reference, key)
        return [paired_comparison(self.per_instance(a, key), ref, agent=a, reference=reference)
                for a in agents if a != reference]

    def summary(self) -> list[dict]:
        out = []
        for agent in self.agents:
            rs = [r for r in self.runs if r.agent == agent]
            tot = np.array([r.total_reward for r in rs])
            reg = [r.regret for r in rs if r.regret is not None]
            sc = [r.score for r in rs if r.score is not None]
            out.append({
                "agent": agent,
                "mean_total_reward": float(tot.mean()),
                "std_total_reward": float(tot.std(ddof=1)) if len(rs) > 1 else 0.0,
                "mean_regret": float(np.mean(reg)) if reg else None,
                "n": len(rs),
                "n_instances": len({r.instance for r in rs}),
                "mean_score": float(np.mean(sc)) if sc else None,
                "decision_ms_median": float(np.median([r.decision_ms_median for r in rs])),
            })
        return out

    def to_json(self) -> dict:
        return {"env_id": self.env_id, "env_kwargs": self.env_kwargs, "horizon": self.horizon,
                "version": self.version, "instance_axis": self.instance_axis,
                "instances": self.instances, "runs": [r.to_json() for r in self.runs],
                "summary": self.summary(),
                "comparisons": [c.to_json() for c in self.comparisons()] if len(self.agents) > 1 else [],
                "score": SCORE_DEFINITION,
                "reference_runs": [r.to_json() for r in self.reference_runs]}

    def table(self) -> str:
        """A plain-text comparison table (one row per agent).

        "vs best" is each agent's mean relative difference to the agent with the highest mean total
        reward, paired over instances, with its 95% t-interval and the wins/losses over instances.
        """
        from clustergym.stats import fmt_ci

        rows = self.summary()
        if not rows:
            return ""
        best = max(rows, key=lambda r: r["mean_total_reward"])["agent"]
        comps = {c.agent: c for c in self.comparisons(reference=best)} if len(rows) > 1 else {}
        n_inst = len(self.instances)
        seen = self._trained_on_counts()
        body = []
        for r in sorted(rows, key=lambda r: -r["mean_total_reward"]):
            c = comps.get(r["agent"])
            body.append([r["agent"] + ("*" if r["agent"] in seen else ""),
                         f"{r['mean_total_reward']:.1f} ± {r['std_total_reward']:.1f}",
                         "(best)" if c is None else fmt_ci(c), "" if c is None else f"{c.wins}/{c.losses}",
                         "-" if r["mean_score"] is None else f"{r['mean_score']:.3f}",
                         "-" if r["mean_regret"] is None else f"{r['mean_regret']:.1f}",
                         f"{r['decision_ms_median']:.3f}"])
        head = ["agent", "total reward (mean ± std)", "vs best [95% CI]", "W/L", "score", "regret", "decision ms"]
        lines = [f"* {a}: {k} of {n} runs on instances it was trained on ({', '.join(map(str, inst))}); compare "
                 "learned agents on held-out instances" for a, (k, n, inst) in seen.items()]
        return "\n".join([f"{len(self.runs) // max(len(rows), 1)} runs per agent over {n_inst} instance(s)"
                          f" ({self.instance_axis}); intervals: 95% t over instances",
                          aligned_table(head, body, align=("left", "right", "left", "right", "right", "right",
                                                           "right")), *lines])

    def _trained_on_counts(self) -> dict:
        """agent -> (runs on a training instance, runs, those instances) for agents with such runs."""
        out = {}
        for a in self.agents:
            runs = [r for r in self.runs if r.agent == a]
            hit = [r for r in runs if r.trained_on]
            if hit:
                out[a] = (len(hit), len(runs), sorted({r.instance for r in hit}, key=lambda x: (x is None, x)))
        return out

    def write(self, out_dir: str, plots: bool = True) -> list[str]:
        """Write results.json, curves.csv and (optionally) PNG plots into ``out_dir``; return paths.

        curves.csv is written with the csv module (agent names with commas or brackets are quoted).
        """
        import csv

        os.makedirs(out_dir, exist_ok=True)
        paths = [os.path.join(out_dir, "results.json"), os.path.join(out_dir, "curves.csv")]
        data, bad = _strict_json(self.to_json())
        if bad:  # strict JSON has no NaN/Infinity: written as null, and the fields named
            data["non_finite"] = (f"{len(bad)} value(s) were NaN or infinite and are written as null: "
                                  + ", ".join(bad[:20]) + (" ..." if len(bad) > 20 else ""))
        _atomic_write(paths[0], lambda f: json.dump(data, f, indent=1, allow_nan=False))

        def curves(f):
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["agent", "seed", "t", "reward", "cumulative_reward", "cumulative_regret", "instance"])
            for r in self.runs:
                cr = np.cumsum(r.reward)
                reg = r.cum_regret if r.cum_regret is not None else np.full(r.steps, np.nan)
                inst = "" if r.instance is None else r.instance
                for t in range(r.steps):
                    w.writerow([r.agent, r.seed, t + 1, f"{r.reward[t]:.6g}", f"{cr[t]:.6g}",
                                "" if math.isnan(reg[t]) else format(reg[t], ".6g"), inst])

        _atomic_write(paths[1], curves)
        if plots:
            from clustergym.plots import plot_results

            paths += plot_results(self, out_dir)
        return paths


SCORE_DEFINITION = ("score = (V - V_random) / (B - V_random) on the same instance and seed; V = sum of "
                    "expected_reward where the env reports it, else total reward; B = per-slot oracle total, "
                    "else episode_bound, else episode_best_static (P2; can be exceeded online); "
                    "V_random = the random agent's V")


def _atomic_write(path: str, write) -> None:
    """Write through a temporary file renamed into place, so a crash never leaves half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", newline="") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _scenario_fingerprint(env_id: str, horizon: int, env_kwargs: dict) -> str | None:
    """A hash of the scenario an env is built from (None if it cannot be pickled)."""
    import hashlib
    import pickle

    env = make_env(env_id, horizon=horizon, **env_kwargs)
    try:
        return hashlib.sha256(pickle.dumps(env.unwrapped.scenario)).hexdigest()
    except Exception:  # noqa: BLE001 - an unpicklable scenario: assume the seed matters
        return None
    finally:
        env.close()


def attach_scores(runs: list[RunResult], reference: list[RunResult]) -> None:
    """Set ``score`` on every run that has a bound, from the random run on the same (instance, seed)."""
    ref = {(r.instance, r.seed): r.value_total for r in reference}
    for r in runs:
        v0 = ref.get((r.instance, r.seed))
        if r.bound_total is None or v0 is None:
            continue
        gap = r.bound_total - v0
        r.score = float((r.value_total - v0) / gap) if gap > 1e-12 * max(1.0, abs(r.bound_total)) else None


def _strict_json(obj, where: str = "", bad: list | None = None):
    """``obj`` as plain JSON types (numpy scalars and arrays converted), NaN/±inf replaced by None;
    returns (converted, the dotted paths of the replaced values)."""
    bad = [] if bad is None else bad
    if isinstance(obj, dict):
        return {str(k): _strict_json(v, f"{where}.{k}" if where else str(k), bad)[0] for k, v in obj.items()}, bad
    if isinstance(obj, (list, tuple)):
        return [_strict_json(v, f"{where}[{i}]", bad)[0] for i, v in enumerate(obj)], bad
    if isinstance(obj, np.ndarray):
        return _strict_json(obj.tolist(), where, bad)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj), bad
    if isinstance(obj, (int, np.integer)):
        return int(obj), bad
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if not math.isfinite(v):
            bad.append(where)
            return None, bad
        return v, bad
    if obj is None or isinstance(obj, str):
        return obj, bad
    return _json_default(obj), bad


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _run_task(args, report=None):
    """A run of :func:`run_one`; ``report`` receives its progress (slots done): a callable (in this
    process) or a queue (in a worker process)."""
    progress = report if report is None or callable(report) else functools.partial(_put_progress, report)
    return run_one(*args, progress=progress)


def _put_progress(queue, n: int) -> None:
    queue.put(n)


_SHARED_POOL: dict[int, ProcessPoolExecutor] = {}


def _new_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes that die with this one (:func:`_worker_init`) and report the task each
    starts (so a lost task is known when a worker dies: :func:`run_tasks`)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    started = ctx.SimpleQueue()
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(os.getpid(), started))
    ex._cg_started = started  # type: ignore[attr-defined]
    ex._cg_procs = {}  # type: ignore[attr-defined]  # pid -> Process, every worker this pool ever had
    return ex


@contextlib.contextmanager
def worker_pool(workers: int):
    """Yield a pool of ``workers`` spawned processes, kept for every local ``evaluate(..., workers=workers)``
    inside the block (instead of a new pool per call), e.g. the many short sweeps of ``reproduce``.

    Runs depend only on their arguments, so results are the same with or without the shared pool;
    it saves the start-up of the worker processes (imports, compiled kernels) on every call. The
    workers never outlive this process (:func:`_worker_init`); a pool broken by a dead worker is
    replaced by :func:`run_tasks` (``_SHARED_POOL[workers]`` is then the new one).
    """
    if workers in _SHARED_POOL:  # an outer block already shares one
        yield _SHARED_POOL[workers]
        return
    _SHARED_POOL[workers] = _new_pool(workers)
    try:
        yield _SHARED_POOL[workers]
    except BaseException:  # Ctrl-C, SIGTERM (the CLI turns it into KeyboardInterrupt) or a failed run
        terminate_pool(_SHARED_POOL[workers])
        raise
    else:
        _SHARED_POOL[workers].shutdown(wait=True, cancel_futures=True)
    finally:
        del _SHARED_POOL[workers]


_STARTED = None  # in a worker: the queue it reports the tasks it starts to


def _parent_watchdog(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def _worker_init(parent: int | None = None, started=None) -> None:
    """Workers die with their parent and ignore SIGINT.

    The parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``) kills a worker the moment the
    parent dies, even by ``kill -9``; elsewhere a watchdog thread checks the parent's pid twice a second.
    SIGINT is ignored: a Ctrl-C in the terminal reaches the whole process group, and the parent alone
    decides (it terminates the workers), so no worker prints a traceback of its own.
    """
    import signal
    import sys
    import threading

    global _STARTED
    _STARTED = started
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
            except (OSError, AttributeError):
                pass
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)
        threading.Thread(target=_parent_watchdog, args=(parent,), daemon=True, name="clustergym-parent-watchdog").start()
    from clustergym.family import load_plugins

    load_plugins()  # user families registered by entry point (spawned workers start from a fresh import)


def _manager_init(parent: int) -> None:
    _worker_init(parent)


def _tracked(fn: Callable, token: str, i: int, task, report):
    """``fn(task, report)`` in a worker, after telling the parent that this process started task ``i``."""
    if _STARTED is not None:
        _STARTED.put((token, i, os.getpid()))
    return fn(task, report)


def terminate_pool(ex: ProcessPoolExecutor, timeout: float = 5.0) -> None:
    """Stop a pool now: cancel what has not started, terminate the worker processes (kill after ``timeout``)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout)
        if p.is_alive():
            p.kill()
            p.join(timeout)


class Interrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C or SIGTERM; the message says how much was done (nothing is written)."""


def was_interrupted(exc: BaseException | None) -> bool:
    """Whether ``exc`` is Ctrl-C / SIGTERM, or an error raised because of one: compiled code (numba's
    ``SystemError: ... returned a result with an exception set``, torch) wraps a KeyboardInterrupt raised
    inside it as the cause or context of its own error."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class WorkerDied(RuntimeError):
    """A run whose worker process died twice (killed, out of memory, a crash in native code)."""


def _describe_task(task) -> str:
    """``hauf seed 3 (instance 3) on clustergym/...`` for a runner task, else a short repr."""
    if isinstance(task, tuple) and len(task) >= 3 and isinstance(task[0], str) and isinstance(task[1], str):
        kw = task[4] if len(task) > 4 and isinstance(task[4], dict) else {}
        inst = f" (instance {kw['scenario_seed']})" if "scenario_seed" in kw else ""
        return f"{task[1]} seed {task[2]}{inst} on {task[0]}"
    text = repr(task)
    return text if len(text) <= 100 else text[:97] + "..."


def _drain_started(ex, token: str, started: dict) -> None:
    q = getattr(ex, "_cg_started", None)
    procs = getattr(ex, "_cg_procs", None)
    if procs is not None:
        procs.update(getattr(ex, "_processes", None) or {})
    if q is None:
        return
    try:
        while not q.empty():
            tok, i, pid = q.get()
            if tok == token:
                started[i] = pid
    except (OSError, EOFError):
        pass


def _exit_note(code) -> str:
    import signal

    if code is None:
        return "died"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def run_tasks(fn: Callable, tasks: list, workers: int, *, report=None, on_start: Callable | None = None,
              on_done: Callable | None = None) -> list:
    """``[fn(task, report) for task in tasks]``, in this process (``workers == 1``) or in the shared pool
    of spawned worker processes (:func:`worker_pool`); results in task order.

    ``fn`` must be picklable (a module-level function) for ``workers > 1``. ``on_start(task)`` (in this
    process only) and ``on_done(result)`` are called around each task. Ctrl-C stops the workers and
    raises :class:`Interrupted`; a failed task cancels the pending ones and re-raises.

    A worker process that dies (killed, out of memory) costs its task, not the sweep: the finished
    results are kept, the pool is replaced and the unfinished tasks run again (one line on stderr says
    so); a task whose worker dies a second time is a :class:`WorkerDied` naming it. Tasks are pure
    functions of their arguments, so a retried task gives the result it would have given (as Ray's
    retries do).
    """
    out: list = [None] * len(tasks)
    if workers == 1:
        i = 0
        try:
            for i, task in enumerate(tasks):
                if on_start is not None:
                    on_start(task)
                out[i] = fn(task, report)
                if on_done is not None:
                    on_done(out[i])
        except BaseException as exc:  # Ctrl-C, also when compiled code (numba) wrapped it in a SystemError
            if not isinstance(exc, Interrupted) and was_interrupted(exc):
                raise Interrupted(f"interrupted after {i} of {len(tasks)} runs; these runs were discarded (no "
                                  "results of this sweep were written)") from None
            raise
        return out
    import sys
    import uuid
    from concurrent.futures.process import BrokenProcessPool

    token = uuid.uuid4().hex
    pending = list(range(len(tasks)))
    lost: dict[int, int] = {}
    started: dict[int, int] = {}
    blind = 0
    with worker_pool(workers):
        while pending:
            ex = _SHARED_POOL[workers]
            futs = {ex.submit(_tracked, fn, token, i, tasks[i], report): i for i in pending}
            _drain_started(ex, token, started)
            try:
                for fut in as_completed(futs):
                    i = futs[fut]
                    out[i] = fut.result()
                    pending.remove(i)
                    _drain_started(ex, token, started)
                    if on_done is not None:
                        on_done(out[i])
            except BrokenProcessPool:
                for fut, i in futs.items():  # keep what finished before the pool broke
                    if i in pending and fut.done() and not fut.cancelled() and fut.exception() is None:
                        out[i] = fut.result()
                        pending.remove(i)
                        if on_done is not None:
                            on_done(out[i])
                _drain_started(ex, token, started)
                procs = ex._cg_procs  # type: ignore[attr-defined]
                for p in procs.values():
                    p.join(2.0)  # reap: the exit code tells the dead from the ones the pool stopped
                dead = {pid: p.exitcode for pid, p in procs.items()
                        if p.exitcode is not None and p.exitcode != -15}  # -SIGTERM: stopped by the pool
                hit = [i for i in pending if started.get(i) in dead]
                if not hit:
                    blind += 1
                    hit = [i for i in pending if i in started]
                    if blind >= 2:
                        raise WorkerDied(f"worker processes died twice during this sweep (last during "
                                         f"{_describe_task(tasks[hit[0]]) if hit else 'start-up'}); "
                                         "nothing of this sweep was written") from None
                else:
                    blind = 0
                for i in hit:
                    lost[i] = lost.get(i, 0) + 1
                    if lost[i] >= 2:
                        raise WorkerDied(f"run {_describe_task(tasks[i])} failed twice: its worker process "
                                         f"{_exit_note(dead.get(started.get(i)))} (out of memory?); nothing of this "
                                         "sweep was written") from None
                names = ", ".join(_describe_task(tasks[i]) for i in hit[:3]) or "a run"
                codes = ", ".join(f"pid {pid} {_exit_note(c)}" for pid, c in dead.items()) or "a worker died"
                print(f"clustergym: a worker process died ({codes}) during {names}; retrying the "
                      f"{len(pending)} unfinished run(s) in new workers ({len(tasks) - len(pending)} finished kept)",
                      file=sys.stderr)
                terminate_pool(ex)
                _SHARED_POOL[workers] = _new_pool(workers)
                started.clear()
            except KeyboardInterrupt:
                for f in futs:
                    f.cancel()
                done = sum(r is not None for r in out)
                raise Interrupted(f"interrupted after {done} of {len(tasks)} runs; the workers were stopped and "
                                  "these runs discarded (no results of this sweep were written)") from None
            except BaseException:
                for f in futs:  # a failed run stops this call's pending runs
                    f.cancel()
                raise
    return out


def _run_local(tasks: list[tuple], workers: int, bar) -> list[RunResult]:
    """The runs in this process or the worker pool, round-robin over the agents (so the progress bar measures
    every agent's cost early: :mod:`clustergym.progress`); results in the order of ``tasks``."""
    from clustergym.progress import interleaved

    order = interleaved(tasks)
    mine = [tasks[i] for i in order]
    if workers == 1:
        start = None if bar is None else getattr(bar, "start_task", None)
        done = _unordered(run_tasks(_run_task, mine, 1, report=None if bar is None else bar.update, on_start=start), order)
        return done
    with _progress_queue(bar) as queue:
        done = None if bar is None else getattr(bar, "run_done", None)
        return _unordered(run_tasks(_run_task, mine, workers, report=queue, on_done=done), order)


def _unordered(results: list, order: list[int]) -> list:
    out: list = [None] * len(order)
    for r, i in zip(results, order):
        out[i] = r
    return out


@contextlib.contextmanager
def _progress_queue(bar):
    """A queue the workers report their slots to, drained into ``bar`` by a thread (so the bar moves
    during long runs, not only when a whole run ends); ``None`` without a bar."""
    if bar is None:
        yield None
        return
    import multiprocessing as mp
    import queue as queue_mod
    import threading

    from multiprocessing.managers import SyncManager

    manager = SyncManager(ctx=mp.get_context("spawn"))
    manager.start(_manager_init, (os.getpid(),))  # the manager process dies with this one too
    q = manager.Queue()
    stop = threading.Event()

    def drain():
        while not stop.is_set() or not q.empty():
            try:
                bar.update(q.get(timeout=0.2))
            except queue_mod.Empty:
                continue
            except (EOFError, OSError, BrokenPipeError):  # the manager went away (interrupt)
                return

    th = threading.Thread(target=drain, daemon=True)
    th.start()
    try:
        yield q
    finally:
        stop.set()
        th.join(timeout=5)
        manager.shutdown()


def _import_ray():
    try:
        import ray
    except ImportError:  # a ValueError like every missing optional extra (see baselines/drl.py)
        raise ValueError("backend='ray' needs Ray: pip install 'clustergym[ray]'") from None
    return ray


def _probe_ray_address(address: str, timeout: float = 10.0) -> None:
    """One TCP connection to ``host:port`` of ``$RAY_ADDRESS`` (``ray://`` or plain), within ``timeout`` s."""
    import socket

    hostport = address.split("://", 1)[-1].rstrip("/")
    if hostport in ("auto", "local") or ":" not in hostport:
        return
    host, _, port = hostport.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise ValueError(f"backend='ray': nothing answers at RAY_ADDRESS={address!r} within {timeout:g} s ({exc}); "
                         "start the cluster or unset RAY_ADDRESS to run a local Ray") from None


def _run_ray(tasks: list[tuple], workers: int, bar) -> list[RunResult]:
    """Each task is one Ray task; results go back to task order, so they equal the local backend's.

    Uses the Ray instance this process is already connected to (``ray.init(address=...)``), else
    connects to ``$RAY_ADDRESS`` when set, else starts a private local instance with ``workers`` CPUs.
    Shuts down only what it started (a connection to ``$RAY_ADDRESS`` is closed, the cluster lives on).
    """
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        if address := os.environ.get("RAY_ADDRESS"):
            _probe_ray_address(address)  # ray.init would wait minutes for an address where nothing listens
            # ray.init() honours RAY_ADDRESS when address is None; num_cpus must not be given then.
            try:
                ray.init(log_to_driver=False)
            except ConnectionError as exc:  # a user error: one line on the command line, not a traceback
                raise ValueError(f"backend='ray' cannot connect to RAY_ADDRESS={address!r} ({exc}); if the "
                                 "cluster uses token authentication, set RAY_AUTH_MODE=token") from exc
        else:
            # address="local": never attach to a stray `ray start` instance, whose CPUs we cannot set.
            ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                     ignore_reinit_error=True, logging_level=logging.WARNING)
        started = True
    try:
        # Runs are pure functions of their arguments, so Ray may retry one whose worker died.
        remote_run = ray.remote(num_cpus=1)(run_one)
        refs = [remote_run.remote(*task) for task in tasks]
        index = {ref: i for i, ref in enumerate(refs)}
        runs: list[RunResult | None] = [None] * len(tasks)
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    i = index[ref]
                    runs[i] = ray.get(ref)
                    if bar is not None:
                        bar.update(runs[i].steps)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return runs
    finally:
        if started:
            ray.shutdown()


MAX_VALUES = 100_000  # the most seeds (or instances) one call takes: each is at least one run per agent


def _check_size(name: str, values) -> None:
    """Refuse a huge ``seeds`` / ``instances`` (e.g. ``range(0, 10**15)``) before iterating over it."""
    n = len(values) if hasattr(values, "__len__") else None
    if n is not None and n > MAX_VALUES:
        raise ValueError(f"{name} has {n:,} values; at most {MAX_VALUES:,} per call")


def _check_count(name: str, value, lo: int = 1) -> int:
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

    import clustergym
    from clustergym.agent import env_family, list_agents, parse_agent_spec

    env_kwargs = dict(env_kwargs or {})
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is invalid: expected one of {', '.join(map(repr, BACKENDS))}")
    horizon, workers = _check_count("horizon", horizon), _check_count("workers", workers)
    if isinstance(agents, str):  # one agent, not its letters
        agents = [agents]
    if not agents:
        raise ValueError("no agents given")
    if not seeds:
        raise ValueError("no seeds given")
    _check_size("seeds", seeds)
    seeds = [_check_count("seeds", s, lo=0) for s in seeds]
    if "horizon" in env_kwargs:
        raise ValueError("pass the episode length as horizon=, not in env_kwargs")
    if "instances" in env_kwargs:  # an env drawing its instance per episode would run unlabelled instances
        raise ValueError("the env kwarg 'instances' draws a new instance every episode, and a run is labelled with "
                         "one instance: pass the instances to the runner instead (--instances / instances=)")
    if "scenario_seed" in env_kwargs:
        env_kwargs["scenario_seed"] = _check_count("scenario_seed", env_kwargs["scenario_seed"], lo=0)
    if instances is not None:
        if "scenario_seed" in env_kwargs:
            raise ValueError("instances= and env_kwargs['scenario_seed'] cannot be combined: scenario_seed "
                             "pins one instance for every run")
        if not len(instances):
            raise ValueError("instances is empty")
        _check_size("instances", instances)
        instances = list(dict.fromkeys(_check_count("instances", i, lo=0) for i in instances))
    if backend == "ray":
        _import_ray()  # fail before any work when Ray is missing
    family = env_family(env_id)  # validates env_id
    known = list_agents(family=family)
    for a in agents:
        name, _ = parse_agent_spec(a)
        if name not in known and not name.startswith("sb3:") and ":" not in name:
            raise ValueError(f"unknown agent {name!r} for {env_id}; available: {', '.join(known)}")
    # Fail fast on bad env kwargs and agent options, before any long run starts.
    probe = make_env(env_id, horizon=int(horizon), **env_kwargs)
    # A score needs a bound: an env whose bound is off by default (to spare training runs) names the
    # kwargs that turn it on (``score_env_kwargs``, e.g. P4's fluid bound); the user's own value wins.
    if score:
        env_kwargs = {**getattr(probe.unwrapped, "score_env_kwargs", {}), **env_kwargs}
    probe.close()
    from clustergym.agent import make

    made = [make(a, family=family) for a in agents]
    # Trained SB3 models (clustergym.learning.instances): one trained on a pool of instances acts on any
    # instance its padding fits (checked below, before any work); one trained on a single instance acts
    # only there (its spaces depend on the graph, the job window, ...): such a comparison is pinned to it.
    models = {a: m for a, m in zip(agents, made) if hasattr(m, "meta")}
    trained_on = {int(m.meta.get("env_kwargs", {}).get("scenario_seed", 0)) for m in models.values()
                  if m.meta.get("instances") is None}
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
        fp = [_scenario_fingerprint(env_id, int(horizon), {**env_kwargs, "scenario_seed": i}) for i in distinct[:2]]
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

    # A pool-trained model's env gets the side-car's padding kwargs (they never change the dynamics); the
    # other agents run unpadded.
    agent_kwargs: dict[str, dict] = {}
    for a, m in models.items():
        if m.meta.get("instances") is not None:
            from clustergym.learning.instances import check_model_fits, model_env_kwargs

            check_model_fits(m.meta, a, env_id, env_kwargs,
                             [i for i in distinct if i is not None] or [env_kwargs.get("scenario_seed", 0)])
            agent_kwargs[a] = model_env_kwargs(m.meta)  # padding and action kwargs (P3's action_mode)
    tasks = [(env_id, a, s, int(horizon), {**kwargs_of(i), **agent_kwargs.get(a, {})}) for a in agents for i, s in pairs]
    from clustergym.core import check_memory

    # per running run: 4 float64 arrays of length horizon; kept for every run: 2 (reward, cumulative regret)
    check_memory(8.0 * horizon * (4 * min(workers, len(tasks)) + 2 * len(tasks)), f"horizon={horizon}",
                 f"the per-slot curves of {len(tasks)} runs")
    total = len(tasks) * int(horizon)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        from clustergym.progress import CostBar

        bar = CostBar(tqdm(total=total, unit="slot", desc=env_id.split("/")[-1], leave=False, dynamic_ncols=True),
                      tasks, 1 if backend == "ray" else workers)  # ETA weighted by each agent's measured cost
    run = _run_ray if backend == "ray" else _run_local
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
        m = models.get(r.agent)
        if m is not None:
            pool = m.meta.get("instances")
            r.trained_on = (r.instance in pool) if pool is not None else pinned_by_model or (
                r.instance == int(m.meta.get("env_kwargs", {}).get("scenario_seed", 0)))
    return Results(env_id=env_id, env_kwargs=env_kwargs, horizon=int(horizon), runs=list(runs),
                   version=clustergym.__version__, reference_runs=reference, instance_axis=axis)
