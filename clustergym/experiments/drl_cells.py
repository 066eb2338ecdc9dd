"""The cells of ``clustergym drl`` on disk: what defines a cell, whether a finished one holds, and how the benchmark
writes its folders.

A cell is one (env, learner, training seed) model: ``<out>/<env>/<learner>/seed<k>``. Its configuration
(:func:`cell_config`) is recorded in its ``done.json``, written last; :func:`cell_state` says whether it is done with
this configuration (files intact), missing or stale. A cell is trained into a staging folder beside it and renamed
into place when it has finished (:func:`_staged_replace`), so a killed benchmark leaves only entries named with
:data:`STAGE` or :data:`OLD`, which :func:`_sweep` removes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Sequence

from clustergym.experiments.drl_plan import PLAN, TRAIN_SEED_OFFSET, EnvPlan, Learner
from clustergym.learning.algos import NORM_FILE, SIDE_CAR
from clustergym.learning.hyperparams import load_hyperparams
from clustergym.learning.instances import DEFAULT_TRAIN_INSTANCES
from clustergym.learning.sidecar import check_norm_file, read_side_car

__all__ = ["STAGE", "OLD", "CellError", "hyperparams_entry", "cell_config", "check_cell_files", "cell_state"]


# Names the benchmark gives its own temporary entries (a cell being trained, a cell being replaced, a table being
# written): hidden and prefixed, so no user file matches them; swept only inside the benchmark's own cell folders.
STAGE = ".clustergym-drl-staging-"
OLD = ".clustergym-drl-old-"
_LEGACY = re.compile(r"seed\d+\.(tmp|old)-\d+")  # what older versions left: seed3.tmp-<pid>, seed3.old-<pid>


class CellError(ValueError):
    """A finished cell whose files are broken (one line naming the cell folder to delete)."""


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
    scenario = {"env_kwargs": dict(plan.env_kwargs)} if plan.env_kwargs else {}  # absent for the envs' defaults
    return {"env_id": plan.env_id, **scenario, "learner": cfg, "seed": int(seed), "sb3_seed": TRAIN_SEED_OFFSET + int(seed),
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
        raise CellError("done.json is not a JSON object")
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
