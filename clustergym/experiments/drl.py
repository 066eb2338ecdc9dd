"""``clustergym drl``: the learned-scheduler benchmark on all four problems.

For every env of :data:`PLAN` and every learner of that env, the benchmark trains one model per training
seed (a *cell*) on the instance pool :data:`~clustergym.learning.instances.DEFAULT_TRAIN_INSTANCES`
(1000-1099), saves checkpoints along the way and scores each checkpoint on held-out instances (the
learning curves); then it evaluates the final models beside the paper policy, every baseline and random
through the same runner and ``results.json`` as every other comparison, on held-out instances x seeds,
and writes the table (``table.md``, ``summary.json``) and one learning-curve figure per env.

Resumable: a finished cell (its ``done.json``, written last, holds the cell's configuration) is not
trained again when its configuration is unchanged; a cell is trained in a temporary folder and renamed
into place only when it has finished, so a killed benchmark loses at most the cells it was training. The
final evaluation is re-run each time (it is cheap beside training).

Rows of the table, per env and learner (all training seeds together): the step budget, the measured
training wall time (mean per seed; behaviour cloning included), the normalised score (``results.json``'s
``score``; P3 has no bound, see :data:`PLAN`) with a 95% t-interval over instances, the relative
difference to the paper policy, to the best non-learned baseline and to random (paired over instances:
mean, 95% interval, wins/losses over instances, :func:`clustergym.stats.paired_comparison`), and the
verdict the intervals support (:func:`clustergym.stats.verdict`). The per-instance value of a learner is
the mean over its training seeds and the evaluation seeds, so the interval is over instances as for every
other agent; the per-seed scores are listed beside it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import time
from dataclasses import replace
from typing import Sequence

import numpy as np

from clustergym.agent import list_agents
from clustergym.family import env_family, family_spec
from clustergym.experiments.drl_plan import FULL_OUT, HORIZON, PLAN, QUICK, TRAIN_SEED_OFFSET, EnvPlan, Learner
from clustergym.experiments.drl_report import _Agents, _env_table, _plot_curves, ablation_table
from clustergym.learning.agent import check_norm_file, read_side_car
from clustergym.learning.hyperparams import load_hyperparams
from clustergym.learning.instances import DEFAULT_TRAIN_INSTANCES
from clustergym.learning.algos import NORM_FILE, SIDE_CAR
from clustergym.learning.training import train
from clustergym.outdir import FolderLock, check_path
from clustergym.results import RESULTS_FILE, Results, RunResult, strict_json, write_json
from clustergym.evaluation import evaluate
from clustergym.workers import run_tasks, was_interrupted
from clustergym.runstore import code_fingerprint
from clustergym.stats import fmt_ci, paired_comparison
from clustergym.ray_backend import run_tasks_ray

__all__ = ["run_benchmark", "plan_for", "plan_cells", "cell_config", "cell_state", "check_cell_files", "CellError"]


# Names the benchmark gives its own temporary entries (a cell being trained, a cell being replaced, a table being
# written): hidden and prefixed, so no user file matches them; swept only inside the benchmark's own cell folders.
STAGE = ".clustergym-drl-staging-"
OLD = ".clustergym-drl-old-"
_LEGACY = re.compile(r"seed\d+\.(tmp|old)-\d+")  # what older versions left: seed3.tmp-<pid>, seed3.old-<pid>


class CellError(ValueError):
    """A finished cell whose files are broken (one line naming the cell folder to delete)."""


def plan_for(key: str, quick: bool = False) -> EnvPlan:
    """The env's plan; with ``quick``, its :data:`QUICK` learners (main rows and the named ablation rows), held-out
    instances 0-4 at seed 0 (P3: instance = seed 0-4) and the short default-horizon check."""
    if key not in PLAN:
        raise ValueError(f"env {key!r} is not in the benchmark: expected one of {', '.join(PLAN)}")
    p = PLAN[key]
    if not quick:
        return p
    keep = tuple(lr for lr in p.learners if not lr.ablation or lr.name in QUICK["learners"])
    inst = None if p.eval_instances is None else tuple(QUICK["eval_instances"])
    seeds = tuple(QUICK["eval_seeds"]) if inst is not None else tuple(range(5))
    return replace(p, learners=keep, eval_instances=inst, eval_seeds=seeds,
                   default_horizon=QUICK["default_horizon"] if p.default_horizon else None)


def _commit() -> str:
    """The git commit of the clustergym source tree ("+dirty" when it has changes), or "unknown"."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev + ("+dirty" if dirty else "")) if rev else "unknown"


