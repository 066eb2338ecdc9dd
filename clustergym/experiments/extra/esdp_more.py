"""ESDP paper: the sensitivity and scalability experiments of esdp.md §4.2–4.3 and regret against the
horizon, as claims rows over instances (scenario seeds; dynamics seed = instance, as ``reproduce esdp``).

- **δ(t) sweep (Fig. 7).** ESDP with each δ(t) of Fig. 7 (``agents/esdp.py`` ``DELTAS``: "log" =
  (ln(t+1)+1)⁻¹, "loglog" = (ln(ln(t+1)+1))⁻¹, "logloglog" = (ln(ln(ln(t+1)+1))+1)⁻¹) beside the
  default (ln(ln(t+1)+1)+1)⁻¹ (eq. 14). The paper: "little effect on the performance of ESDP, but
  strong affect on the computation overhead". Claims: (a) a tie in total reward within
  ±:data:`TIE_TOL` % of the oracle total (our tolerance: the paper gives none); (b) the median
  decision time differs from the default's in the direction eqs. 18–19 predict: ξ(t) = ⌈α|E|/δ(t)⌉
  and S(t) = {0, …, ⌊ξ(t)·α|E|⌋}, so a smaller δ(T) means more DP cells (the paper states no
  direction; we predict it from δ at the horizon, :func:`overhead_direction`).
- **g(t) sweep (Fig. 8).** ESDP with g(t) = 4 ln(ln(t+1)+1)·α|E| ("loglog") and g(t) = ln(t+1)
  ("log") beside the default ln(t+1) + 4 ln(ln(t+1)+1)·α|E| (eq. 11 as set in the paper's default
  settings). The paper: "the third setting [ln(t+1)] has an overwhelming advantage". Claims: ESDP
  with g = ln(t+1) beats the default and beats g = 4 ln(ln(t+1)+1)·α|E| (no size given).
- **|R| sweep (Fig. 12).** ESDP and the baselines at |R| ∈ :data:`SERVERS` (channel probability 0.1,
  capacity_ratio 0.25: the cluster's capacity grows with its channels, "a large cluster can provide
  sufficient computing devices"). The paper states both "whatever the number of the node is, ESDP
  takes the leading position" and "when |R| increases from 60 to 80, HAUF achieves a higher AOU than
  ESDP"; its figure is not in the text we have, so the values of |R| are ours (20–80, the paper's
  default 40 and its 60–80 included). Claims: ESDP beats the best baseline (per instance) at every
  |R|; HAUF beats ESDP at |R| = 60 and 80, under HAUF's default reading and its channel reading
  (docs/esdp.md "HAUF's readings"); every agent's total reward is larger at the largest |R| than at
  the smallest (paired by scenario seed; the graphs differ between sizes).
- **Regret against T (Theorem 2, Figs. 4 and 13).** From the main study's own runs (ESDP and the
  baselines do not depend on the horizon, so R(T) of a T-slot run is the first T slots of a longer
  one with the same seed, tested): R(T) at T = H/8, H/4, H/2, H (full mode: 1000 … 8000). Claims per
  ESDP variant and doubling T/2 → T: the local growth exponent b = log₂(R(T)/R(T/2)) against the
  midpoint between c·ln T's exponent log₂(ln T / ln(T/2)) and √T's ½ (the rule of ``reproduce
  esdp``'s regret rows, over a doubling instead of [T/4, T]); Fig. 13's "ESDP always performs the
  best" at each T (vs the best baseline per instance) and "its performance has a positive correlation
  with T" (ESDP's average reward per slot over the whole run vs over the first H/8 slots).

The δ(t), g(t) and |R| sweeps cost many ESDP decisions (an ESDP decision at |R| = 80 takes about
1.2 s against 0.05 s at |R| = 40, measured at 300 slots): they run in full mode (20 instances, 2000
slots, Table 3's T) and a quick report lists them as full mode only. Regret against T reads the
study's runs and costs nothing: it is in both modes. ``python -m clustergym.experiments.extra.cli esdp``
runs one experiment alone at any size.
"""

from __future__ import annotations

import math
import os

import numpy as np

from clustergym.core import stats
from clustergym.envs.multiserver.channel.scenario import make_channel_scenario
from clustergym.experiments import instances_for, write_summary
from clustergym.runner.evaluation import evaluate
from clustergym.agents.esdp import DELTAS, GS

