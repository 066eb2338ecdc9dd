"""The tables and figures of the learned-scheduler benchmark (``clustergym drl``): one table per env, the learning
curves with the paper policy and the baselines as reference lines."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from clustergym.experiments.drl_plan import EnvPlan
from clustergym.core.plots import agent_color, figure, figure_legend, mean_band, reference_color, save
from clustergym.core.stats import fmt_ci, mean_ci, paired_comparison, ratio_ci, verdict
from clustergym.experiments.leaderboard import episode_bound

__all__ = ["env_table", "plot_curves", "ablation_table", "episode_bounds", "gap_table", "reference_table",
           "with_best_row"]


def _fmt_cmp(c) -> str:
    return f"{fmt_ci(c)} {c.wins}/{c.losses}"


def _cmp_record(c, **extra) -> dict:
    """One paired comparison as the summary stores it: mean, interval, wins/losses/ties, its table text."""
    return {"mean": c.mean, "low": c.low, "high": c.high, "wins": c.wins, "losses": c.losses, "ties": c.ties,
            "text": _fmt_cmp(c), **extra}


def _best_baseline(res, paper: str, learned: set[str]) -> str | None:
    """The non-learned agent (not the paper policy, not random, no ``sb3:`` model: ablation rows are learners
    too) with the highest mean total."""
    rows = [s for s in res.summary() if s["agent"] not in learned and s["agent"] not in (paper, "random")
            and not s["agent"].startswith("sb3:")]
    return max(rows, key=lambda s: s["mean_total_reward"])["agent"] if rows else None


def _values_of(res, agents: Sequence[str], key: str = "total_reward") -> dict:
    """Per instance (instance = seed where the plan has no instances): the mean of ``key`` over the agents' runs
    (training seeds and dynamics seeds together)."""
    groups: dict = {}
    for r in res.runs:
        if r.agent in agents:
            v = getattr(r, key)
            if v is not None:
                groups.setdefault(r.instance if r.instance is not None else r.seed, []).append(float(v))
    return {k: float(np.mean(v)) for k, v in groups.items()}


def _scores(res, agents: Sequence[str], paper: str, bounds: dict | None = None) -> dict:
    """Per instance normalised score. Runs with a score: its mean. Otherwise, with ``bounds`` (per instance, the
    episode bound B): (V − V_random) / (B − V_random); without: (V − V_random) / (V_paper − V_random), where
    ``paper`` is the agent the plan normalises by (its ``score_reference``, else the paper policy)."""
    if any(r.score is not None for r in res.runs):
        return _values_of(res, agents, "score")
    v, rand = _values_of(res, agents), _values_of(res, ["random"])
    top = bounds if bounds is not None else _values_of(res, [paper])
    return {k: (v[k] - rand[k]) / (top[k] - rand[k]) if k in top and abs(top[k] - rand[k]) > 1e-12 else math.nan
            for k in v}


def ablation_table(plan: EnvPlan, res, cells: dict, paper: str) -> tuple[list[dict], str]:
    """One row per ablation row of ``plan`` whose cells and base are in ``cells``: what it changes, its budget,
    its held-out score with a 95% interval over instances, and the paired relative difference of its total to
    its base row's (mean over instances, 95% t-interval, wins/losses, the verdict of "differs from the base")."""
    rows, lines = [], []
    norm = plan.score_reference or paper
    for lr in plan.learners:
        if not lr.ablation or lr.name not in cells or lr.base not in cells:
            continue
        sc = mean_ci([x for x in _scores(res, cells[lr.name], norm).values() if math.isfinite(x)])
        c = paired_comparison(_values_of(res, cells[lr.name]), _values_of(res, cells[lr.base]), agent=lr.name,
                              reference=lr.base)
        word = ("higher" if c.low > 0 else "lower" if c.high < 0 else "no difference resolved")
        rows.append({"learner": lr.name, "ablation": lr.ablation, "base": lr.base, "note": lr.note,
                     "budget": cells[lr.name].meta["budget"], "score": sc.mean, "score_low": sc.low,
                     "score_high": sc.high, "vs_base": _cmp_record(c, reading=word),
                     "train_wall_s": cells[lr.name].meta["train_wall_s"] + cells[lr.name].meta["bc_wall_s"]})
    if not rows:
        return rows, ""
    lines = ["| changes | row | vs base | budget (env steps) | wall / seed | score [95% CI] | vs base [95% CI] W/L | "
             "reading |", "|" + "---|" * 8]
    for r in rows:
        ci = (f"{r['score']:.3f} [{r['score_low']:.3f}, {r['score_high']:.3f}]" if math.isfinite(r["score_low"])
              else f"{r['score']:.3f}")
        lines.append(f"| {r['ablation']} | {r['learner']} | {r['base']} | {r['budget']:,} | {r['train_wall_s']:.0f} s | "
                     f"{ci} | {r['vs_base']['text']} | {r['vs_base']['reading']} |")
    return rows, "\n".join(lines)


