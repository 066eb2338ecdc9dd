"""OPM paper (opm.md §VI): reproduction of Table I and Figs. 1–3, and the P4 benchmark rows.

All runs use ``clustergym/ApproxJobs-v0`` on the default synthetic scenario (M=100, J_max=20;
``scenario.py`` documents every choice) with common random numbers: for a seed, every agent sees
the same jobs and the same machine service-rate realisation.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

__all__ = ["reproduce", "bench_rows", "episode", "PAPER_TABLE1"]

ENV = "clustergym/ApproxJobs-v0"
# Table I (overall utility). The paper prints 1.29 × 10^5 for Fair at β = 0.7; its text ("OPM
# increases the overall utility by 30% and 34%") implies 1.29 × 10^6, which we use.
PAPER_TABLE1 = {0.5: {"opm": 2.23e5, "opm-noest": 2.06e5, "fair": 2.02e5, "edf": 2.00e5},
                0.6: {"opm": 6.18e5, "opm-noest": 5.67e5, "fair": 5.09e5, "edf": 5.08e5},
                0.7: {"opm": 1.71e6, "opm-noest": 1.54e6, "fair": 1.29e6, "edf": 1.28e6}}
PAPER_FIG2 = "heavy load: OPM +47% over Fair at β=0.9; light load: +56% at β=0.9"
PAPER_FIG3 = "β=0.8, heavy: improvement over Fair falls from 40% to 17% and migrations from ~20% to ~3% of servers as α grows tenfold"
BASE = ["opm", "opm-noest", "fair", "edf"]
LABEL = {"opm": "OPM", "opm-noest": "OPM without estimation", "fair": "Fair", "edf": "Deadline-aware (EDF)"}


def episode(env_kw: dict, agent: str, seed: int, records: bool = False) -> dict:
    """One episode; returns utility, spending, migrations, timings (and per-job records)."""
    import gymnasium as gym

    import clustergym  # noqa: F401
    from clustergym.agent import make, public_info

    env = gym.make(ENV, **env_kw).unwrapped
    ag = make(agent, family=env.family)
    obs, info = env.reset(seed=seed)
    ag.reset(env.problem, seed=seed)
    dec, migr, busy, repaired = [], 0.0, 0.0, 0
    t0 = time.perf_counter()
    steps = 0
    while True:
        d0 = time.perf_counter()
        a = ag.act(obs, public_info(info))
        dec.append(time.perf_counter() - d0)
        nxt, r, term, trunc, info = env.step(a)
        ag.update(obs, a, r, nxt, public_info(info))
        m = info["metrics"]
        migr += m["migration_rate"]
        busy += m["busy"]
        repaired += m["repaired"]
        obs = nxt
        steps += 1
        if term or trunc:
            break
    wall = time.perf_counter() - t0
    out = {"agent": agent, "seed": seed, "env_kwargs": env_kw, "steps": steps, "wall_s": wall,
           "total_reward": float(m["episode_utility"]), "budget_spent": float(m["episode_budget_spent"]),
           "fit": float(m["episode_fit"]), "repaired": int(repaired), "migration_rate": migr / steps,
           "busy": busy / steps, "decision_ms_median": float(np.median(dec) * 1000),
           "metrics": {k: v for k, v in m.items() if k.startswith("episode_")}}
    if records:
        out["records"] = {k: v.tolist() for k, v in env.job_records().items()}
    return out


def _task(args):
    return episode(*args)


def _run_all(tasks: list, workers: int, progress: bool) -> list[dict]:
    from tqdm.auto import tqdm

    bar = tqdm(total=len(tasks), desc="opm runs", leave=False, disable=not progress)
    out: list = [None] * len(tasks)
    try:
        if workers <= 1:
            for i, t in enumerate(tasks):
                out[i] = _task(t)
                bar.update(1)
        else:
            from concurrent.futures import as_completed

            from clustergym.runner import worker_pool

            with worker_pool(workers) as ex:
                futs = {ex.submit(_task, t): i for i, t in enumerate(tasks)}
                for f in as_completed(futs):
                    out[futs[f]] = f.result()
                    bar.update(1)
    finally:
        bar.close()
    return out


def _mean(runs, agent, price="paper", **kw):
    v = [r["total_reward"] for r in runs if r["agent"] == agent and r["env_kwargs"].get("price", "paper") == price
         and all(r["env_kwargs"].get(k) == x for k, x in kw.items())]
    return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v)


def reproduce(quick: bool, out: str, workers: int, progress: bool) -> str:
    """Table I (β = 0.5, 0.6, 0.7), Fig. 1 CDFs, Fig. 2 heavy/light load, Fig. 3 α sweep."""
    from clustergym.agents.opm import theorem3_parameters
    from clustergym.plots import _plt

    horizon = 1000 if quick else 4000
    seeds = [0, 1, 2]
    betas = [0.5, 0.6, 0.7, 0.8, 0.9]
    loads = {"heavy": 1.0, "light": 0.5}
    # Documented options: α = 6 is the paper's Fig. 3 recommendation; α = 0.06 the best of our α sweep.
    options = ["opm[alpha=0.06]", "opm-noest[alpha=0.06]", "opm[alpha=6]", "opm-noest[alpha=6]"]
    pairs = [("opm", "opm-noest"), ("opm[alpha=0.06]", "opm-noest[alpha=0.06]"), ("opm[alpha=6]", "opm-noest[alpha=6]")]
    alphas = [theorem3_parameters(100, horizon)["alpha"], 0.06, 0.2, 0.6, 2.0, 6.0]
    d = os.path.join(out, "opm")
    os.makedirs(d, exist_ok=True)

    tasks = []
    for lname, load in loads.items():
        for b in betas:
            kw = dict(horizon=horizon, beta=b, load=load)
            for a in BASE + (options if load == 1.0 else []):
                for s in seeds:
                    tasks.append((kw, a, s, b == 0.5 and load == 1.0))
    for b in (0.5, 0.6, 0.7):  # option price="uniform": p_i independent of θ_i, so estimation can pay
        kw = dict(horizon=horizon, beta=b, load=1.0, price="uniform")
        for a in BASE + options[:2]:
            for s in seeds:
                tasks.append((kw, a, s, False))
    for al in alphas:
        kw = dict(horizon=horizon, beta=0.8, load=1.0)
        if f"opm[alpha={al:.6g}]" in options:
            continue  # already run at β = 0.8, heavy load
        for s in seeds:
            tasks.append((kw, f"opm[alpha={al:.6g}]", s, False))
    t0 = time.perf_counter()
    runs = _run_all(tasks, workers, progress)
    total_wall = time.perf_counter() - t0

    # -- Table I -------------------------------------------------------------------------------
    agents_t1 = BASE + options
    lines = ["| agent | " + " | ".join(f"β={b}: ours (mean ± std, 3 seeds) | paper" for b in (0.5, 0.6, 0.7)) + " |",
             "|---|" + "---|---|" * 3]
    order_ok = {}
    for a in agents_t1:
        cells = []
        for b in (0.5, 0.6, 0.7):
            m, sd, n = _mean(runs, a, beta=b, load=1.0)
            paper = PAPER_TABLE1[b].get(a)
            cells.append(f"{m:,.0f} ± {sd:,.0f} | " + (f"{paper:.3g}" if paper else "–"))
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    pct = ["", "| OPM vs | " + " | ".join(f"β={b}: ours | paper" for b in (0.5, 0.6, 0.7)) + " |", "|---|" + "---|---|" * 3]
    for base in ("opm-noest", "fair", "edf"):
        cells = []
        for b in (0.5, 0.6, 0.7):
            ours = (_mean(runs, "opm", beta=b, load=1.0)[0] / _mean(runs, base, beta=b, load=1.0)[0] - 1) * 100
            paper = (PAPER_TABLE1[b]["opm"] / PAPER_TABLE1[b][base] - 1) * 100
            cells.append(f"{ours:+.1f}% | {paper:+.1f}%")
        pct.append(f"| {base} | " + " | ".join(cells) + " |")
    order_lines = ["", "| ordering (heavy load) | β=0.5 | β=0.6 | β=0.7 |", "|---|---|---|---|"]
    for price in ("paper", "uniform"):
        for variant, noest in (pairs if price == "paper" else pairs[:2]):
            ok1, ok2 = [], []
            for b in (0.5, 0.6, 0.7):
                u = {a: _mean(runs, a, price=price, beta=b, load=1.0)[0] for a in (variant, noest, "fair", "edf")}
                ok1.append(u[variant] > u[noest])
                ok2.append(u[noest] > max(u["fair"], u["edf"]))
                order_ok[(price, variant, b)] = (ok1[-1], ok2[-1], u[variant] > max(u["fair"], u["edf"]))
            tag = "" if price == "paper" else " (price=uniform)"
            order_lines.append(f"| {variant} > {noest}{tag} | " + " | ".join("yes" if o else "**no**" for o in ok1) + " |")
            order_lines.append(f"| {noest} > max(fair, edf){tag} | " + " | ".join("yes" if o else "**no**" for o in ok2) + " |")
            order_lines.append(f"| {variant} > max(fair, edf){tag} | " + " | ".join(
                "yes" if order_ok[(price, variant, b)][2] else "**no**" for b in (0.5, 0.6, 0.7)) + " |")
    uni = ["", "Option `price=\"uniform\"` (p_i ~ U[0.2, 1] independent of θ_i), heavy load:", "",
           "| agent | β=0.5 | β=0.6 | β=0.7 |", "|---|---|---|---|"]
    for a in BASE + options[:2]:
        uni.append(f"| {a} | " + " | ".join("{:,.0f} ± {:,.0f}".format(*_mean(runs, a, price="uniform", beta=b, load=1.0)[:2])
                                            for b in (0.5, 0.6, 0.7)) + " |")
    order_lines += uni

    plt = _plt()
    # -- Fig. 1: CDFs at β = 0.5 -----------------------------------------------------------------
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for a in BASE:
        recs = [r["records"] for r in runs if r["agent"] == a and "records" in r]
        spent = np.concatenate([r["spent"] for r in recs])
        util = np.concatenate([r["utility"] for r in recs])
        budget = np.concatenate([r["budget"] for r in recs])
        served = util > 0
        ctu = np.sort(spent[served] / util[served])
        ax.plot(ctu, np.arange(1, ctu.size + 1) / spent.size, label=LABEL[a])
        used = np.sort(spent / budget)
        bx.plot(used, np.arange(1, used.size + 1) / used.size, label=LABEL[a])
    ax.set_xlabel("computation cost / utility (per job)")
    ax.set_ylabel("CDF of jobs")
    ax.set_title("Fig. 1a style, β=0.5 (unserved jobs count as ∞)")
    bx.set_xlabel("computation cost / budget (per job)")
    bx.set_title("Fig. 1b style, β=0.5")
    for z in (ax, bx):
        z.grid(alpha=0.3)
        z.legend(fontsize=8)
    fig.tight_layout()
    fig1 = os.path.join(d, "opm_fig1_cdfs.png")
    fig.savefig(fig1)
    plt.close(fig)

    # -- Fig. 2: heavy vs light load -------------------------------------------------------------
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=110, sharey=False)
    fig2_rows = ["| load | β | " + " | ".join(BASE) + " | OPM vs Fair |", "|---|---|" + "---|" * len(BASE) + "---|"]
    for ax, (lname, load) in zip(axes, loads.items()):
        x = np.arange(len(betas))
        w = 0.2
        for k, a in enumerate(BASE):
            ms = [_mean(runs, a, beta=b, load=load) for b in betas]
            ax.bar(x + (k - 1.5) * w, [m for m, _, _ in ms], w, yerr=[s for _, s, _ in ms], label=LABEL[a])
        for b in betas:
            u = {a: _mean(runs, a, beta=b, load=load)[0] for a in BASE}
            fig2_rows.append(f"| {lname} | {b} | " + " | ".join(f"{u[a]:,.0f}" for a in BASE)
                             + f" | {(u['opm'] / u['fair'] - 1) * 100:+.1f}% |")
        ax.set_xticks(x, [f"β={b}" for b in betas])
        ax.set_yscale("log")
        ax.set_title(f"{lname} load (load={load})")
        ax.set_ylabel("overall utility Σ_j f_j(X_j)")
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    fig.suptitle("Fig. 2 style: overall utility vs β, heavy and light load (mean ± std over 3 seeds)")
    fig.tight_layout()
    fig2 = os.path.join(d, "opm_fig2_load.png")
    fig.savefig(fig2)
    plt.close(fig)

    # -- Fig. 3: α sweep ------------------------------------------------------------------------
    fair08 = _mean(runs, "fair", beta=0.8, load=1.0)[0]
    imp, mig = [], []
    for al in alphas:
        name = f"opm[alpha={al:.6g}]"
        rs = [r for r in runs if r["agent"] == name and r["env_kwargs"]["beta"] == 0.8
              and r["env_kwargs"]["load"] == 1.0 and r["env_kwargs"].get("price", "paper") == "paper"]
        imp.append((np.mean([r["total_reward"] for r in rs]) / fair08 - 1) * 100)
        mig.append(np.mean([r["migration_rate"] for r in rs]) * 100)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    ax.semilogx(alphas, imp, "o-")
    ax.axhline(0, color="0.5", lw=0.8, ls="--")
    ax.set_xlabel("α (learning rate)")
    ax.set_ylabel("utility improvement over Fair (%)")
    ax.set_title("Fig. 3a style (β=0.8, heavy load)")
    bx.semilogx(alphas, mig, "o-", color="tab:red")
    bx.set_xlabel("α (learning rate)")
    bx.set_ylabel("machines with a migration per slot (%)")
    bx.set_title("Fig. 3b style")
    for z in (ax, bx):
        z.grid(alpha=0.3)
    fig.tight_layout()
    fig3 = os.path.join(d, "opm_fig3_alpha.png")
    fig.savefig(fig3)
    plt.close(fig)
    fair_mig = np.mean([r["migration_rate"] for r in runs if r["agent"] == "fair" and r["env_kwargs"]["beta"] == 0.8
                        and r["env_kwargs"]["load"] == 1.0 and r["env_kwargs"].get("price", "paper") == "paper"]) * 100
    fig3_rows = ["| α | OPM vs Fair (utility) | migrations (% of machines per slot) |", "|---|---|---|"]
    fig3_rows += [f"| {al:.4g}{' (Theorem 3)' if i == 0 else ''} | {u:+.1f}% | {m:.1f}% |"
                  for i, (al, u, m) in enumerate(zip(alphas, imp, mig))]
    fig3_rows.append(f"| Fair (reference) | 0% | {fair_mig:.1f}% |")

    budget_rows = ["| agent (β=0.5, heavy) | median cost/utility | median budget used | jobs using < 90% of budget | repaired tasks | Fit_T |",
                   "|---|---|---|---|---|---|"]
    for a in BASE:
        rs = [r for r in runs if r["agent"] == a and "records" in r]
        spent = np.concatenate([r["records"]["spent"] for r in rs])
        budget = np.concatenate([r["records"]["budget"] for r in rs])
        util = np.concatenate([r["records"]["utility"] for r in rs])
        ctu = np.where(util > 0, spent / np.maximum(util, 1e-300), np.inf)
        budget_rows.append(f"| {a} | {np.median(ctu):.2f} | {np.median(spent / budget):.2f} | "
                           f"{np.mean(spent / budget < 0.9) * 100:.0f}% | {sum(r['repaired'] for r in rs)} | "
                           f"{max(r['fit'] for r in rs):g} |")

    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump({"env_id": ENV, "horizon": horizon, "seeds": seeds, "wall_s": total_wall,
                   "runs": [{k: v for k, v in r.items() if k != "records"} for r in runs]}, f, indent=1)
    with open(os.path.join(d, "table1.md"), "w") as f:
        f.write("\n".join(lines + pct + order_lines) + "\n")
    report = os.path.join(d, "report.md")
    text = [
        f"# OPM reproduction ({'quick' if quick else 'full'} mode)",
        "",
        f"`{ENV}`, default synthetic scenario (M=100 machines, J_max=20, Gamma AP/UP service, "
        f"price = 2 × mean rate), horizon {horizon}, seeds {seeds}; common random numbers across agents. "
        f"{len(runs)} runs in {total_wall:.0f} s with {workers} worker(s).",
        "",
        "## Table I (overall utility, heavy load)",
        "",
        *lines, *pct, *order_lines,
        "",
        "`opm`/`opm-noest` use Theorem 3's parameters (α = 1/(2√T)); `[alpha=6]` is the paper's Fig. 3 "
        "setting, `[alpha=0.06]` the best α of our sweep (reported as an option, not a default). The paper's absolute numbers come from a 1000-machine Google-trace simulation we do "
        "not have; compare orderings and percentages.",
        "",
        "## Fig. 1 (β = 0.5): cost effectiveness",
        "",
        *budget_rows,
        "",
        "![Fig. 1](opm_fig1_cdfs.png)",
        "",
        f"## Fig. 2: heavy vs light load (paper: {PAPER_FIG2})",
        "",
        *fig2_rows,
        "",
        "![Fig. 2](opm_fig2_load.png)",
        "",
        f"## Fig. 3: learning rate α (paper: {PAPER_FIG3})",
        "",
        *fig3_rows,
        "",
        "![Fig. 3](opm_fig3_alpha.png)",
        "",
    ]
    with open(report, "w") as f:
        f.write("\n".join(text))
    print("\n".join(lines + pct + order_lines))
    print("\n".join(fig2_rows))
    print("\n".join(fig3_rows))
    print("\n".join(budget_rows))
    print(f"wrote {report}, {fig1}, {fig2}, {fig3} ({total_wall:.0f} s)")
    return report


# -- benchmarks ----------------------------------------------------------------------------------


def _env_steps(quick: bool):
    import gymnasium as gym

    import clustergym  # noqa: F401
    from clustergym.agent import make
    from clustergym.bench import Row

    env = gym.make(ENV, horizon=10**9)
    ag = make("random", family="approxjobs")
    obs, info = env.reset(seed=0)
    ag.reset(env.unwrapped.problem, seed=0)
    for _ in range(20):  # warm-up, untimed (first calls load compiled code and caches)
        obs, r, term, trunc, info = env.step(ag.act(obs, info))
    n = 5_000 if quick else 30_000
    spent = 0.0
    for _ in range(n):
        a = ag.act(obs, info)  # a random *valid* action (budgets respected)
        t0 = time.perf_counter()
        obs, r, term, trunc, info = env.step(a)
        spent += time.perf_counter() - t0
    rate = n / spent
    return Row("P4 env step (M=100, J_max=20, gym.make, random valid actions)", rate, "steps/s", ">= 5,000", rate >= 5_000)


def _opm_decision(quick: bool):
    import gymnasium as gym

    import clustergym  # noqa: F401
    from clustergym.agent import make, public_info
    from clustergym.bench import Row

    # Enough long-lived jobs that the 100-slot window stays full.
    env = gym.make(ENV, num_machines=1000, max_jobs=100, horizon=10**6, arrival_rate=2.0, life_min=5000,
                   life_max=6000).unwrapped
    ag = make("opm", family="approxjobs")
    obs, info = env.reset(seed=0)
    ag.reset(env.problem, seed=0)
    n = 150 if quick else 600
    times, active = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        a = ag.act(obs, public_info(info))
        times.append(time.perf_counter() - t0)
        active.append(int(obs["job_mask"].sum()))
        nxt, r, term, trunc, info = env.step(a)
        ag.update(obs, a, r, nxt, public_info(info))
        obs = nxt
    times, active = np.array(times), np.array(active)
    full = times[active == 100]
    ms = float(np.median(full) * 1000)
    return [Row(f"OPM decision, M=1000, 100 active jobs ({full.size} slots)", ms, "ms median", "<= 10 ms", ms <= 10.0),
            Row("OPM decision, M=1000, 100 active jobs, p95", float(np.percentile(full, 95) * 1000), "ms", "", None)]


def _paper_scale(quick: bool):
    from clustergym.bench import Row

    if quick:
        r = episode(dict(scale="paper", horizon=2000), "opm", 0)
        return [Row("P4 paper scale (M=1000), OPM, first 2,000 of 50,000 slots (quick)", r["wall_s"], "s", "(completes)", True)]
    r = episode(dict(scale="paper"), "opm", 0)
    ok = r["steps"] == 50_000
    return [Row("P4 paper scale run: OPM, M=1000, 50,000 slots, wall time", r["wall_s"], "s", "(completes)", ok),
            Row("  its OPM decision median", r["decision_ms_median"], "ms", "", None)]


def bench_rows(quick: bool):
    from clustergym.bench import ppo_rate, sampled_action_rate

    return [_env_steps(quick), sampled_action_rate(ENV, "P4", 2_000 if quick else 10_000), *_opm_decision(quick),
            *_paper_scale(quick), ppo_rate(ENV, "P4", quick)]