__all__ = ["sequence_study", "sequence_rows", "sequence_table", "servers_study", "servers_rows", "servers_table",
           "regret_at", "regret_vs_horizon", "overhead_direction", "run", "section", "write"]

ENV_ID = "clustergym/MultiServerChannel-v0"
BASELINES = ("hauf", "lcf", "lwtf")
HAUF_CHANNELS = 'hauf[rank="channels",skip_unfit=true]'  # HAUF's channel reading (docs/esdp.md)
# Fig. 7's sequences (esdp.md §4.2), as the agent names them, with the formula the report prints.
DELTA_VARIANTS = {"log": "(ln(t+1)+1)⁻¹", "loglog": "(ln(ln(t+1)+1))⁻¹", "logloglog": "(ln(ln(ln(t+1)+1))+1)⁻¹"}
DELTA_DEFAULT = "(ln(ln(t+1)+1)+1)⁻¹"
# Fig. 8's sequences: the default is the first of the paper's three.
G_VARIANTS = {"loglog": "4 ln(ln(t+1)+1)·α|E|", "log": "ln(t+1)"}
G_DEFAULT = "ln(t+1) + 4 ln(ln(t+1)+1)·α|E|"
# "Little effect": a tie within this many percent of the oracle total (ours; the paper gives no number).
TIE_TOL = 5.0
SERVERS = (20, 40, 60, 80)  # Fig. 12's |R| (ours: the paper's default 40 and its 60–80 included)
HAUF_AHEAD = (60, 80)  # "when |R| increases from 60 to 80, HAUF achieves a higher AOU than ESDP"
SERVER_AGENTS = ("esdp", "hauf", HAUF_CHANNELS, "lcf", "lwtf")
SWEEP_HORIZON = 2000  # Table 3's T
TINY = {"horizon": 12, "servers": (20, 60)}  # tests of the machinery: the numbers mean nothing
ORACLE_BASIS = "the instance's oracle total Σ_t max_{x∈Ω(t)} ṽᵀx (the same for every agent)"
ESDP_VARIANTS = ("esdp", "esdp[only_active=true]")


def _md(text: str) -> str:
    """``text`` for a cell of a markdown table (its |s escaped: |E|, |R|)."""
    return text.replace("|", "\\|")


def _spec(option: str, name: str) -> str:
    return f'esdp[{option}="{name}"]'


CELLS = "agent_dp_cells_per_decision"  # ESDP's DP cells (s, c', i) per decision: the computation, machine-free


def overhead_direction(name: str, horizon: int) -> int:
    """+1 when δ = ``name`` is smaller than the default δ at slot ``horizon`` (more DP cells: eqs. 18–19,
    so a larger decision time expected), −1 when larger."""
    return +1 if DELTAS[name](horizon) < DELTAS["default"](horizon) else -1


def _evaluate(agents, instances, horizon, env_kwargs, workers, progress):
    insts = [int(i) for i in instances]
    return evaluate(ENV_ID, list(agents), insts, horizon, env_kwargs={"oracle": True, **env_kwargs},
                    workers=workers, progress=progress, score=False)


# -- Figs. 7-8: the δ(t) and g(t) sequences ---------------------------------------------------------


def sequence_study(horizon: int, instances, workers: int = 1, progress: bool = False):
    """ESDP with the default sequences and every δ(t) of Fig. 7 and g(t) of Fig. 8 on ``instances``
    (seed = instance), oracle on; one ``evaluate`` call, returns its Results."""
    agents = ["esdp", *(_spec("delta", n) for n in DELTA_VARIANTS), *(_spec("g", n) for n in G_VARIANTS)]
    return _evaluate(agents, instances, horizon, {}, workers, progress)


