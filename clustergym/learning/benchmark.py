"""``clustergym drl``: the learned-scheduler benchmark on all four problems (issue 28, SPEC §8).

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
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

__all__ = ["Learner", "EnvPlan", "PLAN", "HORIZON", "QUICK", "TRAIN_SEED_OFFSET", "run_benchmark", "plan_for",
           "export_pretrained"]

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
              "total at the default load (issue 25's note): the job list comes from the dynamics seed. So "
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
QUICK = {"horizon": 50, "seeds": (0, 1), "eval_seeds": (0,), "envs": ("p4",)}


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


def cell_config(plan: EnvPlan, learner: Learner, seed: int, horizon: int, quick: bool) -> dict:
    from clustergym.learning.instances import DEFAULT_TRAIN_INSTANCES

    cfg = learner.config(quick)
    return {"env_id": plan.env_id, "learner": cfg, "seed": int(seed), "sb3_seed": TRAIN_SEED_OFFSET + int(seed),
            "horizon": int(horizon), "pool": [DEFAULT_TRAIN_INSTANCES.start, DEFAULT_TRAIN_INSTANCES.stop - 1],
            "checkpoints": _checkpoints(cfg["budget"], quick),
            "curve": {"instances": None if plan.curve_instances is None else list(plan.curve_instances),
                      "seeds": list(plan.curve_seeds)}}


def _cell_done(path: str, cfg: dict) -> dict | None:
    try:
        with open(os.path.join(path, "done.json")) as f:
            done = json.load(f)
    except (OSError, ValueError):
        return None
    return done if done.get("config") == cfg else None


def _train_cell(task, report=None) -> dict:
    """Train one (env, learner, seed) cell into a temporary folder, score its checkpoints on held-out
    instances, write ``curve.json`` and ``done.json``, then rename the folder into place."""
    path, cfg, commit = task
    import warnings

    import clustergym

    # P2's padded Box has dimensions with low == high (devices a server lacks); Gymnasium's checker says so once
    # per env, which would bury the benchmark's own lines
    warnings.filterwarnings("ignore", message=".*Box action space maximum and minimum values are equal")
    from clustergym.learning.training import train

    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
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
    res = clustergym.evaluate(cfg["env_id"], agents, cfg["curve"]["seeds"], cfg["horizon"],
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
    old = f"{path}.old-{os.getpid()}"
    if os.path.exists(path):
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
    return {"path": path, **done}


def _sweep(root: str) -> None:
    """Remove cells a killed benchmark left half-trained (``*.tmp-<pid>``, ``*.old-<pid>``)."""
    for dirpath, dirnames, _ in os.walk(root):
        for d in list(dirnames):
            if ".tmp-" in d or ".old-" in d:
                shutil.rmtree(os.path.join(dirpath, d), ignore_errors=True)
                dirnames.remove(d)


def _fmt_cmp(c) -> str:
    from clustergym.stats import fmt_ci

    return f"{fmt_ci(c)} {c.wins}/{c.losses}"


def _best_baseline(res, paper: str, learned: set[str]) -> str | None:
    rows = [s for s in res.summary() if s["agent"] not in learned and s["agent"] not in (paper, "random")]
    return max(rows, key=lambda s: s["mean_total_reward"])["agent"] if rows else None


def _env_table(plan: EnvPlan, res, cells: dict, paper: str) -> tuple[list[dict], str]:
    """Rows (learners, then the paper policy, the best baseline and random) and the markdown table."""
    from clustergym.stats import mean_ci, paired_comparison, verdict

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
    from clustergym.plots import agent_color, figure, figure_legend, mean_band, reference_color, save

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


def run_benchmark(out: str, envs: Sequence[str] | None = None, *, quick: bool = False, seeds: Sequence[int] | None = None,
                  workers: int = 2, progress: bool = True, figures: str | None = None, learners: Sequence[str] | None = None,
                  log=print) -> dict:
    """Train what is not trained yet, evaluate, write ``out/table.md``, ``out/summary.json`` and the figures.

    Args:
        envs: keys of :data:`PLAN` (default: all four; ``--quick``: P4 only).
        seeds: training seeds (default 0, 1, 2; ``--quick``: 0, 1).
        learners: only these learner names (default: every learner of each env).
        figures: also copy the learning-curve figures there (``docs/figures``).
    """
    import clustergym
    from clustergym.family import family_spec
    from clustergym.agent import env_family, list_agents
    from clustergym.runner import run_tasks

    import warnings

    warnings.filterwarnings("ignore", message=".*Box action space maximum and minimum values are equal")  # P2, per env
    envs = list(envs or (QUICK["envs"] if quick else PLAN))
    plans = [plan_for(k, quick) for k in envs]
    seeds = [int(s) for s in (seeds if seeds is not None else (QUICK["seeds"] if quick else (0, 1, 2)))]
    horizon = QUICK["horizon"] if quick else HORIZON
    known = {lr.name for p in plans for lr in p.learners}
    for name in learners or ():
        if name not in known:
            raise ValueError(f"learner {name!r} is not in the benchmark of {', '.join(envs)}: expected one of "
                             f"{', '.join(sorted(known))}")
    os.makedirs(out, exist_ok=True)
    _sweep(out)
    commit = _commit()
    t_start = time.perf_counter()
    todo, cells = [], {}
    for p in plans:
        for lr in p.learners:
            if learners and lr.name not in learners:
                continue
            for s in seeds:
                path = os.path.join(out, p.key, lr.name, f"seed{s}")
                cfg = cell_config(p, lr, s, horizon, quick)
                cells[(p.key, lr.name, s)] = path
                if _cell_done(path, cfg) is None:
                    todo.append((path, cfg, commit))
    log(f"drl: {len(cells)} cells ({len(cells) - len(todo)} already trained, {len(todo)} to train) on "
        f"{', '.join(envs)}; {len(seeds)} training seeds; horizon {horizon}; {workers} worker(s)")
    bar = None
    if progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="drl cells", unit="cell")

    def done(result):
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
        res = clustergym.evaluate(p.env_id, agents, list(p.eval_seeds), horizon, instances=p.eval_instances,
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
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=lambda o: None)
    log("\n".join(md))
    log(f"wrote {os.path.join(out, 'table.md')}, {os.path.join(out, 'summary.json')}, {', '.join(fig_paths)}")
    return summary


class _Agents(list):
    """The sb3: agents of one learner (its training seeds) with the learner's metadata."""

    def __init__(self, agents, meta):
        super().__init__(agents)
        self.meta = meta


