"""The ESDP report's ρ and sensitivity tables on hand-made totals whose cells are known by hand."""

from types import SimpleNamespace

import numpy as np

from clustergym.experiments.esdp import analyse, rho_table, sensitivity_table

H, N = 200, 4
# totals per instance; the oracle's expected reward (bound_total) is 200 everywhere
TOTALS = {"esdp": [110, 120, 130, 140], "esdp[only_active=true]": [120] * 4, "hauf": [100] * 4, "lcf": [100] * 4,
          "lwtf": [50, 60, 70, 80], "lwtf[skip_unfit=true]": [100, 120, 140, 160]}


class _Res:
    horizon, instances, agents = H, list(range(N)), list(TOTALS)

    def __init__(self):
        self.runs = [SimpleNamespace(agent=a, instance=i, reward=np.full(H, v[i] / H), total_reward=float(v[i]),
                                     value_total=float(v[i]), bound_total=200.0,
                                     cum_regret=np.sqrt(np.arange(1, H + 1)) * (i + 1))
                     for a, v in TOTALS.items() for i in range(N)]

    def per_instance(self, agent, key="total_reward"):
        return {r.instance: float(getattr(r, key)) for r in self.runs if r.agent == agent}


def _cells(table: str) -> list[str]:
    return [c.strip() for c in table.splitlines()[-1].strip("|").split("|")]


def test_rho_table_cells():
    cells = _cells(rho_table({0.5: _Res()}))
    assert cells[:2] == ["0.5", "4 × 200"]
    # shares of the oracle: ESDP 55, 60, 65, 70 % (mean 62.5), only_active 60 %, HAUF and LCF 50 %, LWTF 32.5 %
    assert cells[2].startswith("62% [") and "/ 60% [60, 60] / 50% [50, 50] / 50% [50, 50] / 32% [" in cells[2]
    # ESDP vs HAUF: +10, +20, +30, +40 % (mean 25, sd 12.91, t(3) 3.182: ± 20.5); wins 4 / 0
    assert cells[3] == "+25.0% [+4.5, +45.5] (4/0)"
    # only_active vs LWTF: +140, +100, +71.4, +50 % (mean 90.4)
    assert cells[8].startswith("+90.4% [") and cells[8].endswith("(4/0)")


def test_sensitivity_table_compares_each_reading_with_its_default_and_esdp_with_the_reading():
    table = sensitivity_table(analyse(_Res()))
    row = next(ln for ln in table.splitlines() if ln.startswith("| `lwtf[skip_unfit=true]` vs `lwtf`"))
    # the reading doubles LWTF on every instance; ESDP vs it: +10, 0, −7.14, −12.5 % (mean −2.4; 1 win, 2 losses)
    assert _cells(row)[1:] == ["+100.0% [+100.0, +100.0]", "4 / 0", "-2.4% [-17.9, +13.1]", "1 / 2"]
