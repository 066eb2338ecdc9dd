"""OPM's Fig. 1a, Fig. 3 per tenfold step and the price-rule ablation
(clustergym.experiments.extra.opm_more): the rows' form on a tiny setting, and the rules behind them
on hand-made records and runs."""

import json
import math

import pytest

from clustergym.core import stats
from clustergym.experiments import opm_sweep
from clustergym.experiments.extra import opm_more

INSTANCES = [0, 1, 2]


@pytest.fixture(scope="module")
def main_sweep():
    return opm_sweep.sweep(True, 1, False, INSTANCES, tiny=True)  # a job list without jobs is left out of Fig. 1a


def test_ratio_share_counts_jobs_below_the_threshold_and_jobs_without_utility_as_above():
    rec = {"utility": [1.0, 2.0, 0.0, 4.0], "spent": [40.0, 120.0, 0.0, 100.0]}  # ratios 40, 60, none, 25
    assert opm_more.ratio_share(rec) == pytest.approx(2 / 4)
    assert opm_more.ratio_share(rec, threshold=70) == pytest.approx(3 / 4)
    assert opm_more.ratio_median(rec) == pytest.approx(40.0)
    assert math.isnan(opm_more.ratio_share({"utility": [], "spent": []}))


def test_fig1a_rows_compare_the_share_below_50_per_job_list(main_sweep):
    rows = opm_more.fig1a_rows(main_sweep)
    thr = [r for r in rows if "cost / utility < 50" in r["claim"]]
    assert {r["comparison"].reference for r in thr} == {"fair", "edf", "opm-noest"}
    for r in thr:
        c = r["comparison"]
        assert r["unit"] == " pts" and r["paper_effect"] == opm_more.PAPER_FIG1A[c.reference]
        # the per-instance value is OPM's share minus the baseline's, in points, from the kept records
        recs = opm_more._records(main_sweep["runs"], "paper" if "paper setup" in r["claim"] else "default")
        for i, d in c.per_instance.items():
            want = 100 * (opm_more.ratio_share(recs["opm"][i]) - opm_more.ratio_share(recs[c.reference][i]))
            assert d == pytest.approx(want)
    assert any("threshold-free" in r["claim"] and r["predicted"] == -1 for r in rows)


def test_price_ablation_runs_both_price_rules_on_the_same_job_lists(tmp_path, main_sweep):
    more = opm_more.run(main_sweep, quick=True, workers=1, progress=False, instances=INSTANCES, tiny=True)
    pw = more["price"]
    assert {p for (_, _, p) in pw["pl"]["configs"]} == {"paper", "uniform"}
    assert len(pw["runs"]) == 2 * len(INSTANCES) * 2  # quick mode: OPM and OPM-noest
    rows = opm_more.price_rows(pw)
    assert len(rows) == 4  # OPM > noest under each rule, the difference, work per budget
    assert [r["predicted"] for r in rows] == [+1, +1, +1, +1]
    path = opm_more.write(more, str(tmp_path / "more"))
    doc = json.loads(open(path).read())
    assert doc["instances"] == INSTANCES
    assert any(c["claim"].startswith("extension, price ablation") for c in doc["claims"])
    for c in doc["claims"]:
        assert c["verdict"].split(" (")[0] in stats.VERDICTS
    text = opm_more.section(more)
    assert "The price rule" in text and "Fig. 1a" in text and "full mode only" in text


def test_uniform_prices_are_independent_of_the_rates_and_the_paper_rule_is_twice_them():
    """The ablation's two price rules do what the rows' labels say."""
    import gymnasium as gym
    import numpy as np

    import clustergym  # noqa: F401

    for price in ("paper", "uniform"):
        env = gym.make(opm_more.ENV, price=price, scenario_seed=4).unwrapped
        theta, p = np.asarray(env.scenario.truth.mean_rate), np.asarray(env.problem.price)
        if price == "paper":
            np.testing.assert_allclose(p, 2 * theta)
        else:
            assert p.min() >= 0.2 and p.max() <= 1.0 and abs(np.corrcoef(p, theta)[0, 1]) < 0.3


def _fake_alpha_sweep(gains, migs, alphas=(0.06, 0.6, 6.0), n=4):
    """A reproduce-opm-like sweep of the α configuration: Fair at 100, B = 200, OPM(α) = 100 + 2·gain."""
    kw = dict(scale="paper", horizon=10, beta=0.8, load=1.0)
    runs = []
    for i in range(n):
        runs.append({"agent": "fair", "env_kwargs": dict(kw, scenario_seed=i), "total_reward": 100.0, "bound": None,
                     "migration_rate": 0.1})
        runs.append({"agent": "random", "env_kwargs": dict(kw, scenario_seed=i, oracle=True), "total_reward": 50.0,
                     "bound": 200.0, "migration_rate": 0.5})
        for a, g, m in zip(alphas, gains, migs):
            runs.append({"agent": f"opm[alpha={a:g}]", "env_kwargs": dict(kw, scenario_seed=i),
                         "total_reward": 100.0 + 2 * g + 0.1 * i, "bound": None, "migration_rate": m})
    return {"runs": runs, "pl": {"configs": {("paper", "alpha", 0.8): kw}, "alphas": [None, *alphas]}}


