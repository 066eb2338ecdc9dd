"""``clustergym drl --export-pretrained``: the best learner of a finished benchmark shipped as
``sb3:pretrained/<EnvName>`` (model, statistics, side-car with its held-out score)."""

from __future__ import annotations

import json
import math
import os
import shutil
from typing import Sequence

from clustergym.experiments.drl_cells import _staged_replace, cell_config, cell_state
from clustergym.experiments.drl_plan import HORIZON, PLAN
from clustergym.learning.sb3_agent import PRETRAINED_DIR, safe_load
from clustergym.learning.algos import SIDE_CAR
from clustergym.learning.sidecar import read_side_car

__all__ = ["check_export", "export_pretrained", "prepare_export", "pretrained_name", "shipping_envs"]


def check_export(quick: bool, learners: Sequence[str] | None, envs: Sequence[str] | None = None) -> None:
    """Refuse ``--export-pretrained`` before any work unless the benchmark is the full configuration: a shipped
    model is replaced only from the full budgets with every learner of its env compared."""
    if quick:
        raise ValueError("--export-pretrained ships models only from the full benchmark, not from --quick (tiny "
                         "budgets): drop one of them")
    for k in envs or ():
        if k in PLAN and not PLAN[k].ships_model:
            raise ValueError(f"--export-pretrained: {k} ships no model (its rows are an ablation study); drop it from "
                             "--envs or drop --export-pretrained")
    if learners:
        for k in shipping_envs(envs):
            missing = [lr.name for lr in PLAN[k].main_rows() if lr.name not in learners]
            if missing:
                raise ValueError(f"--export-pretrained picks the best of the main learners of an env; --learners leaves out "
                                 f"{', '.join(missing)} of {k}: drop --learners")


def shipping_envs(envs: Sequence[str] | None = None) -> list[str]:
    """The benchmark envs of ``envs`` (default: every one) whose best main learner ``--export-pretrained`` ships."""
    return [k for k in (envs or PLAN) if PLAN[k].ships_model]


