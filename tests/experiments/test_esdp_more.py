"""ESDP's sensitivity and scalability experiments (clustergym.experiments.extra.esdp_more): the δ(t)
and g(t) sweeps (Figs. 7–8), the |R| sweep (Fig. 12) and regret against T, on tiny settings (the
numbers mean nothing there; the rows' form and the rules behind the verdicts are what is tested)."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from clustergym.core import stats
from clustergym.agents.esdp import ESDP
from clustergym.experiments import esdp_sweep
from clustergym.experiments.extra import esdp_more

INSTANCES = [0, 1]
VERDICT_WORDS = (stats.REPRODUCED, stats.DIRECTION_ONLY, stats.NOT_REPRODUCED, stats.INCONCLUSIVE)


@pytest.fixture(scope="module")
def study():
    return esdp_sweep.run_study(24, INSTANCES, 1, False, sensitivity=False)


@pytest.fixture(scope="module")
def full_tiny(study):
    return esdp_more.run(study, quick=False, workers=1, progress=False, instances=INSTANCES, tiny=True)


def _verdict(row):
    return row.get("verdict") or stats.verdict(row["comparison"], row.get("predicted", +1), row.get("tol", 0.0),
                                               row.get("paper_effect"))


def test_every_experiment_gives_rows_with_a_verdict_over_the_instances(full_tiny, tmp_path):
    rows = esdp_more.rows_of(full_tiny)
    claims = [r["claim"] for r in rows]
    assert sum("Fig. 7" in c for c in claims) == 2 * len(esdp_more.DELTA_VARIANTS)
    assert sum("Fig. 8" in c for c in claims) == 2
    sizes = sorted(full_tiny["servers"])
    assert sizes == list(esdp_more.TINY["servers"])
    assert sum(c.startswith(f"Fig. 12, \\|R\\| = {R}: ESDP beats") for c in claims for R in sizes) == len(sizes)
    # HAUF above ESDP is claimed at |R| = 60 (in the tiny sweep), under both HAUF readings
    assert sum("HAUF" in c and "beats ESDP" in c for c in claims) == 2
    assert any(c.startswith("regret of faithful ESDP") for c in claims)
    for r in rows:
        assert _verdict(r).split(" (")[0] in VERDICT_WORDS, r["claim"]
        if "comparison" in r:
            assert set(r["comparison"].per_instance) == set(INSTANCES), r["claim"]
    path = esdp_more.write(full_tiny, str(tmp_path / "more"))
    doc = json.loads(open(path).read())
    assert doc["instances"] == INSTANCES and doc["mode"] == "tiny test"
    assert [c["claim"] for c in doc["claims"]] == claims
    text = esdp_more.section(full_tiny)
    for head in ("Regret against the horizon", "δ(t) (Fig. 7)", "(Fig. 12)"):
        assert head in text
    assert "Full mode only" not in text


def test_quick_mode_lists_the_sweeps_as_full_mode_only(study):
    more = esdp_more.run(study, quick=True, workers=1, progress=False, instances=INSTANCES)
    assert "sequences" not in more and "servers" not in more
    text = esdp_more.section(more)
    assert "Full mode only" in text and "Fig. 12" in text and "Figs. 7–8" in text
    assert more["regret"]["rows"]  # regret against T reads the study's runs: in both modes


def test_tie_rows_use_the_oracle_total_and_the_stated_tolerance(full_tiny):
    res = full_tiny["sequences"]
    rows = [r for r in esdp_more.sequence_rows(res) if r.get("predicted") == 0]
    assert len(rows) == len(esdp_more.DELTA_VARIANTS)
    oracle = res.per_instance("esdp", "oracle_total")
    for r, name in zip(rows, esdp_more.DELTA_VARIANTS):
        a = f'esdp[delta="{name}"]'
        expect = {i: 100 * (res.per_instance(a)[i] - res.per_instance("esdp")[i]) / oracle[i] for i in INSTANCES}
        assert r["comparison"].per_instance == pytest.approx(expect)
        assert r["tol"] == esdp_more.TIE_TOL


def test_a_short_run_is_the_start_of_a_longer_one():
    """R(T) of a T-slot run equals the first T slots of a longer run with the same seed (the regret
    table reads R(T) off the study's runs)."""
    from clustergym.runner.evaluation import evaluate

    short, long = (evaluate(esdp_more.ENV_ID, ["esdp", "hauf"], [3], H, env_kwargs={"oracle": True}, score=False,
                            progress=False) for H in (15, 30))
    for a in ("esdp", "hauf"):
        s = next(r for r in short.runs if r.agent == a)
        lo = next(r for r in long.runs if r.agent == a)
        np.testing.assert_array_equal(s.reward, lo.reward[:15])
        np.testing.assert_array_equal(s.cum_regret, lo.cum_regret[:15])


def test_a_smaller_delta_gives_esdp_a_larger_dp_and_the_rows_predict_that_direction():
    import gymnasium as gym

    import clustergym  # noqa: F401

    pb = gym.make(esdp_more.ENV_ID).unwrapped.problem
    s_max = {}
    for name in ("default", *esdp_more.DELTA_VARIANTS):
        ag = ESDP(delta=name)
        ag.reset(pb, seed=0)
        s_max[name] = ag.statistics(2000)["s_max"]  # S(t) = {0, ..., s_max} (eq. 19)
    for name in esdp_more.DELTA_VARIANTS:
        more = s_max[name] > s_max["default"]
        assert esdp_more.overhead_direction(name, 2000) == (+1 if more else -1)
    assert esdp_more.overhead_direction("log", 2000) == +1  # (ln(t+1)+1)^-1 is the smallest of Fig. 7's


def _fake_study(curve, n=4, H=800):
    """A Results-like object whose ESDP runs have cumulative regret ``curve(t)`` times a per-instance factor."""
    t = np.arange(1, H + 1, dtype=float)
    runs = []
    for i in range(n):
        c = (1 + 0.05 * i) * curve(t)
        runs.append(SimpleNamespace(agent="esdp", instance=i, cum_regret=c, reward=np.ones(H)))
    return SimpleNamespace(horizon=H, agents=["esdp"], runs=runs, instances=list(range(n)))


@pytest.mark.parametrize("curve, word", [(lambda t: 10 * np.log(t + 1), stats.REPRODUCED),
                                         (lambda t: 0.3 * t, stats.NOT_REPRODUCED),
                                         (lambda t: 3 * np.sqrt(t), stats.NOT_REPRODUCED)])
def test_the_doubling_exponent_tells_ln_t_from_sqrt_t_and_linear_regret(curve, word):
    out = esdp_more.regret_vs_horizon(_fake_study(curve))
    rows = [r for r in out["rows"] if r["claim"].startswith("regret of faithful ESDP")]
    assert [r["claim"].split("from T = ")[1].split(" ")[0] for r in rows] == ["100", "200", "400"]
    assert {r["verdict"] for r in rows} == {word}


def test_the_doubling_exponent_of_ln_t_is_the_threshold_reference():
    for T in (100, 2000, 8000):
        b = esdp_more.log_doubling_exponent(T)
        assert b == pytest.approx(math.log2(math.log(T) / math.log(T / 2)))
        assert 0 < b < 0.5