def sequence_rows(res) -> list[dict]:
    """Claims rows of Figs. 7–8 from a :func:`sequence_study` (module docstring)."""
    oracle = res.per_instance("esdp", "oracle_total")
    T = res.horizon

    def vs(agent, ref="esdp"):
        return stats.paired_comparison(res.per_instance(agent), res.per_instance(ref), agent=agent, reference=ref,
                                       scale=oracle, basis=ORACLE_BASIS)

    rows = []
    for name, formula in DELTA_VARIANTS.items():
        a = _spec("delta", name)
        rows.append(dict(claim=f"Fig. 7: δ(t) = {formula} instead of {DELTA_DEFAULT}: total reward within "
                               f"±{TIE_TOL:g}% of the oracle total ({T} slots)",
                         paper="little effect on the AOU", comparison=vs(a), predicted=0, tol=TIE_TOL))
        sign = overhead_direction(name, T)
        # The overhead is judged on the DP cells evaluated per decision (the same count on every machine); the
        # median decision time, which no other machine reproduces, is shown in the sequence table beside it.
        t = stats.paired_comparison(res.per_instance(a, CELLS), res.per_instance("esdp", CELLS), agent=a,
                                    reference="esdp")
        side = "above" if sign > 0 else "below"
        rows.append(dict(claim=_md(f"Fig. 7: δ(t) = {formula}: DP cells per decision {side} the default's (δ({T}) = "
                                   f"{DELTAS[name](T):.3f} vs {DELTAS['default'](T):.3f}; eqs. 18–19: S(t) has "
                                   "⌊α|E|·⌈α|E|/δ⌉⌋ + 1 values)"),
                         paper="strong effect on the computation overhead", comparison=t, predicted=sign))
    for ref, lab in (("esdp", f"the default g(t) = {G_DEFAULT}"),
                     (_spec("g", "loglog"), f"g(t) = {G_VARIANTS['loglog']}")):
        rows.append(dict(claim=_md(f"Fig. 8: ESDP with g(t) = ln(t+1) beats ESDP with {lab} ({T} slots)"),
                         paper="g(t) = ln(t+1) has an overwhelming advantage", comparison=vs(_spec("g", "log"), ref),
                         predicted=+1))
    return rows


def sequence_table(res) -> str:
    """Per sequence: its value at the horizon, share of the oracle, total reward vs the default (% of
    the oracle total) and the median decision time, each over instances."""
    T = res.horizon
    oracle = res.per_instance("esdp", "oracle_total")
    lines = [f"| ESDP variant | value at t = {T} | share of the oracle's expected reward [95% bootstrap] | total reward "
             "vs default, % of the oracle total [95% t] (W/L) | DP cells per decision, mean [95% t] | "
             "median decision ms, mean [95% t] |",
             "|---|---|---|---|---|---|"]
    m = _m(res)
    variants = [("esdp", f"default: δ = {DELTA_DEFAULT}, g = {G_DEFAULT}",
                 f"δ = {DELTAS['default'](T):.3f}, g = {GS['default'](T, m):.1f}")]
    variants += [(_spec("delta", n), f"δ = {f}", f"δ = {DELTAS[n](T):.3f}") for n, f in DELTA_VARIANTS.items()]
    variants += [(_spec("g", n), f"g = {f}", f"g = {GS[n](T, m):.1f}") for n, f in G_VARIANTS.items()]
    for a, lab, value in variants:
        share = {i: 100 * r.value_total / r.bound_total for i, r in _by_instance(res, a).items()}
        c = stats.paired_comparison(res.per_instance(a), res.per_instance("esdp"), scale=oracle, basis=ORACLE_BASIS)
        cmp_ = "—" if a == "esdp" else f"{stats.fmt_ci(c)} ({c.wins}/{c.losses})"
        dm = stats.mean_ci(list(res.per_instance(a, "decision_ms_median").values()))
        cells = list(res.per_instance(a, CELLS).values())
        cm = f"{stats.fmt_ci(stats.mean_ci(cells), unit='', signed=False, digits=0)}" if cells else "–"
        lines.append(f"| {_md(lab)} (`{a}`) | {value} | "
                     f"{stats.fmt_ci(stats.mean_ci(list(share.values()), bounds=(0.0, 100.0)), signed=False)} | {cmp_} | "
                     f"{cm} | {stats.fmt_ci(dm, unit='', signed=False)} |")
    return "\n".join(lines)


def _m(res) -> float:
    """α|E| averaged over the instances (the m of g(t) with α = 0.5), for the table's values of g."""
    return float(np.mean([0.5 * make_channel_scenario("paper", seed=int(i)).problem.num_edges
                          for i in res.instances]))