def test_fig3_steps_follow_each_tenfold_step_of_the_sweep():
    sw = _fake_alpha_sweep(gains=(40.0, 17.0, 20.0), migs=(0.20, 0.03, 0.03))
    rows = opm_more.fig3_step_rows(sw)
    assert [r["claim"].split("from ")[1].split(" (")[0] for r in rows] == ["α = 0.06 to 0.6"] * 2 + ["α = 0.6 to 6"] * 2
    v = [stats.verdict(r["comparison"], r["predicted"], paper=r["paper_effect"]) for r in rows]
    # 0.06 -> 0.6: gain falls 23 points and migrations 17: the paper's numbers; 0.6 -> 6: gain rises, migrations tie
    assert v[:2] == [stats.REPRODUCED, stats.REPRODUCED]
    assert v[2] == stats.NOT_REPRODUCED
    assert rows[1]["comparison"].mean == pytest.approx(17.0)


def test_the_price_rule_row_is_uniform_minus_paper_in_points_of_each_bound():
    """Hand-made runs: OPM − OPM-noest is 0 with p = 2θ and 5 % of B with uniform prices, so the
    mechanism's row is +5 points on every job list (reproduced), and it would be −5 the other way round."""
    cfgs = {("default", "speed factors U[0.3, 1]", p): dict(horizon=10, beta=0.7, load=1.0, price=p)
            for p in opm_more.PRICES}
    runs = []
    for (_, _, p), kw in cfgs.items():
        for i in range(4):
            bound = 100.0 + 10 * i
            gain = 0.05 * bound if p == "uniform" else 0.0
            base = dict(env_kwargs=dict(kw, scenario_seed=i), work=50.0 + i, budget_spent=100.0)
            runs.append(dict(base, agent="opm-noest", total_reward=60.0, bound=bound,
                             env_kwargs=dict(kw, scenario_seed=i, oracle=True)))
            runs.append(dict(base, agent="opm", total_reward=60.0 + gain, bound=None,
                             work=(55.0 if p == "uniform" else 50.0) + i))
    sw = {"pl": {"configs": cfgs, "agents": ("opm", "opm-noest")}, "runs": runs}
    rows = opm_more.price_rows(sw)
    diff = next(r for r in rows if "larger with uniform prices" in r["claim"])
    assert diff["comparison"].per_instance == pytest.approx({i: 5.0 for i in range(4)})
    assert stats.verdict(diff["comparison"], diff["predicted"]) == stats.REPRODUCED
    work = next(r for r in rows if "more work per unit of budget" in r["claim"])
    assert work["comparison"].per_instance == pytest.approx({i: 100 * 5.0 / (50.0 + i) for i in range(4)})


def test_the_experiments_run_alone_from_their_command(capsys):
    from clustergym.experiments.extra import cli, opm_more

    saved = dict(opm_more.HORIZON)
    cli.main(["opm", "--quick", "--horizon", "10", "--instances", "0-1", "--workers", "1"])
    assert opm_more.HORIZON == saved  # the command's horizon is an argument, not a change to the module
    assert opm_more.price_plan(True, [0], horizon=10)["horizon"] == 10
    assert "price" in capsys.readouterr().out.lower()
    with pytest.raises(SystemExit, match="usage"):
        cli.main(["nope"])


def test_the_price_ablations_load_table_measures_each_setting_at_its_prices():
    """The demand cell is scenario.demand of the setting's own env (its prices) over the ablation's job lists."""
    import gymnasium as gym

    from clustergym.envs.approxjobs.scenario import demand
    from clustergym.experiments.opm_load import price_demand_lines

    cfgs = {("default", "speed factors U[0.3, 1]", p): dict(horizon=80, beta=0.7, load=1.0, price=p)
            for p in opm_more.PRICES}
    lines = price_demand_lines({"pl": {"configs": cfgs, "instances": [0, 1]}, "runs": []})
    assert len(lines) == 4 and "demand" in lines[0]
    for (_, _, p), kw in cfgs.items():
        d = [demand(gym.make(opm_more.ENV, **kw, scenario_seed=i).unwrapped.scenario) for i in range(2)]
        cells = next(ln for ln in lines[2:] if ln.split(" | ")[1] == ("p = 2θ" if p == "paper" else "U[0.2, 1]")).split(" | ")
        assert cells[0] == "| extension: default scale, speed factors U[0.3, 1]"
        assert cells[2] == f"{sum(d) / 2:,.0f} [{min(d):,.0f}, {max(d):,.0f}]" and cells[3] == f"{sum(d) / 200:.2f} |"
