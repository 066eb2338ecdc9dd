"""ESDP paper (esdp.md §4): reproduction and P1 benchmark rows."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["reproduce", "bench_rows"]


def reproduce(quick: bool, out: str, workers: int, progress: bool) -> str:
    """ESDP vs HAUF, LCF, LWTF, random (and the only_active option) on the paper scenario."""
    from clustergym.plots import _plt
    from clustergym.runner import evaluate

    env_id = "clustergym/MultiServerChannel-v0"
    horizon = 800 if quick else 8000  # quick: ESDP leads from the first 100 slots (see README figures)
    seeds = [0, 1] if quick else [0, 1, 2]
    baselines = ["hauf", "lcf", "lwtf"]
    agents = ["esdp", *baselines, "random", "esdp[only_active=true]"]
    res = evaluate(env_id, agents, seeds, horizon, workers=workers, progress=progress)
    d = os.path.join(out, "esdp")
    paths = res.write(d)
    table = res.table()
    print(table)

    # Fig. 3 style: ratio of ESDP's average reward to each baseline's, over t.
    plt = _plt()
    avg = {a: np.mean([np.cumsum(r.reward) / np.arange(1, r.steps + 1) for r in res.runs if r.agent == a], axis=0)
           for a in agents}
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for b in baselines:
        ax.plot(np.arange(1, horizon + 1), avg["esdp"] / avg[b], label=f"ESDP / {b.upper()}")
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set_xlabel("time slot t")
    ax.set_ylabel("ratio of average rewards")
    ax.set_title("ESDP vs baselines (esdp.md Fig. 3 style), mean over seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    ratio_png = os.path.join(d, "esdp_ratio.png")
    fig.savefig(ratio_png)
    plt.close(fig)

    summ = {s["agent"]: s for s in res.summary()}
    impr = {b: (summ["esdp"]["mean_total_reward"] / summ[b]["mean_total_reward"] - 1) * 100 for b in baselines}
    q = horizon // 4
    esdp_runs = [r for r in res.runs if r.agent == "esdp"]
    per_slot = np.mean([np.diff(np.concatenate([[0.0], r.cum_regret])) for r in esdp_runs], axis=0)
    first_q, last_q = float(per_slot[:q].mean()), float(per_slot[-q:].mean())
    best = max(summ, key=lambda a: summ[a]["mean_total_reward"])
    paper = {"hauf": 73, "lcf": 36, "lwtf": 28}
    lines = [
        f"# ESDP reproduction ({'quick' if quick else 'full'} mode)",
        "",
        f"`{env_id}`, paper scenario (esdp.md Table 3; capacity_ratio 0.25), horizon {horizon}, "
        f"seeds {seeds}, common random numbers across agents.",
        "",
        "```",
        table,
        "```",
        "",
        "| ESDP vs | ours: total-reward improvement | paper (§4.1, 8000 slots) |",
        "|---|---|---|",
        *[f"| {b.upper()} | {impr[b]:+.1f}% | up to {paper[b]}% |" for b in baselines],
        "",
        "The paper lists 73%, 36%, 28% for its three baselines without saying which number belongs "
        "to which; we pair them in the order the baselines are introduced (HAUF, LCF, LWTF).",
        "",
        f"- Highest mean total reward: **{best}**.",
        f"- ESDP average per-slot regret: first quarter {first_q:.4f}, last quarter {last_q:.4f} "
        f"({'decreasing' if last_q < first_q else 'NOT decreasing'}).",
        f"- `esdp[only_active=true]` is the documented improvement (solves over Ω(t) instead of Φ(t)); "
        "plain `esdp` is the paper's Algorithm 1.",
        "",
        "![average reward](avg_reward.png)",
        "![cumulative regret](cumulative_regret.png)",
        "![ratio](esdp_ratio.png)",
        "",
    ]
    report = os.path.join(d, "report.md")
    with open(report, "w") as f:
        f.write("\n".join(lines))
    print(f"ESDP improvement over " + ", ".join(f"{b.upper()} {impr[b]:+.1f}% (paper up to {paper[b]}%)" for b in baselines))
    print(f"ESDP per-slot regret: first quarter {first_q:.4f}, last quarter {last_q:.4f}")
    print("wrote " + ", ".join(paths + [ratio_png, report]))
    return report


def bench_rows(quick: bool):
    from clustergym.bench import esdp_rows, p1_env_steps, p1_oracle, p1_vector_steps, ppo_rate, sampled_action_rate

    env_id = "clustergym/MultiServerChannel-v0"
    return [p1_env_steps(quick), sampled_action_rate(env_id, "P1", 1_000 if quick else 5_000), p1_vector_steps(quick),
            p1_oracle(quick), *esdp_rows(quick), ppo_rate(env_id, "P1", quick)]
