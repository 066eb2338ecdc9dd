"""ESDP's regret claim judged by curves fitted on the first half (clustergym.experiments.esdp_regret)."""

from types import SimpleNamespace

import numpy as np
import pytest

from clustergym.core import stats
from clustergym.experiments import esdp_regret
from clustergym.experiments.esdp_sweep import G_LOG

T = 400
t = np.arange(1, T + 1, dtype=float)


def _res(curves: dict) -> SimpleNamespace:
    runs = [SimpleNamespace(agent=a, instance=i, cum_regret=c) for a, cs in curves.items() for i, c in enumerate(cs)]
    return SimpleNamespace(agents=list(curves), runs=runs, horizon=T)


def test_each_curve_is_predicted_by_its_own_shape_fitted_on_the_first_half():
    ln = esdp_regret.fit_errors(5 * np.log(t))
    assert ln["ln"]["c"] == pytest.approx(5) and ln["ln"]["err"] == pytest.approx(0, abs=1e-9)
    assert ln["sqrt"]["err"] > 5
    sq = esdp_regret.fit_errors(3 * np.sqrt(t))
    assert sq["sqrt"]["c"] == pytest.approx(3) and sq["sqrt"]["err"] < sq["ln"]["err"]
    lin = esdp_regret.fit_errors(0.5 * t)  # linear regret: both under-predict, √t less
    assert lin["sqrt"]["err"] < lin["ln"]["err"]
    with pytest.raises(ValueError, match="cum_regret"):
        esdp_regret.fit_errors([1.0, 2.0])


def test_the_verdict_passes_on_log_regret_and_fails_on_linear_regret():
    rng = np.random.default_rng(0)
    res = _res({"esdp": [0.3 * t * (1 + 0.01 * k) for k in range(4)],  # R(T) = 120·1.015 ≈ 122 on average
                "esdp[only_active=true]": [(4 + rng.random()) * np.log(t) for _ in range(4)],
                G_LOG: [(2 + rng.random()) * np.log(t) + 0.5 for _ in range(4)]})
    rows = {r["claim"].split(" follows")[0]: r for r in esdp_regret.shape_rows(res)}
    assert set(rows) == {"regret of faithful ESDP", "regret of ESDP only_active",
                         "regret of ESDP only_active, g(t) = ln(t+1) (Fig. 8)"}
    assert stats.verdict(rows["regret of faithful ESDP"]["comparison"], +1) == stats.NOT_REPRODUCED
    assert stats.verdict(rows["regret of ESDP only_active"]["comparison"], +1) == stats.REPRODUCED
    lines = esdp_regret.shape_lines(res)
    g_row = next(ln for ln in lines if G_LOG in ln)
    assert g_row.endswith("| 4 of 4 |")  # ln t predicts better on every instance
    faithful = next(ln for ln in lines if "(`esdp`)" in ln)
    assert faithful.endswith("| 0 of 4 |") and faithful.split(" | ")[1].startswith("122 [")  # R(T), its own column
    ba = esdp_regret.before_after_lines(res, lambda a: (f"b of {a}", "inconclusive"))
    row = next(ln for ln in ba if ln.startswith("| faithful ESDP"))
    assert "b of esdp | **inconclusive** |" in row and row.endswith("**not reproduced** |")


def test_the_g_log_variant_is_fig_8s_third_sequence_with_only_active():
    from clustergym.core.agent import make

    agent = make(G_LOG, env_id="clustergym/MultiServerChannel-v0")
    assert agent.g_name == "log" and agent.only_active is True


def test_regret_and_share_tables_keep_each_variant_in_its_row():
    from clustergym.experiments import esdp

    inst = [0, 1, 2]
    an = {"limit": {i: 0.4 for i in inst},
          "per_slot_q2": {"esdp": {i: 0.7 for i in inst}, "esdp[only_active=true]": {i: 0.2 for i in inst}},
          "per_slot_last": {"esdp": {i: 0.6 for i in inst}, "esdp[only_active=true]": {i: 0.1 for i in inst}},
          "exponent": {"esdp": {i: 0.8 for i in inst}, "esdp[only_active=true]": {i: 0.5 for i in inst}},
          "share": {"hauf": {i: 0.65 for i in inst}},
          "share_runs": {"esdp": {i: 0.91 for i in inst}, "lcf": {i: 0.55 for i in inst}}}
    reg = esdp.regret_table(an).split("\n")
    faithful = next(ln for ln in reg if ln.startswith("| faithful")).split(" | ")
    active = next(ln for ln in reg if ln.startswith("| `only_active`")).split(" | ")
    assert faithful[1].startswith("0.700") and faithful[3].startswith("0.80") and faithful[4].startswith("0.400")
    assert active[1].startswith("0.200") and active[2].startswith("0.100") and active[3].startswith("0.50")
    shares = esdp.share_table(an).split("\n")
    assert next(ln for ln in shares if ln.startswith("| `esdp` (learning")).endswith("| 91%, 91%, 91% |")
    assert next(ln for ln in shares if ln.startswith("| `hauf` given")).endswith("| 65%, 65%, 65% |")