def _env_table(plan: EnvPlan, res, cells: dict, paper: str, best: str | None = None) -> tuple[list[dict], str]:
    """Rows (learners, then the paper policy, the best baseline and random) and the markdown table. ``best``:
    the baseline to compare with (default: the one with the highest mean total in ``res``)."""
    learned = {a for agents in cells.values() for a in agents}
    best = best or _best_baseline(res, paper, learned)

    def values(agents: Sequence[str], key: str = "total_reward") -> dict:
        return _values_of(res, agents, key)

    has_score = any(r.score is not None for r in res.runs)
    norm = paper if has_score else (plan.score_reference or paper)  # the agent a score puts at 1 (no bound)

    def score(agents) -> dict:
        return _scores(res, agents, norm)

    rows = []
    others = dict.fromkeys([paper, *([best] if best else []), *([norm] if norm != paper else []), "random"])
    for name, agents in [*cells.items(), *((a, [a]) for a in others)]:
        v = values(agents)
        sc = mean_ci(list(score(agents).values()))
        row = {"learner": name, "learned": name in cells, "score": sc.mean, "score_low": sc.low, "score_high": sc.high,
               "mean_total_reward": float(np.mean(list(v.values()))), "n_instances": len(v)}
        for ref_name, ref_agent in (("paper", paper), ("best_baseline", best), ("random", "random")):
            if ref_agent is None or name == ref_agent:
                continue
            ref = values([ref_agent])
            c = paired_comparison(v, ref, agent=name, reference=ref_name)
            row[f"vs_{ref_name}"] = _cmp_record(c, verdict=verdict(c))
        if name in cells:
            info = cells[name]
            row["per_seed_score"] = [float(np.mean(list(score([a]).values()))) for a in agents]
            row.update({k: info.meta[k] for k in ("budget", "train_wall_s", "bc_wall_s", "commits", "algo", "options",
                                                   "note", "beats_random_from", "after_vs_before")})
            row["validation_total"] = info.meta.get("validation_total")
        rows.append(row)
    sc_label = "score" if has_score else f"score vs `{norm}`"  # backticks: an agent spec's [options] is no link
    head = (f"| learner | budget (env steps) | wall / seed | {sc_label} [95% CI] | per seed | vs {paper} | "
            f"vs best baseline ({best}) | vs random | curve above random from | trained − untrained (validation) |")
    lines = [head, "|" + "---|" * 10]
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
                         f"{cell('vs_best_baseline')} | {cell('vs_random')} | {beat} | {r['after_vs_before']['text']} |")
        else:
            lines.append(f"| *{r['learner']}* | – | – | {ci} | – | {cell('vs_paper')} | {cell('vs_best_baseline')} | "
                         f"{cell('vs_random')} | – | – |")
    return rows, "\n".join(lines)


_GAP_TEXT = ("The gap to the bound (the same runs; every learner row, ablations included, where the runs are at the "
             "training horizon): a score is the share of the gap between random and the "
             "oracle or bound an agent closes, 1 − score the headroom it leaves; for a learner, the share of a "
             "reference's headroom it closes is (s − s_ref) / (1 − s_ref) per instance (0: level with the reference, "
             "1: at the bound), and pooled, mean(s − s_ref) / mean(1 − s_ref) over the instances (delta-method "
             "interval), which an instance with the reference a hair below the bound cannot dominate.")


def _gap_text(p) -> str:
    """The paragraph above a gap table; for a plan scored against episode bounds, which bound."""
    if not p.episode_bound:
        return _GAP_TEXT
    return _GAP_TEXT + (" The runs carry no per-slot bound: the bound of each instance is its window bound "
                        "(`envs/ringallreduce/oracle.py: run_upper_bound(truth, T, window=max_jobs)`: every visible "
                        "job at its cap in every slot, GPUs and links unlimited), which holds for every policy.")


