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

import json
import math
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from clustergym.agent import env_family, list_agents
from clustergym.family import family_spec
from clustergym.learning.agent import PRETRAINED_DIR, check_norm_file, check_side_car, safe_load
from clustergym.learning.hyperparams import load_hyperparams
from clustergym.learning.instances import DEFAULT_TRAIN_INSTANCES
from clustergym.learning.training import NORM_FILE, SIDE_CAR, train
from clustergym.outdir import FolderLock, check_path
from clustergym.plots import agent_color, figure, figure_legend, mean_band, reference_color, save
from clustergym.runner import evaluate, run_tasks, was_interrupted
from clustergym.stats import fmt_ci, mean_ci, paired_comparison, verdict

__all__ = ["Learner", "EnvPlan", "PLAN", "HORIZON", "QUICK", "FULL_OUT", "TRAIN_SEED_OFFSET", "run_benchmark", "plan_for",
           "plan_cells", "cell_config", "cell_state", "check_cell_files", "CellError", "check_export", "export_pretrained"]

HORIZON = 200  # slots per training episode and per evaluation run (P3's default; P1, P2, P4 default to 2000)
TRAIN_SEED_OFFSET = 100  # training seed s trains with SB3 seed 100 + s (envs 100+s, 101+s, ...): disjoint from
# the evaluation dynamics seeds (0-14), so no training episode replays an evaluation run's arrivals


@dataclass(frozen=True)
class Learner:
    """One row of the table: an algorithm with its ``train`` options and step budget (env steps)."""

    name: str
    algo: str
    budget: int
    options: dict = field(default_factory=dict)  # clustergym.learning.training.train keyword arguments
    quick_budget: int = 1024
    note: str = ""

    def config(self, quick: bool) -> dict:
        opts = self.options
        if quick and self.algo in ("ppo", "maskable_ppo"):  # two short rollouts, so the quick curve has an update
            opts = {**opts, "hyperparams": {"n_steps": 128, "batch_size": 128, **opts.get("hyperparams", {})}}
        if quick and "warm_start" in opts:  # a short cloning phase: the same code path, not 20,000 teacher slots
            opts = {**opts, "bc_steps": QUICK["bc_steps"], "bc_epochs": QUICK["bc_epochs"]}
        return {"name": self.name, "algo": self.algo, "budget": self.quick_budget if quick else self.budget,
                "options": opts}


@dataclass(frozen=True)
class EnvPlan:
    """The learners of one env and its evaluation design (held-out instances x seeds)."""

    key: str
    env_id: str
    learners: tuple[Learner, ...]
    eval_instances: tuple[int, ...] | None  # None: instance = seed (one instance per seed), see P3
    eval_seeds: tuple[int, ...]
    curve_instances: tuple[int, ...] | None
    curve_seeds: tuple[int, ...]
    note: str = ""


# SAC on P2: the padded action has 336 x 6 = 2,016 dimensions; with SB3's default of one gradient step per env
# step SAC trained at 7 env-steps/s here (2,000 steps in 302 s), so one gradient step per 8 env steps.
_SAC_P2 = {"train_freq": 8, "gradient_steps": 1}