def prepare_export(out: str, key: str) -> tuple[dict, dict, str, int]:
    """(summary, the chosen row, its cell folder, its training seed), every check passed (nothing written)."""
    if key not in PLAN:
        raise ValueError(f"env {key!r} is not in the benchmark: expected one of {', '.join(PLAN)}")
    try:
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
            summ = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--export-pretrained: {os.path.join(out, 'summary.json')} is unreadable "
                         f"({type(exc).__name__}); run the benchmark first") from None
    env = summ.get("envs", {}).get(key) if isinstance(summ, dict) and isinstance(summ.get("envs"), dict) else None
    if not isinstance(env, dict) or not isinstance(env.get("rows"), list):
        raise ValueError(f"--export-pretrained: {out}/summary.json has no table of {key}; run the benchmark on it first")
    if summ.get("quick") is not False or summ.get("horizon") != HORIZON:
        raise ValueError(f"--export-pretrained: {out}/summary.json is not the full benchmark (quick or another horizon)")
    rows = [r for r in env["rows"] if isinstance(r, dict) and r.get("learned")]
    names = {r.get("learner") for r in rows}
    missing = [lr.name for lr in PLAN[key].main_rows() if lr.name not in names]
    if missing:
        raise ValueError(f"--export-pretrained: {key}'s table lacks {', '.join(missing)}; the best learner is chosen "
                         "among the main rows: run the benchmark without --learners first")
    seeds = summ.get("training_seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(x, int) and x >= 0 for x in seeds):
        raise ValueError(f"--export-pretrained: {out}/summary.json has no training seeds")
    main = {lr.name for lr in PLAN[key].main_rows()}

    at_default, _ = _validation_at_default_horizon(env, key)

    def on_validation(r):
        v = at_default.get(r.get("learner")) if at_default is not None else r.get("validation_total")
        return v if isinstance(v, (int, float)) and math.isfinite(v) else -math.inf

    best = max((r for r in rows if r.get("learner") in main), key=on_validation)
    seed = min(seeds)
    lr = next(x for x in PLAN[key].learners if x.name == best["learner"])
    src = os.path.join(out, key, lr.name, f"seed{seed}")
    state = cell_state(src, cell_config(PLAN[key], lr, seed, HORIZON, False), out)
    if state != "done":
        raise ValueError(f"--export-pretrained: cell {os.path.relpath(src, out)} is not a finished cell of the full "
                         f"configuration ({state}); run the benchmark first")
    if read_side_car(os.path.join(src, SIDE_CAR)).get("env_id") != PLAN[key].env_id:
        raise ValueError(f"--export-pretrained: {src}/{SIDE_CAR} is not a model of {PLAN[key].env_id}")
    return summ, best, src, seed


def _validation_at_default_horizon(env: dict, key: str) -> tuple[dict | None, int | None]:
    """(the main rows' validation totals at the env's default horizon, that horizon), or (None, None) where the
    summary has none for every main row (one main row, or a summary written before they were recorded)."""
    part = env.get("default_horizon") or {}
    totals = part.get("validation_totals")
    if isinstance(totals, dict) and {lr.name for lr in PLAN[key].main_rows()} <= set(totals):
        return totals, part.get("horizon")
    return None, None


def pretrained_name(key: str) -> str:
    """The folder under pretrained/ that ``--export-pretrained`` writes for the benchmark env ``key``: the plan's
    ``pretrained_name`` (a scenario's own model), else the env's name (``sb3:pretrained/<EnvName>``)."""
    return PLAN[key].pretrained_name or PLAN[key].env_id.split("/")[-1]


def export_pretrained(out: str, key: str, dest_root: str | None = None, log=print) -> str:
    """Ship the best main learner of ``key`` (the highest mean total of its final models on the learning curve's
    validation runs, at the env's default horizon where it has several main rows and one
    (``default_horizon.validation_totals`` in ``out/summary.json``), else at the training horizon
    (``validation_total``): the choice never looks at the held-out
    instances, so their scores stay an independent test of the shipped model), its lowest
    training seed, as ``sb3:pretrained/<EnvName>``: its model with a fresh (empty) optimizer state, statistics
    and side-car (which records that seed's own held-out score beside the learner's mean).

    Only from a finished cell of the full configuration (not ``--quick``, every learner of the env in the
    table); everything is checked and the new model written beside the shipped one before the shipped one is
    replaced (a failure leaves it untouched)."""
    dest_root = dest_root or PRETRAINED_DIR
    summ, best, src, seed = prepare_export(out, key)
    name = pretrained_name(key)
    dest = os.path.join(dest_root, name)
    _staged_replace(dest, lambda stage: _write_export(stage, src, summ, best, seed, safe_load, key))
    size = sum(os.path.getsize(os.path.join(dest, n)) for n in os.listdir(dest))
    log(f"pretrained {name}: {best['learner']} seed {seed} -> {dest} ({size / 1e6:.2f} MB)")
    return dest


def _seed_score(best: dict, summ: dict, seed: int) -> float | None:
    per, seeds = best.get("per_seed_score"), summ.get("training_seeds")
    if isinstance(per, list) and isinstance(seeds, list) and len(per) == len(seeds) and seed in seeds:
        return per[seeds.index(seed)]
    return None


def _write_export(dest: str, src: str, summ: dict, best: dict, seed: int, safe_load, key: str) -> None:
    os.makedirs(dest)
    _, dh = _validation_at_default_horizon(summ["envs"][key], key)
    meta = read_side_car(os.path.join(src, SIDE_CAR))
    model = safe_load(os.path.join(src, "model.zip"), meta)
    pol = model.policy
    if hasattr(pol, "optimizer"):  # an unstepped optimizer: no moment estimates in the shipped file
        pol.optimizer = pol.optimizer_class(pol.parameters(), lr=float(pol.optimizer.param_groups[0]["lr"]),
                                            **pol.optimizer_kwargs)
    for attr in ("actor", "critic"):  # SAC
        sub = getattr(pol, attr, None)
        if sub is not None and hasattr(sub, "optimizer"):
            sub.optimizer = sub.optimizer_class(sub.parameters(), lr=float(sub.optimizer.param_groups[0]["lr"]),
                                                **sub.optimizer_kwargs)
    model.save(os.path.join(dest, "model.zip"), exclude=["replay_buffer", "rollout_buffer"])
    if os.path.exists(os.path.join(src, "vecnormalize.npz")):
        shutil.copy(os.path.join(src, "vecnormalize.npz"), dest)
    with open(os.path.join(src, "done.json")) as f:
        done = json.load(f)
    meta.pop("checkpoint_of", None)
    meta["hyperparams_file"] = None
    meta["pretrained"] = {"learner": best["learner"], "training_seed": seed, "commit": done["commit"],
                          "benchmark_commit": summ.get("commit"), "held_out_score_of_learner": best["score"],
                          "held_out_score_of_this_seed": _seed_score(best, summ, seed),
                          "selected": "the main learner with the highest mean total on the validation runs of the learning "
                                      "curves" + (f" at the env's default horizon ({dh} slots)" if dh else "")
                                      + "; its lowest training seed"}
    with open(os.path.join(dest, "clustergym.json"), "w") as f:
        json.dump(meta, f, indent=1)