def _by_instance(res, agent) -> dict:
    """``{instance: run}`` of one agent (one dynamics seed per instance, as in these studies)."""
    return {r.instance: r for r in res.runs if r.agent == agent}


# -- Fig. 12: the number of servers ---------------------------------------------------------------


def servers_study(servers, horizon: int, instances, workers: int = 1, progress: bool = False) -> dict:
    """ESDP, HAUF (default and channel reading), LCF and LWTF at each ``num_servers`` = |R|:
    ``{|R|: Results}`` (instances × seed = instance, oracle on)."""
    return {int(R): _evaluate(SERVER_AGENTS, instances, horizon, {"num_servers": int(R)}, workers, progress)
            for R in servers}


def servers_rows(studies: dict) -> list[dict]:
    """Claims rows of Fig. 12 from a :func:`servers_study` (module docstring)."""
    rows = []
    Rs = sorted(studies)
    for R in Rs:
        res = studies[R]
        tot = {a: res.per_instance(a) for a in ("esdp", *BASELINES)}
        best = {i: max(tot[b][i] for b in BASELINES) for i in tot["esdp"]}
        rows.append(dict(claim=_md(f"Fig. 12, |R| = {R}: ESDP beats the best of HAUF/LCF/LWTF (per instance; "
                                   f"{res.horizon} slots)"), paper="ESDP leads whatever the number of nodes",
                         comparison=stats.paired_comparison(tot["esdp"], best, agent="esdp", reference="best baseline"),
                         predicted=+1))
    for R in [R for R in Rs if R in HAUF_AHEAD]:
        res = studies[R]
        for h in ("hauf", HAUF_CHANNELS):
            lab = "HAUF" if h == "hauf" else f"HAUF read as channels by v̂, first fit (`{h}`)"
            rows.append(dict(claim=_md(f"Fig. 12, |R| = {R}: {lab} beats ESDP ({res.horizon} slots)"),
                             paper=_md("HAUF above ESDP at |R| = 60–80"),
                             comparison=stats.paired_comparison(res.per_instance(h), res.per_instance("esdp"), agent=h,
                                                                reference="esdp"), predicted=+1))
    if len(Rs) >= 2:
        lo, hi = Rs[0], Rs[-1]
        for a in ("esdp", *BASELINES):
            rows.append(dict(claim=_md(f"Fig. 12: {a.upper()}'s total reward larger at |R| = {hi} than at |R| = {lo} "
                                       "(paired by scenario seed)"), paper=_md("every algorithm gains as |R| grows"),
                             comparison=stats.paired_comparison(studies[hi].per_instance(a), studies[lo].per_instance(a),
                                                                agent=f"{a}@{hi}", reference=f"{a}@{lo}"),
                             predicted=+1))
    return rows


def servers_table(studies: dict) -> str:
    """Per |R|: channels, capacity, each agent's share of the oracle and ESDP's median decision time."""
    lines = ["| \\|R\\| | channels \\|E\\| (mean) | share of the oracle, mean [95% bootstrap]: "
             + " / ".join(f"`{a}`" for a in SERVER_AGENTS) + " | ESDP median decision ms |", "|---|---|---|---|"]
    for R in sorted(studies):
        res = studies[R]
        E = np.mean([make_channel_scenario("paper", seed=int(i), num_servers=R).problem.num_edges
                     for i in res.instances])
        shares = []
        for a in SERVER_AGENTS:
            v = [100 * r.value_total / r.bound_total for r in _by_instance(res, a).values()]
            shares.append(stats.fmt_ci(stats.mean_ci(v, bounds=(0.0, 100.0)), signed=False, digits=0))
        dm = stats.mean_ci(list(res.per_instance("esdp", "decision_ms_median").values()))
        lines.append(f"| {R} | {E:.1f} | {' / '.join(shares)} | {dm.mean:.1f} |")
    return "\n".join(lines)


# -- regret against the horizon (Theorem 2, Figs. 4 and 13) ---------------------------------------


def regret_at(res, agent: str, T: int) -> dict:
    """``{instance: cumulative regret after T slots}`` (mean over the instance's seeds)."""
    out: dict = {}
    for r in res.runs:
        if r.agent == agent:
            out.setdefault(r.instance, []).append(float(r.cum_regret[T - 1]))
    return {i: float(np.mean(v)) for i, v in out.items()}