def _checkpoints(budget: int, quick: bool) -> list[int]:
    if quick:
        return [0, budget]
    return sorted({0, budget // 4, budget // 2, 3 * budget // 4, budget})


def hyperparams_entry(algo: str, env_id: str) -> dict:
    """The entry of ``env_id`` in the shipped hyperparameter file of ``algo``, as plain JSON: part of every cell's
    configuration, so editing the file retrains the cells it changes (and only those)."""
    return json.loads(json.dumps(load_hyperparams(algo, env_id), sort_keys=True, default=repr))


def cell_config(plan: EnvPlan, learner: Learner, seed: int, horizon: int, quick: bool) -> dict:
    """Everything that defines a cell: a finished cell whose recorded configuration differs is trained again."""
    cfg = learner.config(quick)
    return {"env_id": plan.env_id, "learner": cfg, "seed": int(seed), "sb3_seed": TRAIN_SEED_OFFSET + int(seed),
            "horizon": int(horizon), "pool": [DEFAULT_TRAIN_INSTANCES.start, DEFAULT_TRAIN_INSTANCES.stop - 1],
            "checkpoints": _checkpoints(cfg["budget"], quick),
            "curve": {"instances": None if plan.curve_instances is None else list(plan.curve_instances),
                      "seeds": list(plan.curve_seeds)},
            "quick": bool(quick), "hyperparams_file_entry": hyperparams_entry(learner.algo, plan.env_id)}


_DONE_FIELDS = {"config": dict, "commit": str, "train_wall_s": (int, float), "bc_wall_s": (int, float),
                "timesteps_trained": int}


def _read_json(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise CellError(f"{what} is unreadable ({type(exc).__name__})") from None


def _done_record(path: str) -> dict | None:
    """A cell's ``done.json`` (None: no such file); :class:`CellError` when it is not a finished cell's record."""
    f = os.path.join(path, "done.json")
    if not os.path.lexists(f):
        return None
    done = _read_json(f, "done.json")
    if not isinstance(done, dict):
        raise CellError(f"done.json is not a JSON object")
    for k, t in _DONE_FIELDS.items():
        if k not in done:
            raise CellError(f"done.json has no {k!r}")
        if isinstance(done[k], bool) or not isinstance(done[k], t):
            raise CellError(f"done.json's {k!r} is not a {t.__name__ if isinstance(t, type) else 'number'}")
    return done


def check_cell_files(path: str) -> None:
    """A finished cell's files load: the side-car, the model (no-pickle loader's zip check), the normalisation
    statistics (validated as the ``sb3:`` agent validates them) and the learning curve; else :class:`CellError`."""
    import zipfile

    try:
        meta = read_side_car(os.path.join(path, SIDE_CAR))  # bounded size and depth, every field checked
    except ValueError as exc:
        raise CellError(str(exc)) from None
    try:
        with zipfile.ZipFile(os.path.join(path, "model.zip")) as z:
            json.loads(z.read("data"))
            z.getinfo("policy.pth")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise CellError(f"model.zip is not a readable SB3 model ({type(exc).__name__})") from None
    if meta.get("normalize") and meta.get("norm_obs", True):
        try:
            check_norm_file(os.path.join(path, NORM_FILE))
        except (OSError, ValueError) as exc:
            raise CellError(str(exc).replace(path + os.sep, "")) from None
    curve = _read_json(os.path.join(path, "curve.json"), "curve.json")
    if not isinstance(curve, dict) or not isinstance(curve.get("points"), list) or not all(
            isinstance(p, dict) and {"steps_trained", "mean_total_reward", "wall_s"} <= set(p) for p in curve["points"]):
        raise CellError("curve.json is not a learning curve")


def cell_state(path: str, cfg: dict, out: str = "") -> str:
    """``"done"`` (finished with this configuration, files intact), ``"missing"`` or ``"stale"`` (to train);
    :class:`CellError` (one line naming the folder to delete) for a finished cell whose files are broken."""
    rel = os.path.relpath(path, out) if out else path
    try:
        done = _done_record(path)
        if done is None:
            return "missing"
        if done["config"] != cfg:
            return "stale"
        check_cell_files(path)
    except CellError as exc:
        raise CellError(f"cell {rel}: {exc}; delete the folder {path} to train it again") from None
    return "done"


def _train_cell(task, report=None) -> dict:
    """Train one (env, learner, seed) cell into a temporary folder beside it, score its checkpoints on held-out
    instances, write ``curve.json`` and ``done.json``, then rename the folder into place."""
    path, cfg, commit = task
    import warnings

    # P2's padded Box has dimensions with low == high (devices a server lacks); Gymnasium's checker says so once
    # per env, which would bury the benchmark's own lines
    warnings.filterwarnings("ignore", message=".*Box action space maximum and minimum values are equal")

    done = _staged_replace(path, lambda tmp: _train_into(tmp, cfg, commit, train))
    return {"path": path, **done}


def _train_into(tmp: str, cfg: dict, commit: str, train) -> dict:
    lrn = cfg["learner"]
    t0 = time.perf_counter()
    opts = dict(lrn["options"])
    env_kwargs = {"horizon": cfg["horizon"], **opts.pop("env_kwargs", {})}  # e.g. P3's action_mode
    meta = train(cfg["env_id"], lrn["algo"], lrn["budget"], tmp, env_kwargs=env_kwargs, seed=cfg["sb3_seed"],
                 progress=False, checkpoints=cfg["checkpoints"], curve_references=False, **opts)  # its own references
    train_total = time.perf_counter() - t0
    # Learning curve: every checkpoint on the held-out curve instances (runner, one process).
    ck = {n: os.path.join(tmp, "checkpoints", str(n)) for n in cfg["checkpoints"]}
    agents = [f"sb3:{d}/model.zip" for d in ck.values()]
    res = evaluate(cfg["env_id"], agents, cfg["curve"]["seeds"], cfg["horizon"],
                   instances=cfg["curve"]["instances"], workers=1, progress=False, score=False)
    bc_wall = float((meta.get("warm_start") or {}).get("bc_wall_s", 0.0) or 0.0)  # demonstrations + fit
    points = []
    for (n, d), a in zip(ck.items(), agents):
        side = read_side_car(os.path.join(d, SIDE_CAR))
        per = res.per_instance(a)
        points.append({"steps": int(n), "steps_trained": int(side["timesteps_trained"]),
                       "wall_s": bc_wall + float(side["train_wall_s"]),
                       "mean_total_reward": float(np.mean(list(per.values()))),
                       "per_instance": {str(k): v for k, v in per.items()}})
    with open(os.path.join(tmp, "curve.json"), "w") as f:
        json.dump({"points": points, "curve": cfg["curve"], "horizon": cfg["horizon"]}, f, indent=1)
    for d in ck.values():  # the curve is kept; the checkpoint models are not (the final model is model.zip)
        shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(os.path.join(tmp, "checkpoints"), ignore_errors=True)
    done = {"config": cfg, "commit": commit, "train_wall_s": float(meta["train_wall_s"]), "bc_wall_s": bc_wall,
            "timesteps_trained": int(meta.get("timesteps_trained", lrn["budget"])),
            "cell_wall_s": time.perf_counter() - t0, "train_call_s": train_total,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    with open(os.path.join(tmp, "done.json"), "w") as f:
        json.dump(done, f, indent=1)
    return done


def _cell_dirs(out: str, plans: Sequence[EnvPlan]) -> list[str]:
    return [os.path.join(out, p.key, lr.name) for p in plans for lr in p.learners]


def _sweep(out: str, plans: Sequence[EnvPlan] | None = None) -> None:
    """Remove what a killed benchmark left half-written: only entries the benchmark names itself
    (:data:`STAGE`, :data:`OLD`; older versions' ``seed<k>.tmp-<pid>``), only directly inside its own cell
    folders ``<out>/<env>/<learner>/`` and ``<out>`` itself, and only under the folder's lock."""
    plans = list(PLAN.values()) if plans is None else plans
    for d in [out, *_cell_dirs(out, plans)]:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if n.startswith((STAGE, OLD)) or (d != out and _LEGACY.fullmatch(n)):
                full = os.path.join(d, n)
                if os.path.isdir(full) and not os.path.islink(full):
                    shutil.rmtree(full, ignore_errors=True)
                else:
                    try:
                        os.remove(full)
                    except OSError:
                        pass


def _atomic_json_or_text(path: str, text: str) -> None:
    """Write ``path`` whole or not at all (a staged file renamed over it; the folder's lock is held)."""
    tmp = os.path.join(os.path.dirname(path) or ".", STAGE + os.path.basename(path))
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def _mode_of(out: str, cells: dict) -> bool | None:
    """Whether ``out`` holds the quick benchmark (True), the full one (False) or nothing yet (None): from its
    ``summary.json`` and the records of its cells (older records without ``quick``: by their horizon)."""
    try:
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
            summ = json.load(f)
        if isinstance(summ, dict) and isinstance(summ.get("quick"), bool):
            return summ["quick"]
    except (OSError, ValueError):
        pass
    for path in cells.values():
        try:
            with open(os.path.join(path, "done.json"), encoding="utf-8") as f:
                cfg = json.load(f).get("config", {})
            return bool(cfg["quick"]) if "quick" in cfg else int(cfg["horizon"]) == QUICK["horizon"]
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            continue
    return None


def plan_cells(out: str, envs: Sequence[str] | None = None, *, quick: bool = False, seeds: Sequence[int] | None = None,
               learners: Sequence[str] | None = None) -> dict:
    """Validate the arguments and every cell already in ``out`` (nothing is written): the plans, the cells
    (``(env, learner, seed) -> path``), the configurations and what is to be trained.

    A ValueError (one line) for an unknown env or learner, a folder holding the other mode's benchmark (a quick
    run would retrain the full cells at tiny budgets, and the reverse) and a finished cell whose files are
    broken (:class:`CellError`, naming the folder to delete)."""
    envs = list(envs or (QUICK["envs"] if quick else PLAN))
    plans = [plan_for(k, quick) for k in envs]
    seeds = [int(s) for s in (seeds if seeds is not None else (QUICK["seeds"] if quick else (0, 1, 2)))]
    if not seeds or min(seeds) < 0:
        raise ValueError("seeds: expected integers >= 0")
    horizon = QUICK["horizon"] if quick else HORIZON
    known = {lr.name for p in plans for lr in p.learners}
    for name in learners or ():
        if name not in known:
            raise ValueError(f"learner {name!r} is not in the benchmark of {', '.join(envs)}: expected one of "
                             f"{', '.join(sorted(known))}")
    cells, configs, todo, stale = {}, {}, [], []
    for p in plans:
        for lr in p.learners:
            if learners and lr.name not in learners:
                continue
            for s in seeds:
                path = os.path.join(out, p.key, lr.name, f"seed{s}")
                cells[(p.key, lr.name, s)] = path
                configs[(p.key, lr.name, s)] = cell_config(p, lr, s, horizon, quick)
    mode = _mode_of(out, {k: os.path.join(out, k[0], k[1], f"seed{k[2]}") for k in
                          [(p.key, lr.name, s) for p in PLAN.values() for lr in p.learners for s in range(10)]})
    if mode is not None and mode != quick:
        held, this = ("the quick benchmark", "the full") if mode else ("the full benchmark", "a --quick")
        raise ValueError(f"--out {out!r} holds {held}'s cells; {this} run there would retrain and replace them: "
                         f"choose another --out (defaults: {FULL_OUT} for the full benchmark, {QUICK['out']} for "
                         "--quick)")
    for key, path in cells.items():
        state = cell_state(path, configs[key], out)
        if state != "done":
            todo.append(key)
            if state == "stale":
                stale.append(key)
    return {"envs": envs, "plans": plans, "seeds": seeds, "horizon": horizon, "cells": cells, "configs": configs,
            "todo": todo, "stale": stale}


BACKENDS = ("local", "ray")  # where the cells train (run_benchmark's backend)

# Bytes a cell writes at most while it trains (model, statistics and 5 checkpoints of P2's largest model) and the
# largest single file: the free-space and file-size-limit (ulimit -f) checks before any training.
CELL_BYTES, CELL_FILE_BYTES = 60e6, 12e6


def run_benchmark(out: str, envs: Sequence[str] | None = None, *, quick: bool = False, seeds: Sequence[int] | None = None,
                  workers: int = 2, progress: bool = True, figures: str | None = None, learners: Sequence[str] | None = None,
                  log=print, lock: bool = True, backend: str = "local") -> dict:
    """Train what is not trained yet, evaluate, write ``out/table.md``, ``out/summary.json`` and the figures.

    Everything is validated first (:func:`plan_cells`); the benchmark holds ``out``'s lock (the one
    ``clustergym run`` and ``train`` take: :class:`clustergym.outdir.FolderLock`) and writes only its cell
    folders ``out/<env>/<learner>/seed<k>``, ``out/<env>/eval``, the table, the summary and the figures.

    Args:
        envs: keys of :data:`PLAN` (default: all four; ``--quick``: P4 only).
        seeds: training seeds (default 0, 1, 2; ``--quick``: 0, 1).
        learners: only these learner names (default: every learner of each env).
        figures: also copy the learning-curve figures there (``docs/figures``).
        lock: take ``out``'s lock (False: the caller holds it).
        backend: where the cells train: ``"local"`` (``workers`` processes on this machine) or ``"ray"`` (one Ray
            task per cell, :func:`clustergym.ray_backend.run_tasks_ray`: the Ray instance this process is connected
            to, else ``$RAY_ADDRESS``, else a local one with ``workers`` CPUs). The cells are the same resumable
            folders either way; on a cluster, ``out`` must be on a file system every node sees.
    """
    import contextlib

    check_path(out)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers={workers!r} is invalid: expected an integer >= 1")
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is invalid: expected one of {', '.join(BACKENDS)}")
    plan = plan_cells(out, envs, quick=quick, seeds=seeds, learners=learners)  # validates before the lock
    with (FolderLock(out, need_total=CELL_BYTES * len(plan["todo"]) + 20e6, need_file=CELL_FILE_BYTES)
          if lock else contextlib.nullcontext()):
        plan = plan_cells(out, envs, quick=quick, seeds=seeds, learners=learners)  # again: under the lock
        return _run_planned(out, plan, quick=quick, workers=workers, progress=progress, figures=figures,
                            learners=learners, log=log, backend=backend)


def _code_fingerprint() -> str:
    """The non-learned agents' runs in the evaluation cache are reused only while the sources they depend on are
    unchanged (:func:`clustergym.runstore.code_fingerprint`)."""
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
                     progress: bool, log) -> "object":
    """``evaluate`` with the runs of unchanged agents reused from ``folder/runs_cache.json`` (same design: instances,
    seeds, horizon): adding a learner or retraining a cell evaluates only those agents. Delete the folder to
    evaluate everything again."""
    code = _code_fingerprint()
    design = json.dumps({"env_id": env_id, "horizon": int(horizon), "seeds": [int(x) for x in seeds],
                         "instances": None if instances is None else [int(x) for x in instances]}, sort_keys=True)
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
        new = evaluate(env_id, todo, seeds, horizon, instances=instances, workers=workers, progress=progress)
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


def _trained_at(p, rows, horizon: int) -> str:
    """"the models trained at 200" or, where a row trained on other episodes, "... (row-h2000 at 2000)"."""
    other = {lr.name: int(lr.options.get("env_kwargs", {}).get("horizon", horizon))
             for lr in p.learners if lr.name in rows}
    other = {k: v for k, v in other.items() if v != horizon}
    text = f"the models trained at {horizon}"
    return text + (" (" + ", ".join(f"{k} at {v}" for k, v in other.items()) + ")" if other else "")


def _run_planned(out, plan, *, quick, workers, progress, figures, learners, log, backend="local") -> dict:
    import warnings

    warnings.filterwarnings("ignore", message=".*Box action space maximum and minimum values are equal")  # P2, per env
    envs, plans, seeds, horizon, cells = plan["envs"], plan["plans"], plan["seeds"], plan["horizon"], plan["cells"]
    _sweep(out, plans)
    commit = _commit()
    t_start = time.perf_counter()
    todo = [(cells[k], plan["configs"][k], commit) for k in plan["todo"]]
    log(f"drl: {len(cells)} cells ({len(cells) - len(todo)} already trained, {len(todo)} to train"
        + (f", {len(plan['stale'])} of them because their configuration changed" if plan["stale"] else "")
        + f") on {', '.join(envs)}; {len(seeds)} training seeds; horizon {horizon}; {workers} worker(s)")
    bar = None
    if progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="drl cells", unit="cell")

    finished = []

    def done(result):
        finished.append(result["path"])
        if bar is not None:
            bar.update(1)
        rel = os.path.relpath(result["path"], out)
        msg = (f"trained {rel}: {result['timesteps_trained']:,} steps in {result['train_wall_s']:.0f} s"
               + (f" (+ behaviour cloning {result['bc_wall_s']:.0f} s)" if result["bc_wall_s"] else ""))
        (bar.write if bar is not None else log)(msg)

    try:
        # Big cells first, so the two workers finish together.
        order = sorted(todo, key=lambda t: -t[1]["learner"]["budget"] * (5 if t[1]["env_id"].endswith("RingAllReduce-v0")
                                                                        else 1))
        if backend == "ray" and order:
            run_tasks_ray(_train_cell, order, max(1, int(workers)), on_done=done)
        else:
            run_tasks(_train_cell, order, max(1, min(int(workers), len(order) or 1)), on_done=done)
    except KeyboardInterrupt as exc:
        if was_interrupted(exc):
            raise KeyboardInterrupt(f"interrupted after {len(finished)} of {len(todo)} cells; the finished cells are "
                                    "kept (the next drl reuses them), the cells in training were discarded") from None
        raise
    finally:
        if bar is not None:
            bar.close()
    train_elapsed = time.perf_counter() - t_start
    summary = {"commit": commit, "horizon": horizon, "training_seeds": seeds, "quick": quick, "envs": {}}
    md = [f"Command: `clustergym drl{' --quick' if quick else ''}{'' if envs == list(PLAN) else ' --envs ' + ','.join(envs)}`"
          f"; evaluated at commit {commit}; horizon {horizon}; training pool instances 1000-1099; training seeds "
          f"{', '.join(map(str, seeds))}.", ""]
    fig_paths = []
    for p in plans:
        paper = family_spec(env_family(p.env_id)).paper_agent
        learner_cells, curves, metas = {}, {}, {}
        for lr in p.learners:
            if learners and lr.name not in learners:
                continue
            paths = [cells[(p.key, lr.name, s)] for s in seeds]
            dones = [json.load(open(os.path.join(d, "done.json"))) for d in paths]
            learner_cells[lr.name] = [f"sb3:{d}/model.zip" for d in paths]
            curves[lr.name] = [json.load(open(os.path.join(d, "curve.json")))["points"] for d in paths]
            metas[lr.name] = {"budget": int(np.mean([d["timesteps_trained"] for d in dones])), "algo": lr.algo, "options": lr.options,
                              "note": lr.note, "train_wall_s": float(np.mean([d["train_wall_s"] for d in dones])),
                              "bc_wall_s": float(np.mean([d["bc_wall_s"] for d in dones])),
                              "commits": sorted({d["commit"] for d in dones})}
        others = [a for a in list_agents(p.env_id) if a not in (paper,)]
        agents = [a for v in learner_cells.values() for a in v] + [paper] + others
        log(f"drl: evaluating {p.key} ({len(agents)} agents on "
            + (f"instances {list(p.eval_instances)} x seeds {list(p.eval_seeds)}" if p.eval_instances is not None
               else f"instances = seeds {p.eval_seeds[0]}-{p.eval_seeds[-1]}") + f", {horizon} slots)")
        res = _evaluate_cached(os.path.join(out, p.key, "eval"), p.env_id, agents, list(p.eval_seeds), horizon,
                               p.eval_instances, workers=workers, progress=progress, log=log)
        _write_results(res, os.path.join(out, p.key, "eval"))
        learned = {a for v in learner_cells.values() for a in v}
        for r in res.runs:
            if r.agent in learned and r.trained_on:
                raise RuntimeError(f"{r.agent} was evaluated on instance {r.instance}, one it trained on")
        # Reference lines of the curves: the same agents on the curve's (validation) runs.
        curve_refs = _evaluate_cached(os.path.join(out, p.key, "eval-curve"), p.env_id, [paper, *others],
                                      list(p.curve_seeds), horizon, p.curve_instances, workers=workers,
                                      progress=False, log=log)

        def on_curve(agent):
            v = [r.total_reward for r in curve_refs.runs if r.agent == agent]
            return float(np.mean(v)) if v else math.nan

        rand_curve = on_curve("random")
        for name, seeds_pts in curves.items():  # the first checkpoint whose seed-mean beats random on the curve runs
            mean = np.mean([[pt["mean_total_reward"] for pt in s] for s in seeds_pts], axis=0)
            steps = np.mean([[pt["steps_trained"] for pt in s] for s in seeds_pts], axis=0)
            above = [int(st) for st, m in zip(steps, mean) if m > rand_curve]
            metas[name]["beats_random_from"] = above[0] if above else None
            metas[name]["validation_total"] = float(mean[-1])  # the final models on the curve's validation runs
            first, last = ({k: float(np.mean([s[j]["per_instance"][k] for s in seeds_pts]))
                            for k in seeds_pts[0][j]["per_instance"]} for j in (0, -1))
            c = paired_comparison(last, first, agent=f"{name} trained", reference=f"{name} untrained")
            metas[name]["after_vs_before"] = {"mean": c.mean, "low": c.low, "high": c.high, "wins": c.wins,
                                              "losses": c.losses, "text": f"{fmt_ci(c)} {c.wins}/{c.losses}"}
        main = {lr.name for lr in p.main_rows() if lr.name in learner_cells}
        main_cells = {k: _Agents(v, metas[k]) for k, v in learner_cells.items() if k in main}
        rows, table = _env_table(p, res, main_cells, paper)
        best = next((r["learner"] for r in rows if not r["learned"] and r["learner"] not in (paper, "random")), None)
        abl_rows, abl_table = ablation_table(p, res, {k: _Agents(v, metas[k]) for k, v in learner_cells.items()},
                                             paper)
        refs = {f"{a} (validation)": on_curve(a) for a in dict.fromkeys([paper, best, "random"]) if a}
        shown = {lr.name for lr in p.learners if lr.ablation in ("", "budget")}  # the other ablations: the table
        fig = _plot_curves(p, {k: v for k, v in curves.items() if k in shown}, refs,
                           os.path.join(out, f"drl_{p.key}_curves.png"), horizon)
        fig_paths.append(fig)
        if figures:
            os.makedirs(figures, exist_ok=True)
            shutil.copy(fig, os.path.join(figures, os.path.basename(fig)))
        design = (f"held-out instances {', '.join(map(str, p.eval_instances))} x seeds "
                  f"{', '.join(map(str, p.eval_seeds))}" if p.eval_instances is not None else
                  f"{len(p.eval_seeds)} held-out instances, instance = seed {p.eval_seeds[0]}-{p.eval_seeds[-1]}")
        curve_design = (f"validation instances {', '.join(map(str, p.curve_instances))} at seed "
                        f"{', '.join(map(str, p.curve_seeds))}" if p.curve_instances is not None else
                        f"validation instance = seed {p.curve_seeds[0]}-{p.curve_seeds[-1]}")
        md += [f"### {p.key.upper()} {p.env_id}", "", f"Evaluated on {design}, {horizon} slots (runner, results.json "
               f"in `{os.path.join(p.key, 'eval')}`); learning curves on {curve_design}: `{os.path.basename(fig)}`."
               + (f" {p.note}" if p.note else ""), "", table, ""]
        env_summary = {"env_id": p.env_id, "paper": paper, "rows": rows, "figure": os.path.basename(fig),
                       "eval": {"instances": p.eval_instances, "seeds": list(p.eval_seeds), "horizon": horizon},
                       "ablation": abl_rows}
        if abl_rows:
            md += [f"Ablation ({horizon} slots, the same held-out runs): each row changes one thing of its base "
                   "row; \"vs base\" is the paired relative difference over instances.", "", abl_table, ""]
        if p.default_horizon and main_cells:
            dh = int(p.default_horizon)
            ref_agents = list(dict.fromkeys([paper, *([best] if best else []), "random"]))
            dagents = [a for v in main_cells.values() for a in v] + ref_agents
            log(f"drl: evaluating {p.key} at the env's default horizon ({len(dagents)} agents, {dh} slots)")
            dres = _evaluate_cached(os.path.join(out, p.key, f"eval-h{dh}"), p.env_id, dagents, list(p.eval_seeds), dh,
                                    p.eval_instances, workers=workers, progress=progress, log=log)
            _write_results(dres, os.path.join(out, p.key, f"eval-h{dh}"))
            drows, dtable = _env_table(p, dres, main_cells, paper, best=best)
            md += [f"At the env's default horizon, {dh} slots ({_trained_at(p, main_cells, horizon)}; the same held-out "
                   f"instances and seeds; results.json in `{os.path.join(p.key, f'eval-h{dh}')}`):", "", dtable, ""]
            env_summary["default_horizon"] = {"horizon": dh, "rows": drows}
            if len(main_cells) > 1:  # what --export-pretrained chooses by: validation runs at the default horizon
                vres = _evaluate_cached(os.path.join(out, p.key, f"eval-curve-h{dh}"), p.env_id,
                                        [a for v in main_cells.values() for a in v], list(p.curve_seeds), dh,
                                        p.curve_instances, workers=workers, progress=False, log=log)
                env_summary["default_horizon"]["validation_totals"] = {
                    k: float(np.mean([r.total_reward for r in vres.runs if r.agent in set(v)]))
                    for k, v in main_cells.items()}
        summary["envs"][p.key] = env_summary
    summary["wall_s"] = time.perf_counter() - t_start
    summary["train_elapsed_s"] = train_elapsed
    md.append(f"Total wall time of this invocation: {summary['wall_s'] / 60:.1f} min ({len(todo)} cells trained; "
              f"{len(cells) - len(todo)} reused).")
    _atomic_json_or_text(os.path.join(out, "table.md"), "\n".join(md) + "\n")
    _atomic_json_or_text(os.path.join(out, "summary.json"), json.dumps(summary, indent=1, default=lambda o: None))
    log("\n".join(md))
    log(f"wrote {os.path.join(out, 'table.md')}, {os.path.join(out, 'summary.json')}, {', '.join(fig_paths)}")
    return summary


def _staged_replace(path: str, write):
    """``write(stage)`` into a staging folder beside ``path`` (named with :data:`STAGE`, removed on any failure),
    then swap it in: the earlier ``path`` is moved aside (:data:`OLD`) and removed only after the swap. Returns
    what ``write`` returns."""
    parent, base = os.path.split(path)
    os.makedirs(parent or ".", exist_ok=True)
    stage = os.path.join(parent, f"{STAGE}{base}-{os.getpid()}")
    shutil.rmtree(stage, ignore_errors=True)
    try:
        result = write(stage)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = os.path.join(parent, f"{OLD}{base}-{os.getpid()}")
    if os.path.lexists(path):
        os.replace(path, old)
    os.replace(stage, path)
    shutil.rmtree(old, ignore_errors=True)
    return result