PLAN: dict[str, EnvPlan] = {
    "p1": EnvPlan("p1", "clustergym/MultiServerChannel-v0", (
        Learner("ppo", "ppo", 100_000),
        Learner("maskable_ppo", "maskable_ppo", 100_000),
        Learner("maskable_ppo+entity", "maskable_ppo", 50_000, {"net": "entity"},
                note="per-channel network with shared weights and pooling (clustergym.learning.entity)"),
        Learner("bc(esdp)+maskable_ppo", "maskable_ppo", 50_000, {"warm_start": "esdp", "bc_steps": 5_000},
                note=("behaviour cloning from ESDP on 5,000 slots of training instances (ESDP takes about 40 ms a "
                      "slot), then fine-tuning")),
    ), (0, 1, 2, 3, 4), (0, 1, 2), (0, 1, 2, 3, 4), (0,)),
    "p2": EnvPlan("p2", "clustergym/MultiServerAllocation-v0", (
        Learner("ppo", "ppo", 100_000),
        Learner("sac", "sac", 10_000, {"hyperparams": _SAC_P2}, quick_budget=256,
                note="one gradient step per 8 env steps (2,016 action dimensions)"),
        Learner("bc(drf)+ppo", "ppo", 100_000, {"warm_start": "drf", "env_kwargs": {"action_mode": "channel"}},
                note=("behaviour cloning from DRF (the best baseline at this horizon) on training instances, in the "
                      "paper's channel action (DRF's own)")),
    ), (0, 1, 2, 3, 4), (0, 1, 2), (0, 1, 2, 3, 4), (0,)),
    "p3": EnvPlan("p3", "clustergym/RingAllReduce-v0", (
        Learner("ppo", "ppo", 50_000),
        Learner("ppo-ring_size", "ppo", 50_000, {"env_kwargs": {"action_mode": "ring_size"}},
                note=("the action is a ring size per visible job, placed by the env's greedy ring placement "
                      "(action_mode='ring_size'; the paper policy and the baselines keep their placement action: "
                      "the dynamics are the same)")),
        Learner("bc(greedy)+ppo-ring_size", "ppo", 50_000,
                {"env_kwargs": {"action_mode": "ring_size"}, "warm_start": "greedy"},
                note="behaviour cloning from greedy's ring sizes, then fine-tuning, in ring_size mode"),
    ), None, tuple(range(15)), None, tuple(range(5)),
        note=("P3's instances (scenario seeds) differ only in the topology, which does not change any agent's "
              "total at the default load: the job list comes from the dynamics seed. So "
              "P3 is evaluated on 15 instances with instance = seed (each its own topology and job list), "
              "not on 5 instances x 3 seeds (which would be 3 job lists).")),
    "p4": EnvPlan("p4", "clustergym/ApproxJobs-v0", (
        Learner("ppo", "ppo", 100_000),
        Learner("maskable_ppo", "maskable_ppo", 100_000),
        Learner("bc(fair)+maskable_ppo", "maskable_ppo", 100_000, {"warm_start": "fair"},
                note="behaviour cloning from Fair (the best baseline at this horizon) on training instances"),
    ), (0, 1, 2, 3, 4), (0, 1, 2), (0, 1, 2, 3, 4), (0,)),
}

# Learner names become folder names inside sb3: agent specs, so none of the spec syntax ([ ] , =).
assert all(set(lr.name).isdisjoint("[],= ") for p in PLAN.values() for lr in p.learners)

# --quick: CI-sized; same learners and code paths, tiny budgets, 2 training seeds, short runs.
QUICK = {"horizon": 50, "seeds": (0, 1), "eval_seeds": (0,), "envs": ("p4",), "bc_steps": 400, "bc_epochs": 5,
         "out": "runs/drl-quick"}
FULL_OUT = "runs/drl"  # the default --out of the full benchmark (--quick has its own: QUICK["out"])

# Names the benchmark gives its own temporary entries (a cell being trained, a cell being replaced, a table being
# written): hidden and prefixed, so no user file matches them; swept only inside the benchmark's own cell folders.
STAGE = ".clustergym-drl-staging-"
OLD = ".clustergym-drl-old-"
_LEGACY = re.compile(r"seed\d+\.(tmp|old)-\d+")  # what older versions left: seed3.tmp-<pid>, seed3.old-<pid>


class CellError(ValueError):
    """A finished cell whose files are broken (one line naming the cell folder to delete)."""


def plan_for(key: str, quick: bool = False) -> EnvPlan:
    if key not in PLAN:
        raise ValueError(f"env {key!r} is not in the benchmark: expected one of {', '.join(PLAN)}")
    p = PLAN[key]
    if not quick:
        return p
    inst = p.eval_instances
    return EnvPlan(p.key, p.env_id, p.learners, inst, QUICK["eval_seeds"] if inst is not None else tuple(range(5)),
                   inst, QUICK["eval_seeds"] if inst is not None else tuple(range(5)), p.note)


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

    meta = _read_json(os.path.join(path, SIDE_CAR), SIDE_CAR)
    try:
        check_side_car(meta, SIDE_CAR)
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