def episode_bounds(p, res, horizon: int) -> dict | None:
    """Per instance of ``res`` (instance = scenario seed), the episode bound of a plan with ``episode_bound``
    (:func:`clustergym.experiments.leaderboard.episode_bound`, from the hidden truth); None for other plans.
    A ValueError if an agent's total is above its instance's bound (the bound and the runs disagree on the
    instance)."""
    if not p.episode_bound:
        return None
    keys = sorted({r.instance if r.instance is not None else r.seed for r in res.runs})
    bounds = {k: episode_bound(p.env_id, int(k), horizon, p.env_kwargs) for k in keys}
    for r in res.runs:
        b = bounds[r.instance if r.instance is not None else r.seed]
        if r.total_reward > b + 1e-6 * max(1.0, abs(b)):
            raise ValueError(f"{r.agent} scored {r.total_reward:.6g} on instance {r.instance}, seed {r.seed}, above "
                             f"its episode bound {b:.6g}: the bound and the runs are not of the same instance")
    return bounds


def gap_table(res, cells: dict, paper: str, best: str | None, bounds: dict | None = None) -> tuple[list[dict], str]:
    """The headroom of each agent to the bound, and how much of each reference's headroom a learner closes.

    Per instance (the mean over its runs): a score s is the share of the gap between random (0) and the
    oracle or bound (1) an agent closes, so 1 − s is the headroom it leaves. For a learner L and a reference
    agent R (the paper policy, the best non-learned policy), (s_L − s_R) / (1 − s_R) is the share of R's
    headroom that L closes: 1 at the bound, 0 level with R, negative below R. Means with 95% t-intervals
    over instances; an instance where R sits at the bound (1 − s_R ≤ 1e-9) has no such share and is left
    out of that column (the cell says how many instances it covers when some are). Beside it, the pooled share
    mean(s_L − s_R) / mean(1 − s_R) over every instance (``ratio_ci``, a delta-method interval): the share of R's
    headroom summed over instances that L closes, which an instance where R is within a hair of the bound cannot
    dominate (stored as ``closed[R]["pooled"]``). Runs without a score are
    scored against ``bounds`` (per instance, an episode bound that holds for every policy, e.g. P3's window
    bound); without either there is no table: ``([], "")``."""
    if not any(r.score is not None for r in res.runs) and not bounds:
        return [], ""
    refs = [a for a in dict.fromkeys([paper, best]) if a]
    ref_scores = {a: _scores(res, [a], paper, bounds) for a in refs}
    rows = []
    for name, agents in [*cells.items(), *((a, [a]) for a in refs), ("random", ["random"])]:
        s = _scores(res, agents, paper, bounds)
        sc = mean_ci(list(s.values()))
        row = {"learner": name, "learned": name in cells, "score": sc.mean, "score_low": sc.low,
               "score_high": sc.high, "headroom": 1.0 - sc.mean, "n_instances": len(s), "closed": {}}
        if name in cells:
            for ref, rs in ref_scores.items():
                shares = [(s[k] - rs[k]) / (1.0 - rs[k]) for k in s if k in rs and 1.0 - rs[k] > 1e-9]
                if shares:
                    ci = mean_ci(shares)
                    both = [k for k in s if k in rs]
                    pooled = ratio_ci([s[k] - rs[k] for k in both], [1.0 - rs[k] for k in both])
                    row["closed"][ref] = {"mean": ci.mean, "low": ci.low, "high": ci.high, "n": len(shares),
                                          "pooled": {"mean": pooled.mean, "low": pooled.low, "high": pooled.high,
                                                     "n": pooled.n}}
        rows.append(row)

    def closed(r, ref) -> str:
        c = r["closed"].get(ref)
        if c is None:
            return "– | –"
        ci = f"{c['mean']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]" if math.isfinite(c["low"]) else f"{c['mean']:+.3f}"
        p = c["pooled"]
        pci = f"{p['mean']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}]" if math.isfinite(p["low"]) else f"{p['mean']:+.3f}"
        return ci + (f" (n={c['n']})" if c["n"] < r["n_instances"] else "") + f" | {pci}"

    head = ("| agent | score: share of the random → bound gap closed [95% CI] | headroom left to the bound (1 − score) | "
            + " | ".join(f"share of {ref}'s headroom closed, per instance [95% CI] | pooled [95% CI]" for ref in refs)
            + " |")
    lines = [head, "|" + "---|" * (3 + 2 * len(refs))]
    for r in rows:
        ci = (f"{r['score']:.3f} [{r['score_low']:.3f}, {r['score_high']:.3f}]" if math.isfinite(r["score_low"])
              else f"{r['score']:.3f}")
        name = r["learner"] if r["learned"] else f"*{r['learner']}*"
        lines.append(f"| {name} | {ci} | {r['headroom']:.3f} | " + " | ".join(closed(r, ref) for ref in refs) + " |")
    return rows, "\n".join(lines)


