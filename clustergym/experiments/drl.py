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
mean, 95% interval, wins/losses over instances, :func:`clustergym.core.stats.paired_comparison`), and the
verdict the intervals support (:func:`clustergym.core.stats.verdict`). The per-instance value of a learner is
the mean over its training seeds and the evaluation seeds, so the interval is over instances as for every
other agent; the per-seed scores are listed beside it.

Beside this module: the plan (:mod:`~clustergym.experiments.drl_plan`), the cells on disk
(:mod:`~clustergym.experiments.drl_cells`), the cached evaluation runs (:mod:`~clustergym.experiments.drl_cache`),
the tables and figures (:mod:`~clustergym.experiments.drl_report`) and shipping the best model
(:mod:`~clustergym.experiments.drl_export`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from dataclasses import replace
from typing import Sequence

import numpy as np

from clustergym.core.family import env_family, family_spec
from clustergym.runner.evaluation import evaluate
from clustergym.experiments.drl_cache import _evaluate_cached, _write_results
from clustergym.experiments.drl_cells import _atomic_json_or_text, _staged_replace, _sweep, cell_config, cell_state
from clustergym.experiments.drl_plan import FULL_OUT, HORIZON, PLAN, QUICK, EnvPlan
from clustergym.experiments.drl_report import (_Agents, _env_table, _gap_text, _plot_curves, ablation_table,
                                               episode_bounds, gap_table, reference_table, with_best_row)
from clustergym.learning.algos import SIDE_CAR
from clustergym.learning.sidecar import read_side_car
from clustergym.learning.training import TrainConfig, train
from clustergym.core.outdir import FolderLock, check_path
from clustergym.runner.results import Results
from clustergym.core.stats import fmt_ci, paired_comparison
from clustergym.runner.ray_backend import run_tasks_ray
from clustergym.runner.workers import run_tasks, was_interrupted

__all__ = ["run_benchmark", "plan_for", "plan_cells"]


def plan_for(key: str, quick: bool = False) -> EnvPlan:
    """The env's plan; with ``quick``, its :data:`QUICK` learners (main rows and the named ablation rows), held-out
    instances 0-4 at seed 0 (P3: instance = seed 0-4) and the short default-horizon check."""
    if key not in PLAN:
        raise ValueError(f"env {key!r} is not in the benchmark: expected one of {', '.join(PLAN)}")
    p = PLAN[key]
    if not quick:
        return p
    keep = tuple(lr for lr in p.learners if not lr.ablation or lr.name in QUICK["learners"])
    # the first of its evaluation instances: held-out 0-4, or a validation plan's own
    inst = None if p.eval_instances is None else tuple(p.eval_instances[:len(QUICK["eval_instances"])])
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
    # the plan's settings (a named scenario), then the learner's own (e.g. P3's action_mode)
    env_kwargs = {"horizon": cfg["horizon"], **cfg.get("env_kwargs", {}), **opts.pop("env_kwargs", {})}
    config = TrainConfig(cfg["env_id"], lrn["algo"], lrn["budget"], env_kwargs=env_kwargs, seed=cfg["sb3_seed"],
                         checkpoints=cfg["checkpoints"], curve_references=False, **opts)  # its own references
    meta = train(config, tmp, progress=False)
    train_total = time.perf_counter() - t0
    # Learning curve: every checkpoint on the held-out curve instances (runner, one process).
    ck = {n: os.path.join(tmp, "checkpoints", str(n)) for n in cfg["checkpoints"]}
    agents = [f"sb3:{d}/model.zip" for d in ck.values()]
    res = evaluate(cfg["env_id"], agents, cfg["curve"]["seeds"], cfg["horizon"], env_kwargs=cfg.get("env_kwargs"),
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
    broken (:class:`~clustergym.experiments.drl_cells.CellError`, naming the folder to delete)."""
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
    ``clustergym run`` and ``train`` take: :class:`clustergym.core.outdir.FolderLock`) and writes only its cell
    folders ``out/<env>/<learner>/seed<k>``, ``out/<env>/eval``, the table, the summary and the figures.

    Args:
        envs: keys of :data:`PLAN` (default: all four; ``--quick``: P4 only).
        seeds: training seeds (default 0, 1, 2; ``--quick``: 0, 1).
        learners: only these learner names (default: every learner of each env).
        figures: also copy the learning-curve figures there (``docs/figures``).
        lock: take ``out``'s lock (False: the caller holds it).
        backend: where the cells train: ``"local"`` (``workers`` processes on this machine) or ``"ray"`` (one Ray
            task per cell, :func:`clustergym.runner.ray_backend.run_tasks_ray`: the Ray instance this process is connected
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


def _trained_at(p, rows, horizon: int) -> str:
    """"the models trained at 200" or, where a row trained on other episodes, "... (row-h2000 at 2000)"."""
    other = {lr.name: int(lr.options.get("env_kwargs", {}).get("horizon", horizon))
             for lr in p.learners if lr.name in rows}
    other = {k: v for k, v in other.items() if v != horizon}
    text = f"the models trained at {horizon}"
    return text + (" (" + ", ".join(f"{k} at {v}" for k, v in other.items()) + ")" if other else "")


def _run_planned(out, plan, *, quick, workers, progress, figures, learners, log, backend="local") -> dict:
    """Train the plan's cells that are not done, evaluate every env (:func:`_env_report`) and write the table, the
    summary and the figures."""
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
    _train_cells(out, todo, workers=workers, progress=progress, log=log, backend=backend)
    train_elapsed = time.perf_counter() - t_start
    summary = {"commit": commit, "horizon": horizon, "training_seeds": seeds, "quick": quick, "envs": {}}
    md = [f"Command: `clustergym drl{' --quick' if quick else ''}{'' if envs == list(PLAN) else ' --envs ' + ','.join(envs)}`"
          f"; evaluated at commit {commit}; horizon {horizon}; training pool instances 1000-1099; training seeds "
          f"{', '.join(map(str, seeds))}.", ""]
    fig_paths = []
    for p in plans:
        env_md, summary["envs"][p.key], fig = _env_report(out, p, cells, seeds, horizon, learners=learners,
                                                          workers=workers, progress=progress, figures=figures, log=log)
        md += env_md
        fig_paths.append(fig)
    summary["wall_s"] = time.perf_counter() - t_start
    summary["train_elapsed_s"] = train_elapsed
    md.append(f"Total wall time of this invocation: {summary['wall_s'] / 60:.1f} min ({len(todo)} cells trained; "
              f"{len(cells) - len(todo)} reused).")
    _atomic_json_or_text(os.path.join(out, "table.md"), "\n".join(md) + "\n")
    _atomic_json_or_text(os.path.join(out, "summary.json"), json.dumps(summary, indent=1, default=lambda o: None))
    log("\n".join(md))
    log(f"wrote {os.path.join(out, 'table.md')}, {os.path.join(out, 'summary.json')}, {', '.join(fig_paths)}")
    return summary


def _train_cells(out: str, todo: list, *, workers: int, progress: bool, log, backend: str) -> None:
    """Train the cells of ``todo`` (``(path, config, commit)`` tasks), the big ones first so the workers finish
    together, on local worker processes or Ray tasks; one line per finished cell, and on Ctrl-C one line saying
    what is kept."""
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


def _env_report(out, p, cells, seeds, horizon, *, learners, workers, progress, figures, log) -> tuple[list, dict, str]:
    """One env's part of the benchmark: its final models evaluated beside the paper policy, every baseline and random
    (:func:`_evaluate_held_out`), the statistics of the learning curves, the table and the ablation table, the
    curve figure and, where the plan asks, the main rows again at the env's default horizon. Returns (markdown
    lines, the env's entry of ``summary.json``, the figure's path)."""
    spec = family_spec(env_family(p.env_id))
    paper = spec.paper_agent
    learner_cells, curves, metas = _learner_cells(p, cells, seeds, learners)
    others = [a for a in p.references() if a != paper]
    res = _evaluate_held_out(out, p, learner_cells, [paper, *others], horizon, workers=workers, progress=progress,
                             log=log)
    # Reference lines of the curves: the same agents on the curve's (validation) runs.
    curve_refs = _evaluate_cached(os.path.join(out, p.key, "eval-curve"), p.env_id, [paper, *others],
                                  list(p.curve_seeds), horizon, p.curve_instances, workers=workers, progress=False,
                                  log=log, env_kwargs=p.env_kwargs)
    _curve_stats(curves, metas, _mean_total(curve_refs, "random"))
    main = {lr.name for lr in p.main_rows() if lr.name in learner_cells}
    main_cells = {k: _Agents(v, metas[k]) for k, v in learner_cells.items() if k in main}
    rows, table = _env_table(p, res, main_cells, paper)
    best = next((r["learner"] for r in rows if not r["learned"] and r["learner"] not in (paper, "random")), None)
    all_cells = {k: _Agents(v, metas[k]) for k, v in learner_cells.items()}
    abl_rows, abl_table = ablation_table(p, res, all_cells, paper)
    refs = {f"{a} (validation)": _mean_total(curve_refs, a) for a in dict.fromkeys([paper, best, "random"]) if a}
    fig = _curve_figure(out, p, curves, refs, horizon, figures)
    md = _env_text(p, horizon, fig, table)
    gap_rows, gap_md = gap_table(res, all_cells, paper, best, episode_bounds(p, res, horizon))  # every row
    md += [_gap_text(p), "", gap_md, ""] if gap_md else []
    vs_all, vs_all_md = reference_table(res, with_best_row(res, main_cells, all_cells))
    md += [_REFS_TEXT, "", vs_all_md, ""] if vs_all_md else []
    env_summary = {"env_id": p.env_id, "paper": paper, "rows": rows, "figure": os.path.basename(fig),
                   "eval": {"instances": p.eval_instances, "seeds": list(p.eval_seeds), "horizon": horizon},
                   "ablation": abl_rows, "gap": gap_rows, "vs_every_reference": vs_all}
    if abl_rows:
        md += [f"Ablation ({horizon} slots, the same {p.eval_role()} runs): each row changes one thing of its base "
               "row; \"vs base\" is the paired relative difference over instances.", "", abl_table, ""]
    if p.default_horizon and main_cells:
        dmd, env_summary["default_horizon"] = _default_horizon(out, p, main_cells, paper, best, horizon,
                                                               workers=workers, progress=progress, log=log)
        md += dmd
    return md, env_summary, fig


def _learner_cells(p, cells, seeds, learners) -> tuple[dict, dict, dict]:
    """Per learner of ``p`` (only ``learners``, if given): its models as ``sb3:`` agents (one per training seed), the
    points of their learning curves and what the table says of them (budget, wall times, commits)."""
    learner_cells, curves, metas = {}, {}, {}
    for lr in p.learners:
        if learners and lr.name not in learners:
            continue
        paths = [cells[(p.key, lr.name, s)] for s in seeds]
        dones = [json.load(open(os.path.join(d, "done.json"))) for d in paths]
        learner_cells[lr.name] = [f"sb3:{d}/model.zip" for d in paths]
        curves[lr.name] = [json.load(open(os.path.join(d, "curve.json")))["points"] for d in paths]
        metas[lr.name] = {"budget": int(np.mean([d["timesteps_trained"] for d in dones])), "algo": lr.algo,
                          "options": lr.options, "note": lr.note,
                          "train_wall_s": float(np.mean([d["train_wall_s"] for d in dones])),
                          "bc_wall_s": float(np.mean([d["bc_wall_s"] for d in dones])),
                          "commits": sorted({d["commit"] for d in dones})}
    return learner_cells, curves, metas


def _evaluate_held_out(out, p, learner_cells: dict, refs: list, horizon: int, *, workers, progress, log) -> Results:
    """The learners' models and the reference agents ``refs`` on the held-out runs of ``p`` (cached,
    ``<out>/<env>/eval/results.json``); a RuntimeError if a model ran on an instance it trained on."""
    agents = [a for v in learner_cells.values() for a in v] + refs
    log(f"drl: evaluating {p.key} ({len(agents)} agents on "
        + (f"instances {list(p.eval_instances)} x seeds {list(p.eval_seeds)}" if p.eval_instances is not None
           else f"instances = seeds {p.eval_seeds[0]}-{p.eval_seeds[-1]}") + f", {horizon} slots)")
    res = _evaluate_cached(os.path.join(out, p.key, "eval"), p.env_id, agents, list(p.eval_seeds), horizon,
                           p.eval_instances, workers=workers, progress=progress, log=log, env_kwargs=p.env_kwargs)
    _write_results(res, os.path.join(out, p.key, "eval"))
    learned = {a for v in learner_cells.values() for a in v}
    for r in res.runs:
        if r.agent in learned and r.trained_on:
            raise RuntimeError(f"{r.agent} was evaluated on instance {r.instance}, one it trained on")
    return res


def _mean_total(res: Results, agent: str) -> float:
    """The mean total reward of ``agent``'s runs in ``res`` (NaN: it has none)."""
    v = [r.total_reward for r in res.runs if r.agent == agent]
    return float(np.mean(v)) if v else math.nan