def _cell_done(path: str, cfg: dict) -> dict | None:
    try:
        return _done_record(path) if cell_state(path, cfg) == "done" else None
    except CellError:
        return None


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
                 progress=False, checkpoints=cfg["checkpoints"], **opts)
    train_total = time.perf_counter() - t0
    # Learning curve: every checkpoint on the held-out curve instances (runner, one process).
    ck = {n: os.path.join(tmp, "checkpoints", str(n)) for n in cfg["checkpoints"]}
    agents = [f"sb3:{d}/model.zip" for d in ck.values()]
    res = evaluate(cfg["env_id"], agents, cfg["curve"]["seeds"], cfg["horizon"],
                   instances=cfg["curve"]["instances"], workers=1, progress=False, score=False)
    bc_wall = float((meta.get("warm_start") or {}).get("bc_wall_s", 0.0) or 0.0)  # demonstrations + fit
    points = []
    for (n, d), a in zip(ck.items(), agents):
        with open(os.path.join(d, "clustergym.json")) as f:
            side = json.load(f)
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


def _fmt_cmp(c) -> str:
    return f"{fmt_ci(c)} {c.wins}/{c.losses}"


def _best_baseline(res, paper: str, learned: set[str]) -> str | None:
    rows = [s for s in res.summary() if s["agent"] not in learned and s["agent"] not in (paper, "random")]
    return max(rows, key=lambda s: s["mean_total_reward"])["agent"] if rows else None