def with_best_row(res, main_cells: dict, all_cells: dict) -> dict:
    """The main rows, and the learner row with the highest mean total of ``res`` when it is not one of them (an
    ablation row can be the benchmark's best learner; the table of every non-learned agent then shows it too)."""
    values = {k: _values_of(res, v) for k, v in all_cells.items()}
    mean = {k: float(np.mean(list(v.values()))) for k, v in values.items() if v}
    top = max(mean, key=mean.get, default=None)
    return {**main_cells, **({top: all_cells[top]} if top is not None and top not in main_cells else {})}


def reference_table(res, cells: dict) -> tuple[dict, str]:
    """Each learner against every non-learned agent of the held-out runs (the paper policy, its option rows, every
    baseline, random): per reference its mean total and the learner's paired relative difference of totals (mean
    over instances, 95% t-interval, wins/losses), references in decreasing mean total. The last line says, per
    learner, whether it is above every one of them (every interval's lower end above 0). Returns (the summary's
    entry: per learner, per reference, the comparison and ``above_every``; the markdown table)."""
    learned = {a for agents in cells.values() for a in agents}
    refs = [a for a in dict.fromkeys(r.agent for r in res.runs) if a not in learned and not a.startswith("sb3:")]
    totals = {a: _values_of(res, [a]) for a in refs}
    refs.sort(key=lambda a: -float(np.mean(list(totals[a].values()))))
    summary: dict = {}
    for name, agents in cells.items():
        v = _values_of(res, agents)
        comps = {}
        for a in refs:
            c = paired_comparison(v, totals[a], agent=name, reference=a)
            comps[a] = _cmp_record(c)
        summary[name] = {"mean_total_reward": float(np.mean(list(v.values()))), "vs": comps,
                         "above_every": bool(comps) and all(c["low"] > 0 for c in comps.values())}
    if not summary or not refs:
        return summary, ""
    lines = ["| non-learned agent | mean total | " + " | ".join(f"`{n}` vs it [95% CI] W/L" for n in summary) + " |",
             "|" + "---|" * (2 + len(summary))]
    for a in refs:
        lines.append(f"| {a} | {np.mean(list(totals[a].values())):,.1f} | "
                     + " | ".join(summary[n]["vs"][a]["text"] for n in summary) + " |")
    lines.append("| **above every non-learned agent** (every interval above 0) | – | "
                 + " | ".join("**yes**" if summary[n]["above_every"] else "no" for n in summary) + " |")
    return summary, "\n".join(lines)


LEARNER_COLORS = ("#D62728", "#1F77B4", "#8C564B", "#BCBD22", "#17BECF", "#E377C2")  # after the first learner


def _plot_curves(plan: EnvPlan, curves: dict, refs: dict, path: str, horizon: int) -> str:
    """One figure per env: validation mean total reward vs env steps and vs training wall time, mean over the
    training seeds with its 95% interval; the paper policy, the best baseline and random as lines."""
    fig, axes = figure(1, 2, size=(12, 3.8), sharey=True)
    main = {lr.name for lr in plan.main_rows()}
    for i, (name, seeds) in enumerate(curves.items()):
        steps = np.array([[p["steps_trained"] for p in s] for s in seeds]).mean(axis=0)
        y = np.array([[p["mean_total_reward"] for p in s] for s in seeds])
        wall = np.array([[p["wall_s"] for p in s] for s in seeds]).mean(axis=0)
        # every learner of the figure its own colour (they are all PPO); main rows solid, the others dotted
        color = agent_color(name) if i == 0 else LEARNER_COLORS[(i - 1) % len(LEARNER_COLORS)]
        for ax, x in ((axes[0], steps), (axes[1], wall)):
            mean_band(ax, x, y, f"{name} ({len(seeds)} seeds)", color, marker="o", ms=3,
                      ls="-" if name in main else ":")
    for label, val in refs.items():
        for ax in axes:
            ax.axhline(val, ls="--", lw=1.1, color=reference_color(label), label=label)
    axes[0].set_xlabel("env steps (fine-tuning steps for warm-started learners)")
    axes[1].set_xlabel("training wall time (s, behaviour cloning included)")
    axes[0].set_ylabel(f"validation mean total reward (horizon {horizon})")
    for ax in axes:
        ax.grid(alpha=0.3)
    figure_legend(fig, axes, fontsize=7)
    fig.suptitle(f"{plan.env_id.split('/')[-1]}: learners on validation instances (band: 95% interval over "
                 f"training seeds; solid: main rows, dotted: their budget rows)", fontsize=10)
    return save(fig, path)


class _Agents(list):
    """The sb3: agents of one learner (its training seeds) with the learner's metadata."""

    def __init__(self, agents, meta):
        super().__init__(agents)
        self.meta = meta


env_table, plot_curves = _env_table, _plot_curves