def _curve_stats(curves: dict, metas: dict, rand_curve: float) -> None:
    """Into each learner's ``metas`` entry: the first checkpoint whose mean over the training seeds beats random's
    total on the curve runs (``rand_curve``), the final models' total there, and the final models against the
    untrained ones (paired over the curve's instances)."""
    for name, seeds_pts in curves.items():
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


def _curve_figure(out: str, p, curves: dict, refs: dict, horizon: int, figures: str | None) -> str:
    """The env's learning-curve figure (the main rows and the budget ablation; the other ablations are in the table),
    also copied into ``figures`` when given; returns its path."""
    shown = {lr.name for lr in p.learners if lr.ablation in ("", "budget")}
    fig = _plot_curves(p, {k: v for k, v in curves.items() if k in shown}, refs,
                       os.path.join(out, f"drl_{p.key}_curves.png"), horizon)
    if figures:
        os.makedirs(figures, exist_ok=True)
        shutil.copy(fig, os.path.join(figures, os.path.basename(fig)))
    return fig


_REFS_TEXT = ("Each main row (and the learner row with the highest mean total, where it is not a main row) against every "
              "non-learned agent of these runs (the paper policy, its option rows, every "
              "baseline, random), in decreasing mean total: the paired relative difference of totals, mean over "
              "instances [95% t-interval], wins/losses.")