def export_pretrained(out: str, key: str, dest_root: str | None = None, log=print) -> str:
    """Ship the best learner of ``key`` (highest held-out mean score in ``out/summary.json``), training seed 0,
    as ``sb3:pretrained/<EnvName>``: its model with a fresh (empty) optimizer state, statistics and side-car."""
    from clustergym.learning.agent import PRETRAINED_DIR, safe_load

    dest_root = dest_root or PRETRAINED_DIR
    with open(os.path.join(out, "summary.json")) as f:
        summ = json.load(f)
    env = summ["envs"][key]
    rows = [r for r in env["rows"] if r["learned"]]
    best = max(rows, key=lambda r: r["score"] if r["score"] is not None else -math.inf)
    src = os.path.join(out, key, best["learner"], "seed0")
    name = env["env_id"].split("/")[-1]
    dest = os.path.join(dest_root, name)
    shutil.rmtree(dest, ignore_errors=True)
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
    meta["pretrained"] = {"learner": best["learner"], "training_seed": 0, "commit": done["commit"],
                          "benchmark_commit": summ["commit"], "held_out_score_of_learner": best["score"],
                          "selected": "the learner with the highest held-out mean score; its training seed 0"}
    with open(os.path.join(dest, "clustergym.json"), "w") as f:
        json.dump(meta, f, indent=1)
    size = sum(os.path.getsize(os.path.join(dest, n)) for n in os.listdir(dest))
    log(f"pretrained {name}: {best['learner']} seed 0 -> {dest} ({size / 1e6:.2f} MB)")
    return dest