def _reward_upto(res, agent: str, T: int) -> dict:
    out: dict = {}
    for r in res.runs:
        if r.agent == agent:
            out.setdefault(r.instance, []).append(float(np.sum(r.reward[:T])))
    return {i: float(np.mean(v)) for i, v in out.items()}


def horizons(H: int) -> list[int]:
    """The horizons of the regret table: H/8, H/4, H/2, H (the ones of at least 8 slots)."""
    return [T for T in (H // 8, H // 4, H // 2, H) if T >= 8]


def log_doubling_exponent(T: int) -> float:
    """The growth exponent log₂(R(T)/R(T/2)) of regret c·ln t."""
    return math.log2(math.log(T) / math.log(T / 2))


def regret_vs_horizon(res) -> dict:
    """Regret R(T) of both ESDP variants at :func:`horizons`, the doubling exponents and Fig. 13's rows,
    from runs of ``res`` (the main study: ESDP, ``only_active`` and the baselines with oracle on)."""
    H = res.horizon
    Ts = horizons(H)
    variants = [a for a in ESDP_VARIANTS if a in res.agents]
    R = {a: {T: regret_at(res, a, T) for T in Ts} for a in variants}
    rows, expo = [], {}
    for a in variants:
        for T in Ts[1:]:
            if T // 2 not in R[a]:
                continue
            b = {i: (math.log2(R[a][T][i] / R[a][T // 2][i]) if R[a][T // 2][i] > 0 and R[a][T][i] > 0 else
                     (0.0 if R[a][T][i] <= R[a][T // 2][i] else math.inf)) for i in R[a][T]}
            expo[a, T] = b
            ci = stats.mean_ci(list(b.values()))
            ln_b = log_doubling_exponent(T)
            thr = 0.5 * (ln_b + 0.5)
            v = (stats.TOO_FEW if ci.n < 2 or math.isnan(ci.low) else stats.REPRODUCED if ci.high < thr else
                 stats.NOT_REPRODUCED if ci.low > thr else stats.INCONCLUSIVE)
            lab = "faithful ESDP" if a == "esdp" else "ESDP only_active"
            rows.append(dict(claim=f"regret of {lab} grows like ln T from T = {T // 2} to {T} (exponent b = "
                                   "log₂ R(T)/R(T/2))",
                             paper=f"O(ln T) (Theorem 2): b ≈ {ln_b:.2f} (√T: 0.5; threshold {thr:.2f})",
                             ours=f"b = {stats.fmt_ci(ci, unit='', digits=2, signed=False)}; R({T}) = "
                                  f"{stats.fmt_ci(stats.mean_ci(list(R[a][T].values())), unit='', digits=0, signed=False)}",
                             wins="–", verdict=v))
    if "esdp" in res.agents and all(b in res.agents for b in BASELINES):
        for T in Ts:
            e = _reward_upto(res, "esdp", T)
            best = {i: max(_reward_upto(res, b, T)[i] for b in BASELINES) for i in e}
            rows.append(dict(claim=f"Fig. 13: ESDP beats the best of HAUF/LCF/LWTF (per instance) over the first {T} "
                                   "slots", paper="ESDP always performs the best, whatever T",
                             comparison=stats.paired_comparison(e, best, agent="esdp", reference="best baseline"),
                             predicted=+1))
        lo, hi = Ts[0], Ts[-1]
        avg_hi = {i: v / hi for i, v in _reward_upto(res, "esdp", hi).items()}
        avg_lo = {i: v / lo for i, v in _reward_upto(res, "esdp", lo).items()}
        rows.append(dict(claim=f"Fig. 13 / Fig. 4: ESDP's average reward per slot higher over {hi} slots than over "
                               f"the first {lo}", paper="performance positively correlated with T; average AOU rises",
                         comparison=stats.paired_comparison(avg_hi, avg_lo, agent=f"esdp@{hi}", reference=f"esdp@{lo}"),
                         predicted=+1))
    table = ["| ESDP variant | " + " | ".join(f"R({T})" for T in Ts) + " | R(T)/ln T at T = " + f"{Ts[0]} → {Ts[-1]} |",
             "|---|" + "---|" * len(Ts) + "---|"]
    for a in variants:
        cells = [stats.fmt_ci(stats.mean_ci(list(R[a][T].values())), unit="", digits=1, signed=False) for T in Ts]
        ratio = [np.mean(list(R[a][T].values())) / math.log(T) for T in (Ts[0], Ts[-1])]
        table.append(f"| `{a}` | " + " | ".join(cells) + f" | {ratio[0]:.1f} → {ratio[1]:.1f} |")
    return {"rows": rows, "table": "\n".join(table), "regret": R, "exponent": expo, "horizons": Ts}


# -- the report ----------------------------------------------------------------------------------


def run(study, quick: bool, workers: int, progress: bool, instances=None, tiny: bool = False,
        servers=None) -> dict:
    """Every experiment of this module for ``reproduce esdp``: regret against T from ``study`` (the
    main study's Results) always; the δ(t), g(t) and |R| sweeps in full mode (and in the tiny test
    mode without ``quick``), else listed as full mode only. ``servers`` replaces :data:`SERVERS`."""
    insts = instances_for(quick, instances)
    out = {"quick": quick, "tiny": tiny, "instances": insts, "regret": regret_vs_horizon(study)}
    if quick:
        out["full_only"] = [f"δ(t) and g(t) sweeps (Figs. 7–8; {SWEEP_HORIZON} slots)",
                            f"|R| sweep (Fig. 12; |R| = {', '.join(map(str, SERVERS))}, {SWEEP_HORIZON} slots)"]
        return out
    H = TINY["horizon"] if tiny else SWEEP_HORIZON
    out["sequences"] = sequence_study(H, insts, workers, progress)
    out["servers"] = servers_study(servers or (TINY["servers"] if tiny else SERVERS), H, insts, workers, progress)
    return out


def rows_of(more: dict) -> list[dict]:
    rows = list(more["regret"]["rows"]) if more.get("regret") else []
    if "sequences" in more:
        rows += sequence_rows(more["sequences"])
    if "servers" in more:
        rows += servers_rows(more["servers"])
    return rows


def section(more: dict) -> str:
    """The report's section for :func:`run`'s result (markdown)."""
    lines = [""]
    if more.get("regret"):
        lines += ["## Regret against the horizon (Theorem 2; Figs. 4 and 13)", "",
                  "R(T) of the runs above at T = H/8, H/4, H/2, H (mean [95% t] over instances); the claims weigh the "
                  "growth exponent of each doubling against the midpoint between c·ln T's and √T's.", "",
                  more["regret"]["table"], "", stats.claims_table(more["regret"]["rows"]), ""]
    if "sequences" in more:
        res = more["sequences"]
        lines += ["## ESDP's sequences δ(t) (Fig. 7) and g(t) (Fig. 8)", "",
                  f"ESDP with each sequence, {len(res.instances)} instances × {res.horizon} slots (seed = instance). "
                  f"A tie is within ±{TIE_TOL:g}% of the oracle total (our tolerance).", "",
                  sequence_table(res), "", stats.claims_table(sequence_rows(res)), ""]
    if "servers" in more:
        st = more["servers"]
        any_res = next(iter(st.values()))
        lines += ["## The number of servers |R| (Fig. 12)", "",
                  f"|R| ∈ {{{', '.join(map(str, sorted(st)))}}}, {len(any_res.instances)} instances × {any_res.horizon} "
                  "slots; channel probability 0.1 and capacity_ratio 0.25 at every size.", "",
                  servers_table(st), "", stats.claims_table(servers_rows(st)), ""]
    if more.get("full_only"):
        lines += ["## Full mode only", "", "Not run in quick mode (each costs minutes of ESDP decisions): "
                  + "; ".join(more["full_only"]) + ". `clustergym reproduce esdp` runs them; "
                  "`python -m clustergym.experiments.extra.cli esdp` runs one alone at any size.", ""]
    return "\n".join(lines)


def write(more: dict, folder: str) -> str:
    """``FOLDER/results.json`` with every claims row of :func:`run` (``experiments.write_summary``)."""
    os.makedirs(folder, exist_ok=True)
    return write_summary(folder, ENV_ID, more["instances"], more["quick"], more["tiny"], rows_of(more),
                         full_mode_only=more.get("full_only", []))
