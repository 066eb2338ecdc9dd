"""Runner: agents × seeds on one env, with common random numbers (SPEC §3.4)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["BACKENDS", "TIMING_FIELDS", "RunResult", "Results", "evaluate", "run_one"]

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
    # per-slot curves (not in results.json; written to curves.csv)
    reward: np.ndarray | None = field(default=None, repr=False)
    cum_regret: np.ndarray | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("reward"), d.pop("cum_regret")
        return d


def _scalar(v: Any) -> float | None:
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    return None


def run_one(env_id: str, agent_spec: str, seed: int, horizon: int, env_kwargs: dict | None = None,
            progress: Callable[[int], None] | None = None) -> RunResult:
    """One episode of ``agent_spec`` on ``env_id`` with env seed ``seed``.

    The agent gets the public problem and ``info`` without ``"metrics"``; the runner keeps the
    metrics for evaluation (per-slot ``regret`` when the env has an oracle).
    """
    import gymnasium as gym

    import clustergym  # noqa: F401  (registers envs)
    from clustergym.agent import make, public_info

    env = gym.make(env_id, horizon=horizon, **(env_kwargs or {}))
    agent = make(agent_spec, env_id=env_id)
    obs, info = env.reset(seed=seed)
    agent.reset(env.unwrapped.problem, seed=seed)
    rewards = np.zeros(horizon)
    regrets = np.full(horizon, np.nan)
    oracle = np.full(horizon, np.nan)
    sums: dict[str, float] = {}
    decision = np.zeros(horizon)
    t0 = time.perf_counter()
    steps = 0
    final_metrics: dict = {}
    for t in range(horizon):
        pub = public_info(info)
        d0 = time.perf_counter()
        action = agent.act(obs, pub)
        decision[t] = time.perf_counter() - d0
        next_obs, reward, terminated, truncated, info = env.step(action)
        agent.update(obs, action, reward, next_obs, public_info(info))
        rewards[t] = reward
        m = info.get("metrics", {})
        if "regret" in m:
            regrets[t] = m["regret"]
        if "oracle_reward" in m:
            oracle[t] = m["oracle_reward"]
        for k, v in m.items():
            f = _scalar(v)
            if f is not None and k not in ("regret", "cum_regret", "oracle_reward"):
                sums[k] = sums.get(k, 0.0) + f
        final_metrics = m
        obs = next_obs
        steps = t + 1
        if progress is not None and (steps % 200 == 0 or terminated or truncated):
            progress(200 if steps % 200 == 0 else steps % 200)
        if terminated or truncated:
            break
    wall = time.perf_counter() - t0
    env.close()
    rewards, regrets, oracle, decision = rewards[:steps], regrets[:steps], oracle[:steps], decision[:steps]
    has_regret = not np.all(np.isnan(regrets))
    if "episode_regret" in final_metrics:  # problems whose regret is defined at episode end only
        regret = float(final_metrics["episode_regret"])
        has_regret = True
        cum = np.full(steps, np.nan)
        cum[-1] = regret
    else:
        regret = float(np.nansum(regrets)) if has_regret else None
        cum = np.nancumsum(regrets) if has_regret else None
    metrics = {f"mean_{k}": v / max(steps, 1) for k, v in sums.items()}
    metrics.update({f"total_{k}": v for k, v in sums.items() if k in ("repaired",)})
    for k, v in final_metrics.items():
        f = _scalar(v)
        if k.startswith("episode_") and f is not None:
            metrics[k] = f
    return RunResult(
        agent=agent_spec, seed=int(seed), total_reward=float(rewards.sum()),
        mean_reward=float(rewards.mean()) if steps else 0.0,
        regret=regret, oracle_total=float(np.nansum(oracle)) if not np.all(np.isnan(oracle)) else None,
        steps=steps, wall_s=wall,
        decision_ms_median=float(np.median(decision) * 1000) if steps else 0.0,
        decision_ms_p95=float(np.percentile(decision, 95) * 1000) if steps else 0.0,
        metrics=metrics, reward=rewards, cum_regret=cum,
    )


@dataclass
class Results:
    env_id: str
    env_kwargs: dict
    horizon: int
    runs: list[RunResult]
    version: str = ""

    def summary(self) -> list[dict]:
        out = []
        for agent in dict.fromkeys(r.agent for r in self.runs):
            rs = [r for r in self.runs if r.agent == agent]
            tot = np.array([r.total_reward for r in rs])
            reg = [r.regret for r in rs if r.regret is not None]
            out.append({
                "agent": agent,
                "mean_total_reward": float(tot.mean()),
                "std_total_reward": float(tot.std(ddof=1)) if len(rs) > 1 else 0.0,
                "mean_regret": float(np.mean(reg)) if reg else None,
                "n": len(rs),
                "decision_ms_median": float(np.median([r.decision_ms_median for r in rs])),
            })
        return out

    def to_json(self) -> dict:
        return {"env_id": self.env_id, "env_kwargs": self.env_kwargs, "horizon": self.horizon,
                "version": self.version, "runs": [r.to_json() for r in self.runs], "summary": self.summary()}

    def table(self) -> str:
        """A plain-text comparison table (one row per agent)."""
        rows = self.summary()
        best = max(r["mean_total_reward"] for r in rows) if rows else 0.0
        head = f"{'agent':<28} {'total reward (mean ± std)':>28} {'vs best':>8} {'regret':>10} {'decision ms':>12}"
        lines = [head, "-" * len(head)]
        for r in sorted(rows, key=lambda r: -r["mean_total_reward"]):
            gap = (r["mean_total_reward"] - best) / abs(best) * 100 if best else 0.0
            reg = "-" if r["mean_regret"] is None else f"{r['mean_regret']:.1f}"
            lines.append(f"{r['agent']:<28} {r['mean_total_reward']:>16.1f} ± {r['std_total_reward']:<9.1f} "
                         f"{gap:>7.1f}% {reg:>10} {r['decision_ms_median']:>12.3f}")
        return "\n".join(lines)

    def write(self, out_dir: str, plots: bool = True) -> list[str]:
        """Write results.json, curves.csv and (optionally) PNG plots into ``out_dir``; return paths."""
        os.makedirs(out_dir, exist_ok=True)
        paths = [os.path.join(out_dir, "results.json"), os.path.join(out_dir, "curves.csv")]
        with open(paths[0], "w") as f:
            json.dump(self.to_json(), f, indent=1, default=_json_default)
        with open(paths[1], "w") as f:
            f.write("agent,seed,t,reward,cumulative_reward,cumulative_regret\n")
            for r in self.runs:
                cr = np.cumsum(r.reward)
                reg = r.cum_regret if r.cum_regret is not None else np.full(r.steps, np.nan)
                for t in range(r.steps):
                    f.write(f"{r.agent},{r.seed},{t + 1},{r.reward[t]:.6g},{cr[t]:.6g},"
                            f"{'' if math.isnan(reg[t]) else format(reg[t], '.6g')}\n")
        if plots:
            from clustergym.plots import plot_results

            paths += plot_results(self, out_dir)
        return paths


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _run_task(args):
    return run_one(*args)


_SHARED_POOL: dict[int, ProcessPoolExecutor] = {}


@contextlib.contextmanager
def worker_pool(workers: int):
    """Yield a pool of ``workers`` spawned processes, kept for every local ``evaluate(..., workers=workers)``
    inside the block (instead of a new pool per call), e.g. the many short sweeps of ``reproduce``.

    Runs depend only on their arguments, so results are the same with or without the shared pool;
    it saves the start-up of the worker processes (imports, compiled kernels) on every call.
    """
    import multiprocessing as mp

    if workers in _SHARED_POOL:  # an outer block already shares one
        yield _SHARED_POOL[workers]
        return
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    _SHARED_POOL[workers] = ex
    try:
        yield ex
    finally:
        del _SHARED_POOL[workers]
        ex.shutdown(wait=True, cancel_futures=True)


def _run_local(tasks: list[tuple], workers: int, bar) -> list[RunResult]:
    runs: list[RunResult | None] = [None] * len(tasks)
    if workers == 1:
        for i, task in enumerate(tasks):
            if bar is not None:
                bar.set_postfix_str(f"{task[1]} seed {task[2]}")
            runs[i] = run_one(*task, progress=bar.update if bar is not None else None)
        return runs
    with worker_pool(workers) as ex:
        futs = {ex.submit(_run_task, task): i for i, task in enumerate(tasks)}
        try:
            for fut in as_completed(futs):
                i = futs[fut]
                runs[i] = fut.result()
                if bar is not None:
                    bar.update(runs[i].steps)
        except BaseException:
            for f in futs:  # a failed run (or Ctrl-C) stops this call's pending runs
                f.cancel()
            raise
    return runs


def _import_ray():
    try:
        import ray
    except ImportError:  # a ValueError like every missing optional extra (see baselines/drl.py)
        raise ValueError("backend='ray' needs Ray: pip install 'clustergym[ray]'") from None
    return ray


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


def evaluate(env_id: str, agents: Sequence[str], seeds: Sequence[int], horizon: int,
             env_kwargs: dict | None = None, workers: int = 1, backend: str = "local",
             progress: bool = True) -> Results:
    """Run every agent on every seed (same env seed for every agent: common random numbers).

    Args:
        env_id: a registered id, e.g. ``"clustergym/MultiServerChannel-v0"``.
        agents: agent names, optionally with options: ``"esdp[only_active=true]"``.
        seeds: env seeds; each (agent, seed) run is independent.
        horizon: slots per run.
        env_kwargs: keyword arguments for ``gym.make`` (scenario parameters etc.).
        workers: parallel processes (1 = in this process). With ``backend="ray"``, the CPUs of the
            local Ray instance started for this call (unused when Ray is already initialised or
            ``RAY_ADDRESS`` is set: the cluster's own CPUs decide).
        backend: ``"local"`` (processes on this machine) or ``"ray"`` (one Ray task per (agent, seed)
            run; needs ``pip install 'clustergym[ray]'``). Uses the Ray instance this process is
            connected to (``ray.init(address=...)`` beforehand), else ``$RAY_ADDRESS``, else starts
            and afterwards shuts down a local one. The results are identical to the local backend's:
            same runs in the same order; only the timing fields (:data:`TIMING_FIELDS`) differ, as
            they do between any two runs.
        progress: show a progress bar (tqdm) over all slots of all runs.
    """
    import gymnasium as gym

    import clustergym
    from clustergym.agent import env_family, list_agents, parse_agent_spec

    env_kwargs = dict(env_kwargs or {})
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is invalid: expected one of {', '.join(map(repr, BACKENDS))}")
    if int(horizon) < 1:
        raise ValueError(f"horizon={horizon!r} is invalid: expected an integer >= 1")
    if int(workers) < 1:
        raise ValueError(f"workers={workers!r} is invalid: expected an integer >= 1")
    if not agents:
        raise ValueError("no agents given")
    if not seeds:
        raise ValueError("no seeds given")
    if backend == "ray":
        _import_ray()  # fail before any work when Ray is missing
    family = env_family(env_id)  # validates env_id
    known = list_agents(family=family)
    for a in agents:
        name, _ = parse_agent_spec(a)
        if name not in known and not name.startswith("sb3:"):
            raise ValueError(f"unknown agent {name!r} for {env_id}; available: {', '.join(known)}")
    # Fail fast on bad env kwargs and agent options, before any long run starts.
    gym.make(env_id, horizon=int(horizon), **env_kwargs).close()
    from clustergym.agent import make

    for a in agents:
        make(a, family=family)

    tasks = [(env_id, a, int(s), int(horizon), env_kwargs) for a in agents for s in seeds]
    total = len(tasks) * int(horizon)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit="slot", desc=env_id.split("/")[-1], leave=False, dynamic_ncols=True)
    try:
        if backend == "ray":
            runs = _run_ray(tasks, int(workers), bar)
        else:
            runs = _run_local(tasks, int(workers), bar)
    finally:
        if bar is not None:
            bar.close()
    return Results(env_id=env_id, env_kwargs=env_kwargs, horizon=int(horizon), runs=list(runs),
                   version=clustergym.__version__)
