"""One known cell of every OPM table the report and docs/opm.md show, on a hand-made sweep whose agents have
distinct shares of the bound (a table that puts one agent's number in another's column fails here)."""

import pytest

from clustergym.experiments import opm, opm_load
from clustergym.experiments.opm_sweep import COUPLED, EARLIER, plan

SHARE = {"opm": 0.90, "opm-noest": 0.80, "fair": 0.95, "edf": 0.85, "random": 0.70, "opm[rounding=coupled]": 0.88}
BOUND = 1000.0
EFF = {"opm": 0.51, "opm-noest": 0.52, "fair": 0.53, "edf": 0.54, "random": 0.55, "opm[rounding=coupled]": 0.56}
UNDER90 = {"opm": 0.6, "opm-noest": 0.5, "fair": 0.4, "edf": 0.3, "random": 0.2, "opm[rounding=coupled]": 0.1}


def _sweep(shift=None):
    """Quick mode's plan on 3 job lists; job list i's utility = share·B·(1 + 0.01 i) (+ ``shift`` per config)."""
    pl = plan(True, [0, 1, 2])
    runs = []
    for c, kw in pl["configs"].items():
        for i in pl["instances"]:
            for a, s in SHARE.items():
                u = s * BOUND * (1 + 0.01 * i) + (shift or {}).get((c, a), 0.0)
                runs.append({"agent": a, "env_kwargs": dict(kw, scenario_seed=i, oracle=a == "random"),
                             "total_reward": u, "bound": BOUND if a == "random" else None, "work": u * EFF[a],
                             "budget_spent": u, "migration_rate": 0.1 if a != COUPLED else 0.02,
                             "jobs_under_90": UNDER90[a],
                             "budget_used_median": 0.9})
    return {"runs": runs, "pl": pl, "quick": True}


def _row(lines, first):
    return next(ln for ln in lines if ln.startswith(f"| {first}")).split(" | ")


def test_agent_tables_put_each_agents_share_in_its_own_row():
    sw = _sweep()
    tables = opm._agent_table(sw, "paper", "heavy", (0.5, 0.7))
    for a, s in SHARE.items():
        if a.startswith("opm["):
            continue
        cells = _row(tables, a)
        assert cells[2].startswith(f"{s * 1.01:.3f}") and cells[5].startswith(f"{s * 1.01:.3f}"), a
        assert cells[1] == f"{s * BOUND * 1.01:,.0f}"  # mean utility of the three job lists
    titles = list(opm._agent_tables(sw))
    assert sum(t.startswith("Table I, scale=\"paper\"") for t in titles) == 1
    assert all("extension" in t.lower() for t in titles if "default scale" in t or "speed factors" in t)


def test_side_by_side_and_claims_compare_opm_with_the_right_baseline():
    sw = _sweep()
    row = _row(opm._side_by_side(sw), "0.5")
    assert row[1].startswith("-5.0%")  # OPM − Fair = (0.90 − 0.95)·1.01 of B ≈ −5.0 % [-5.1, -5.0]
    assert row[2].startswith("+5.0%")  # OPM − EDF
    claims = {r["claim"]: r for r in opm.claims(sw)}
    k = claims["Table I, paper setup (one rate law; machines differ by their on/off periods), β=0.5: OPM > edf"]
    assert k["comparison"].mean == pytest.approx(100 * (0.90 - 0.85) * 1.01)
    others = [c for c in claims if "default scale" in c or "speed" in c or " 0.45 jobs" in c or " 0.05 jobs" in c]
    assert len(others) > 10 and all("extension" in c for c in others)
    rate = [c for c in claims if "arrival-rate sweep" in c]
    assert [c.split(" jobs/slot")[0].split()[-1] for c in rate] == ["0.05", "0.15", "0.25", "0.45"]
    assert not rate[2].startswith("extension")  # 0.25: the calibrated default, the paper's setting


def test_load_table_reports_demand_and_the_best_baselines_share():
    sw = _sweep()
    dem = {c: {0: 1400.0, 1: 1500.0, 2: 1600.0} for c in sw["pl"]["configs"]}
    lines = opm_load.regime_lines(sw, dem)
    row = _row(lines, "paper setup, heavy load, β=0.5")
    assert row[1] == "1000" and row[2] == "1,500 [1,400, 1,600]" and row[3] == "1.50"
    assert row[4].startswith(f"{0.95 * 1.01:.3f}")  # Fair, the best of Fair/EDF, not random (0.707) nor OPM
    assert any(ln.startswith("| earlier reading (0.15 jobs/slot), heavy load, β=0.7") for ln in lines)
    assert all(ln.startswith("| extension") for ln in lines if "default scale" in ln or "speed factors" in ln)


def test_before_after_table_shows_the_earlier_rate_beside_the_calibrated_one():
    # OPM gains 10 % of B over the best baseline at the calibrated rate only
    sw = _sweep({(c, "opm"): 150.0 for c in plan(True, [0])["configs"] if c[0] == "paper"})
    row = _row(opm_load.before_after_lines(sw, opm.PAPER_VS), "Table I, β=0.5")
    assert row[1].startswith("-5.0%") and row[1].endswith("0/3") and row[2] == "**not reproduced**"
    assert row[3].startswith("+10.") and row[3].endswith("3/0")
    assert (EARLIER, "light", 0.9) in sw["pl"]["configs"]


def test_efficiency_budget_use_and_rounding_tables_keep_each_agent_in_its_column():
    sw = _sweep()
    eff = _row(opm._efficiency_lines(sw), "paper scale, heavy, β=0.5")
    assert [c.split(" ")[0] for c in eff[1:6]] == [f"{EFF[a]:.4f}" for a in opm.AGENTS]
    use = _row(opm._budget_use_lines(sw), "paper scale, β=0.5")
    assert [c.split("%")[0] for c in use[1:6]] == [f"{100 * UNDER90[a]:.0f}" for a in opm.AGENTS]
    rnd = opm._rounding_lines(sw)
    coupled = _row(rnd, "coupled across slots")
    assert coupled[1].startswith("2.0") and coupled[2].startswith("-7.1%")  # (0.88 − 0.95)·1.01 of B
    assert _row(rnd, "per slot")[1].startswith("10.0")


def test_load_table_gives_fig3s_setting_with_fairs_share_where_edf_did_not_run():
    """Full mode's α sweep (β = 0.8) runs Fair as its only baseline: its setting is in the load table with Fair's
    share, said so, and is not dropped."""
    pl = plan(False, [0, 1, 2])
    alpha = next(c for c in pl["configs"] if c[1] == "alpha")
    runs = [{"agent": a, "env_kwargs": dict(pl["configs"][alpha], scenario_seed=i, oracle=a == "random"),
             "total_reward": SHARE[a] * BOUND * (1 + 0.01 * i), "bound": BOUND if a == "random" else None}
            for i in pl["instances"] for a in ("fair", "random")]
    sw = {"runs": runs, "pl": dict(pl, configs={alpha: pl["configs"][alpha]}), "quick": False}
    lines = opm_load.regime_lines(sw, {alpha: {0: 1400.0, 1: 1500.0, 2: 1600.0}})
    row = _row(lines, "paper setup, Fig. 3's α sweep, heavy load, β=0.8")
    assert row[2] == "1,500 [1,400, 1,600]"
    assert row[4].startswith(f"{0.95 * 1.01:.3f}") and row[4].endswith("(Fair; no EDF run) |")
