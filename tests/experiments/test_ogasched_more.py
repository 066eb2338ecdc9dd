"""OGASched's Fig. 4 (η0, decay) and Table 2 (T, ρ, density) experiments
(clustergym.experiments.extra.ogasched_more), on tiny settings: the rows' form, the wiring of the
hindsight optima, and the rules behind the verdicts."""

import json

import numpy as np
import pytest

from clustergym.core import stats
from clustergym.core.agent import make
from clustergym.experiments.extra import ogasched_more as om
from clustergym.runner.evaluation import evaluate

INSTANCES = [0, 1]
T = 20
Q = {0: 4.0e4, 1: 5.0e4}  # stand-ins for Q(y*) (tests of the wiring; the real one costs seconds per instance)


@pytest.fixture(scope="module")
def main_sw():
    res = evaluate(om.ENV_ID, ["ogasched"], [0], T, env_kwargs={"setting": "paper", "oracle": False},
                   instances=INSTANCES, score=False, progress=False)
    return {"res": {"paper": res}, "opt": {"paper": dict(Q)}, "instances": INSTANCES, "seeds": [0], "T": T}


def test_fig4_runs_beside_the_table1_runs_and_gives_rows_with_verdicts(main_sw, tmp_path):
    more = om.run(main_sw, quick=True, workers=1, progress=False)
    assert "table2" not in more
    fig4 = more["fig4"]
    assert set(fig4.instances) == set(INSTANCES) and fig4.horizon == T
    assert len(fig4.agents) == len(om.ETA0S) + len(om.DECAYS)
    rows = om.fig4_rows(main_sw, fig4)
    assert len(rows) == len(om.ETA0S) + 3
    for r in rows:
        v = r.get("verdict") or stats.verdict(r["comparison"], r["predicted"])
        assert v in stats.VERDICTS
        if "comparison" in r and r.get("unit") != " pts":
            # % of the instance's Q(y*): 100 (A − B) / Q
            c = r["comparison"]
            a, b = (om._values(main_sw, fig4, x) for x in (c.agent, c.reference))
            assert c.per_instance == pytest.approx({i: 100 * (a[i] - b[i]) / Q[i] for i in INSTANCES})
    text = om.section(more)
    assert "Fig. 4" in text and "full mode only" in text
    doc = json.loads(open(om.write(more, str(tmp_path / "m"))).read())
    assert doc["instances"] == INSTANCES and len(doc["claims"]) == len(rows)


def test_the_best_decay_row_counts_instances_whose_best_decay_is_in_the_range(main_sw):
    """Hand-made totals: the best decay is 0.995 on instance 0 and 0.99 on instance 1 -> 1 of 2."""
    from types import SimpleNamespace

    fake = {}
    for spec in [*(om._eta_spec(e) for e in om.ETA0S), *(om._decay_spec(d) for d in om.DECAYS)]:
        fake[spec] = {0: 1.0, 1: 1.0}
    fake[om._decay_spec(0.995)] = {0: 9e9, 1: 2.0}
    fake[om._decay_spec(0.99)] = {0: 2.0, 1: 9e9}
    res = SimpleNamespace(per_instance=lambda a, key="total_reward": fake[a], runs=[])
    row = next(r for r in om.fig4_rows(main_sw, res) if "best decay" in r["claim"])
    assert row["wins"] == "1 / 1" and "0.995 on 1" in row["ours"] and "0.99 on 1" in row["ours"]
    assert row["verdict"] == stats.INCONCLUSIVE


def test_decay_above_one_is_accepted_for_fig4_and_makes_the_step_grow():
    ag = make("ogasched[decay=1.0001]", family="multiserver-allocation")
    assert ag.decay == pytest.approx(1.0001)
    with pytest.raises(ValueError, match="decay"):
        make("ogasched[decay=1.01]", family="multiserver-allocation")


def test_a_short_run_is_the_start_of_a_longer_one():
    """Table 2's T column reads every T off one long run per agent and instance."""
    short, long = (evaluate(om.ENV_ID, ["ogasched", "fairness"], [0], H, env_kwargs={"setting": "paper", "oracle": False},
                            instances=[2], score=False, progress=False) for H in (12, 30))
    for a in ("ogasched", "fairness"):
        s = next(r for r in short.runs if r.agent == a)
        lo = next(r for r in long.runs if r.agent == a)
        np.testing.assert_allclose(s.reward, lo.reward[:12])


def test_table2_assigns_each_configuration_its_own_hindsight_optimum(monkeypatch):
    """The optima are computed in one batch of tasks; each (column value, instance) must get its own."""
    def fake_opt(args, report=None):
        kw, seed, checkpoints = args
        tag = 1000 * kw.get("rho", 0) + 100 * kw.get("density", 0) + kw["scenario_seed"]
        return [1e5 + tag + c for c in checkpoints]

    monkeypatch.setattr(om, "hindsight", lambda tasks, workers: [fake_opt(t) for t in tasks])
    t2 = om.table2_sweep(INSTANCES, 1, False, tiny=True)
    assert t2["T_opt"] == {Tc: {i: 1e5 + i + Tc for i in INSTANCES} for Tc in om.TINY["T"]}
    for r in om.PAPER_TABLE2["rho"]:
        assert t2["rho"][r][1] == {i: 1e5 + 1000 * r + i + om.TINY["horizon"] for i in INSTANCES}
    for d in om.PAPER_TABLE2["density"]:
        assert t2["density"][d][1] == {i: 1e5 + 100 * d + i + om.TINY["horizon"] for i in INSTANCES}
    rows = om.table2_rows(t2)
    n_cols = len(om.TINY["T"]) + len(om.PAPER_TABLE2["rho"]) + len(om.PAPER_TABLE2["density"])
    assert len(rows) == n_cols + 1 + 3  # best-baseline rows, the T trend, the ρ and density trends
    assert [r["predicted"] for r in rows[-3:]] == [+1, -1, +1]  # ρ 0.3→0.7 up, 0.7→0.9 down, density up
    for r in rows:
        assert set(r["comparison"].per_instance) == set(INSTANCES)


def test_paper_numbers_are_read_from_table2():
    assert om.paper_gain("T", 1000) == pytest.approx(100 * (2578.53 / 2532.24 - 1))
    assert om.paper_gain("rho", 0.3) == pytest.approx(100 * (1904.87 / 1364.53 - 1))
    assert om.paper_change("rho", 0.7, 0.9) == pytest.approx(100 * (2938.22 / 3117.29 - 1))
