"""The evaluation runs of ``clustergym drl``, cached: each agent's runs are kept in ``runs_cache.json`` beside the
``results.json`` they make, keyed by the design (env, instances, seeds, horizon) and by the agent's fingerprint (a
cell's ``done.json``, else the package's sources), so adding a learner or retraining a cell evaluates only those
agents."""

from __future__ import annotations

import hashlib
import json
import os

from clustergym.runner.evaluation import evaluate
from clustergym.experiments.drl_cells import _atomic_json_or_text
from clustergym.runner.results import RESULTS_FILE, Results, RunResult, strict_json, write_json
from clustergym.runner.runstore import code_fingerprint


def _code_fingerprint() -> str:
    """The non-learned agents' runs in the evaluation cache are reused only while the sources they depend on are
    unchanged (:func:`clustergym.runner.runstore.code_fingerprint`)."""
    return code_fingerprint()


def _agent_fingerprint(agent: str, code: str) -> str:
    """An ``sb3:`` cell's model is identified by its ``done.json`` (written once per training); every other agent
    by the package's sources."""
    if agent.startswith("sb3:"):
        done = os.path.join(os.path.dirname(agent[4:]), "done.json")
        with open(done, "rb") as f:
            return "cell-" + hashlib.sha256(f.read()).hexdigest()[:16]
    return "code-" + code


def _evaluate_cached(folder: str, env_id: str, agents: list, seeds: list, horizon: int, instances, *, workers: int,
                     progress: bool, log, env_kwargs: dict | None = None) -> "object":
    """``evaluate`` with the runs of unchanged agents reused from ``folder/runs_cache.json`` (same design: instances,
    seeds, horizon, the env's settings ``env_kwargs``): adding a learner or retraining a cell evaluates only those
    agents. Delete the folder to evaluate everything again."""
    code = _code_fingerprint()
    design = json.dumps({"env_id": env_id, "horizon": int(horizon), "seeds": [int(x) for x in seeds],
                         "instances": None if instances is None else [int(x) for x in instances],
                         **({"env_kwargs": env_kwargs} if env_kwargs else {})}, sort_keys=True)
    path = os.path.join(folder, "runs_cache.json")
    try:
        with open(path, encoding="utf-8") as f:
            cache = json.load(f)
        if cache.get("design") != design:
            cache = None
    except (OSError, ValueError):
        cache = None
    cache = cache or {"design": design, "agents": {}}
    fps = {a: _agent_fingerprint(a, code) for a in agents}
    # a cell is keyed by its place inside the benchmark folder (``folder``'s grandparent), so a benchmark folder
    # that is moved or merged with another keeps its cache
    root = os.path.dirname(os.path.dirname(os.path.abspath(folder)))

    def key(a: str) -> str:
        return "sb3:<out>/" + os.path.relpath(os.path.abspath(a[4:]), root) if a.startswith("sb3:") else a

    have = {a for a in agents if cache["agents"].get(key(a), {}).get("fingerprint") == fps[a]}
    todo = [a for a in agents if a not in have]
    if "random" in todo or ("random" not in agents):  # scores are relative to random's runs: redo them together
        todo = list(agents)
    if have and todo != list(agents):
        log(f"drl: {len(have)} of {len(agents)} agents' runs reused from {path}")
    if todo:
        new = evaluate(env_id, todo, seeds, horizon, env_kwargs=env_kwargs or None, instances=instances, workers=workers,
                       progress=progress)
        header = {"env_id": new.env_id, "env_kwargs": new.env_kwargs, "horizon": new.horizon, "version": new.version,
                  "instance_axis": new.instance_axis}
        for a in todo:
            cache["agents"][key(a)] = {"fingerprint": fps[a], "runs": [r.to_json() for r in new.runs if r.agent == a]}
        cache["header"] = header
        os.makedirs(folder, exist_ok=True)
        _atomic_json_or_text(path, json.dumps(cache))
    h = cache["header"]
    runs = [RunResult(**{**d, "agent": a}) for a in agents for d in cache["agents"][key(a)]["runs"]]
    return Results(h["env_id"], h["env_kwargs"], h["horizon"], runs, version=h["version"],
                   instance_axis=h["instance_axis"])


def _write_results(res, folder: str) -> None:
    """``folder/results.json`` (the runner's format; runs from the cache have no per-slot curves to write)."""
    data, bad = strict_json(res.to_json())
    if bad:
        data["non_finite"] = f"{len(bad)} value(s) were NaN or infinite and are written as null: " + ", ".join(bad[:20])
    write_json(os.path.join(folder, RESULTS_FILE), data, indent=1)