def _env_text(p, horizon: int, fig: str, table: str) -> list[str]:
    """The env's heading, the runs its table and curves are on, and the table."""
    design = (f"{p.eval_role()} instances {', '.join(map(str, p.eval_instances))} x seeds "
              f"{', '.join(map(str, p.eval_seeds))}" if p.eval_instances is not None else
              f"{len(p.eval_seeds)} held-out instances, instance = seed {p.eval_seeds[0]}-{p.eval_seeds[-1]}")
    curve_design = (f"validation instances {', '.join(map(str, p.curve_instances))} at seed "
                    f"{', '.join(map(str, p.curve_seeds))}" if p.curve_instances is not None else
                    f"validation instance = seed {p.curve_seeds[0]}-{p.curve_seeds[-1]}")
    return [f"### {p.key.upper()} {p.env_id}", "", f"Evaluated on {design}, {horizon} slots (runner, results.json "
            f"in `{os.path.join(p.key, 'eval')}`); learning curves on {curve_design}: `{os.path.basename(fig)}`."
            + (f" {p.note}" if p.note else ""), "", table, ""]


def _default_horizon(out, p, main_cells: dict, paper: str, best, horizon: int, *, workers, progress,
                     log) -> tuple[list[str], dict]:
    """The main rows again at the env's default horizon beside every non-learned agent of the plan (the paper
    policy, the best baseline, random and the other references), on the same held-out instances and seeds, with
    the table against every one of them, and (with several main rows) their validation totals there, which
    ``--export-pretrained`` chooses by. Returns (markdown lines, the summary's ``default_horizon`` entry)."""
    dh = int(p.default_horizon)
    ref_agents = list(dict.fromkeys([paper, *([best] if best else []), "random", *p.references()]))
    dagents = [a for v in main_cells.values() for a in v] + ref_agents
    log(f"drl: evaluating {p.key} at the env's default horizon ({len(dagents)} agents, {dh} slots)")
    dres = _evaluate_cached(os.path.join(out, p.key, f"eval-h{dh}"), p.env_id, dagents, list(p.eval_seeds), dh,
                            p.eval_instances, workers=workers, progress=progress, log=log, env_kwargs=p.env_kwargs)
    _write_results(dres, os.path.join(out, p.key, f"eval-h{dh}"))
    drows, dtable = _env_table(p, dres, main_cells, paper, best=best)
    md = [f"At the env's default horizon, {dh} slots ({_trained_at(p, main_cells, horizon)}; the same held-out "
          f"instances and seeds; results.json in `{os.path.join(p.key, f'eval-h{dh}')}`):", "", dtable, ""]
    gap_rows, gap_md = gap_table(dres, main_cells, paper, best, episode_bounds(p, dres, dh))
    md += [_gap_text(p), "", gap_md, ""] if gap_md else []
    vs_all, vs_all_md = reference_table(dres, main_cells)
    md += [_REFS_TEXT, "", vs_all_md, ""] if vs_all_md else []
    entry = {"horizon": dh, "rows": drows, "gap": gap_rows, "vs_every_reference": vs_all}
    if len(main_cells) > 1:  # what --export-pretrained chooses by: validation runs at the default horizon
        vres = _evaluate_cached(os.path.join(out, p.key, f"eval-curve-h{dh}"), p.env_id,
                                [a for v in main_cells.values() for a in v], list(p.curve_seeds), dh,
                                p.curve_instances, workers=workers, progress=False, log=log, env_kwargs=p.env_kwargs)
        entry["validation_totals"] = {k: float(np.mean([r.total_reward for r in vres.runs if r.agent in set(v)]))
                                      for k, v in main_cells.items()}
    return md, entry