def _env_table(plan: EnvPlan, res, cells: dict, paper: str) -> tuple[list[dict], str]:
    """Rows (learners, then the paper policy, the best baseline and random) and the markdown table."""
    learned = {a for agents in cells.values() for a in agents}
    best = _best_baseline(res, paper, learned)

    def values(agents: Sequence[str], key: str = "total_reward") -> dict:
        groups: dict = {}
        for r in res.runs:
            if r.agent in agents:
                v = getattr(r, key)
                if v is not None:
                    groups.setdefault(r.instance if r.instance is not None else r.seed, []).append(float(v))
        return {k: float(np.mean(v)) for k, v in groups.items()}

    rand, pap = values(["random"]), values([paper])
    has_score = any(r.score is not None for r in res.runs)

    def score(agents) -> dict:
        if has_score:
            return values(agents, "score")
        v = values(agents)  # P3: no bound; (V - V_random) / (V_paper - V_random)
        return {k: (v[k] - rand[k]) / (pap[k] - rand[k]) if abs(pap[k] - rand[k]) > 1e-12 else math.nan for k in v}

    rows = []
    for name, agents in [*cells.items(), (paper, [paper]), *([(best, [best])] if best else []), ("random", ["random"])]:
        v = values(agents)
        sc = mean_ci(list(score(agents).values()))
        row = {"learner": name, "learned": name in cells, "score": sc.mean, "score_low": sc.low, "score_high": sc.high,
               "mean_total_reward": float(np.mean(list(v.values()))), "n_instances": len(v)}
        for ref_name, ref_agent in (("paper", paper), ("best_baseline", best), ("random", "random")):
            if ref_agent is None or name == ref_agent:
                continue
            ref = values([ref_agent])
            c = paired_comparison(v, ref, agent=name, reference=ref_name)
            row[f"vs_{ref_name}"] = {"mean": c.mean, "low": c.low, "high": c.high, "wins": c.wins, "losses": c.losses,
                                     "ties": c.ties, "verdict": verdict(c), "text": _fmt_cmp(c)}
        if name in cells:
            info = cells[name]
            row["per_seed_score"] = [float(np.mean(list(score([a]).values()))) for a in agents]
            row.update({k: info.meta[k] for k in ("budget", "train_wall_s", "bc_wall_s", "commits", "algo", "options",
                                                   "note", "beats_random_from")})
        rows.append(row)
    sc_label = "score" if has_score else f"score vs {paper}"
    head = (f"| learner | budget (env steps) | wall / seed | {sc_label} [95% CI] | per seed | vs {paper} | "
            f"vs best baseline ({best}) | vs random | curve above random from |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        def cell(k):
            return r[k]["text"] + (f" ({r[k]['verdict']})" if k != "vs_paper" or r["learned"] else "") if k in r else "–"

        ci = (f"{r['score']:.3f} [{r['score_low']:.3f}, {r['score_high']:.3f}]" if math.isfinite(r["score_low"])
              else f"{r['score']:.3f}")
        if r["learned"]:
            wall = r["train_wall_s"] + r["bc_wall_s"]
            seeds = " / ".join(f"{s:.2f}" for s in r["per_seed_score"])
            beat = r["beats_random_from"]
            beat = "never" if beat is None else f"{beat:,} steps"
            lines.append(f"| {r['learner']} | {r['budget']:,} | {wall:.0f} s | {ci} | {seeds} | {cell('vs_paper')} | "
                         f"{cell('vs_best_baseline')} | {cell('vs_random')} | {beat} |")
        else:
            lines.append(f"| *{r['learner']}* | – | – | {ci} | – | {cell('vs_paper')} | {cell('vs_best_baseline')} | "
                         f"{cell('vs_random')} | – |")
    return rows, "\n".join(lines)


def _plot_curves(plan: EnvPlan, curves: dict, refs: dict, path: str, horizon: int) -> str:
    """One figure per env: held-out mean total reward vs env steps and vs training wall time, mean over the
    training seeds with its 95% interval; the paper policy, the best baseline and random as lines."""
    fig, axes = figure(1, 2, size=(12, 3.8), sharey=True)
    for name, seeds in curves.items():
        steps = np.array([[p["steps_trained"] for p in s] for s in seeds]).mean(axis=0)
        y = np.array([[p["mean_total_reward"] for p in s] for s in seeds])
        wall = np.array([[p["wall_s"] for p in s] for s in seeds]).mean(axis=0)
        for ax, x in ((axes[0], steps), (axes[1], wall)):
            mean_band(ax, x, y, f"{name} ({len(seeds)} seeds)", agent_color(name), marker="o", ms=3)
    for label, val in refs.items():
        for ax in axes:
            ax.axhline(val, ls="--", lw=1.1, color=reference_color(label), label=label)
    axes[0].set_xlabel("env steps (fine-tuning steps for warm-started learners)")
    axes[1].set_xlabel("training wall time (s, behaviour cloning included)")
    axes[0].set_ylabel(f"held-out mean total reward (horizon {horizon})")
    for ax in axes:
        ax.grid(alpha=0.3)
    figure_legend(fig, axes, fontsize=7)
    fig.suptitle(f"{plan.env_id.split('/')[-1]}: learners on held-out instances (band: 95% interval over training "
                 f"seeds)", fontsize=10)
    return save(fig, path)


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


# Bytes a cell writes at most while it trains (model, statistics and 5 checkpoints of P2's largest model) and the
# largest single file: the free-space and file-size-limit (ulimit -f) checks before any training.
CELL_BYTES, CELL_FILE_BYTES = 60e6, 12e6


def run_benchmark(out: str, envs: Sequence[str] | None = None, *, quick: bool = False, seeds: Sequence[int] | None = None,
                  workers: int = 2, progress: bool = True, figures: str | None = None, learners: Sequence[str] | None = None,
                  log=print, lock: bool = True) -> dict:
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
    """
    import contextlib

    check_path(out)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers={workers!r} is invalid: expected an integer >= 1")
    plan = plan_cells(out, envs, quick=quick, seeds=seeds, learners=learners)  # validates before the lock
    with (FolderLock(out, need_total=CELL_BYTES * len(plan["todo"]) + 20e6, need_file=CELL_FILE_BYTES)
          if lock else contextlib.nullcontext()):
        plan = plan_cells(out, envs, quick=quick, seeds=seeds, learners=learners)  # again: under the lock
        return _run_planned(out, plan, quick=quick, workers=workers, progress=progress, figures=figures,
                            learners=learners, log=log)


def _run_planned(out, plan, *, quick, workers, progress, figures, learners, log) -> dict:
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
               else f"instances = seeds {p.eval_seeds[0]}-{p.eval_seeds[-1]}") + ")")
        res = evaluate(p.env_id, agents, list(p.eval_seeds), horizon, instances=p.eval_instances,
                       workers=workers, progress=progress)
        res.write(os.path.join(out, p.key, "eval"), plots=False)
        learned = {a for v in learner_cells.values() for a in v}
        for r in res.runs:
            if r.agent in learned and r.trained_on:
                raise RuntimeError(f"{r.agent} was evaluated on instance {r.instance}, one it trained on")
        # Reference lines of the curves: on the same (instance, seed) pairs as the curve points.
        pairs = {(i, s) for i in (p.curve_instances or [None]) for s in p.curve_seeds}

        def on_curve(agent):
            v = [r.total_reward for r in res.runs if r.agent == agent and
                 ((r.instance if p.curve_instances is not None else None), r.seed) in pairs]
            return float(np.mean(v)) if v else math.nan

        rand_curve = on_curve("random")
        for name, seeds_pts in curves.items():  # the first checkpoint whose seed-mean beats random on the curve runs
            mean = np.mean([[pt["mean_total_reward"] for pt in s] for s in seeds_pts], axis=0)
            steps = np.mean([[pt["steps_trained"] for pt in s] for s in seeds_pts], axis=0)
            above = [int(st) for st, m in zip(steps, mean) if m > rand_curve]
            metas[name]["beats_random_from"] = above[0] if above else None
        rows, table = _env_table(p, res, {k: _Agents(v, metas[k]) for k, v in learner_cells.items()}, paper)
        best = next((r["learner"] for r in rows if not r["learned"] and r["learner"] not in (paper, "random")), None)
        refs = {f"{a} (held-out)": on_curve(a) for a in dict.fromkeys([paper, best, "random"]) if a}
        fig = _plot_curves(p, curves, refs, os.path.join(out, f"drl_{p.key}_curves.png"), horizon)
        fig_paths.append(fig)
        if figures:
            os.makedirs(figures, exist_ok=True)
            shutil.copy(fig, os.path.join(figures, os.path.basename(fig)))
        design = (f"held-out instances {', '.join(map(str, p.eval_instances))} x seeds "
                  f"{', '.join(map(str, p.eval_seeds))}" if p.eval_instances is not None else
                  f"{len(p.eval_seeds)} held-out instances, instance = seed {p.eval_seeds[0]}-{p.eval_seeds[-1]}")
        md += [f"### {p.key.upper()} {p.env_id}", "", f"Evaluated on {design} (runner, results.json in "
               f"`{os.path.join(p.key, 'eval')}`); learning curve: `{os.path.basename(fig)}`."
               + (f" {p.note}" if p.note else ""), "", table, ""]
        summary["envs"][p.key] = {"env_id": p.env_id, "paper": paper, "rows": rows, "figure": os.path.basename(fig),
                                  "eval": {"instances": p.eval_instances, "seeds": list(p.eval_seeds)}}
    summary["wall_s"] = time.perf_counter() - t_start
    summary["train_elapsed_s"] = train_elapsed
    md.append(f"Total wall time of this invocation: {summary['wall_s'] / 60:.1f} min ({len(todo)} cells trained; "
              f"{len(cells) - len(todo)} reused).")
    _atomic_json_or_text(os.path.join(out, "table.md"), "\n".join(md) + "\n")
    _atomic_json_or_text(os.path.join(out, "summary.json"), json.dumps(summary, indent=1, default=lambda o: None))
    log("\n".join(md))
    log(f"wrote {os.path.join(out, 'table.md')}, {os.path.join(out, 'summary.json')}, {', '.join(fig_paths)}")
    return summary


class _Agents(list):
    """The sb3: agents of one learner (its training seeds) with the learner's metadata."""

    def __init__(self, agents, meta):
        super().__init__(agents)
        self.meta = meta


def check_export(quick: bool, learners: Sequence[str] | None, envs: Sequence[str] | None = None) -> None:
    """Refuse ``--export-pretrained`` before any work unless the benchmark is the full configuration: a shipped
    model is replaced only from the full budgets with every learner of its env compared."""
    if quick:
        raise ValueError("--export-pretrained ships models only from the full benchmark, not from --quick (tiny "
                         "budgets): drop one of them")
    if learners:
        for k in envs or PLAN:
            missing = [lr.name for lr in PLAN[k].learners if lr.name not in learners]
            if missing:
                raise ValueError(f"--export-pretrained picks the best of all learners of an env; --learners leaves out "
                                 f"{', '.join(missing)} of {k}: drop --learners")


def _prepare_export(out: str, key: str) -> tuple[dict, dict, str, int]:
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
    missing = [lr.name for lr in PLAN[key].learners if lr.name not in names]
    if missing:
        raise ValueError(f"--export-pretrained: {key}'s table lacks {', '.join(missing)}; the best learner is chosen "
                         "among all of them: run the benchmark without --learners first")
    seeds = summ.get("training_seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(x, int) and x >= 0 for x in seeds):
        raise ValueError(f"--export-pretrained: {out}/summary.json has no training seeds")
    best = max(rows, key=lambda r: r["score"] if isinstance(r.get("score"), (int, float)) and math.isfinite(r["score"])
               else -math.inf)
    seed = min(seeds)
    lr = next(x for x in PLAN[key].learners if x.name == best["learner"])
    src = os.path.join(out, key, lr.name, f"seed{seed}")
    state = cell_state(src, cell_config(PLAN[key], lr, seed, HORIZON, False), out)
    if state != "done":
        raise ValueError(f"--export-pretrained: cell {os.path.relpath(src, out)} is not a finished cell of the full "
                         f"configuration ({state}); run the benchmark first")
    with open(os.path.join(src, SIDE_CAR)) as f:
        if json.load(f).get("env_id") != PLAN[key].env_id:
            raise ValueError(f"--export-pretrained: {src}/{SIDE_CAR} is not a model of {PLAN[key].env_id}")
    return summ, best, src, seed


def export_pretrained(out: str, key: str, dest_root: str | None = None, log=print) -> str:
    """Ship the best learner of ``key`` (highest held-out mean score in ``out/summary.json``), its lowest
    training seed, as ``sb3:pretrained/<EnvName>``: its model with a fresh (empty) optimizer state, statistics
    and side-car (which records that seed's own held-out score beside the learner's mean).

    Only from a finished cell of the full configuration (not ``--quick``, every learner of the env in the
    table); everything is checked and the new model written beside the shipped one before the shipped one is
    replaced (a failure leaves it untouched)."""
    dest_root = dest_root or PRETRAINED_DIR
    summ, best, src, seed = _prepare_export(out, key)
    env = summ["envs"][key]
    name = env["env_id"].split("/")[-1]
    dest = os.path.join(dest_root, name)
    _staged_replace(dest, lambda stage: _write_export(stage, src, summ, best, seed, safe_load))
    size = sum(os.path.getsize(os.path.join(dest, n)) for n in os.listdir(dest))
    log(f"pretrained {name}: {best['learner']} seed {seed} -> {dest} ({size / 1e6:.2f} MB)")
    return dest


def _seed_score(best: dict, summ: dict, seed: int) -> float | None:
    per, seeds = best.get("per_seed_score"), summ.get("training_seeds")
    if isinstance(per, list) and isinstance(seeds, list) and len(per) == len(seeds) and seed in seeds:
        return per[seeds.index(seed)]
    return None


def _write_export(dest: str, src: str, summ: dict, best: dict, seed: int, safe_load) -> None:
    os.makedirs(dest)
    with open(os.path.join(src, "clustergym.json")) as f:
        meta = json.load(f)
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
                          "selected": "the learner with the highest held-out mean score; its lowest training seed"}
    with open(os.path.join(dest, "clustergym.json"), "w") as f:
        json.dump(meta, f, indent=1)


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
