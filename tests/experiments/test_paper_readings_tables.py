"""The readings the OGASched and GADGET reproductions use by default, and one known cell of each table
they print (docs/ogasched.md, docs/gadget.md): each table is built here from made-up per-instance values
whose differences are known, so a value put in the wrong row or column fails."""

import re

import numpy as np
import pytest

from clustergym.core.agent import make
from clustergym.experiments import gadget as G
from clustergym.experiments import ogasched as O
from clustergym.experiments.extra import gadget_more, ogasched_more

INST = [0, 1, 2]


class FakeResults:
    """What the table builders read of a Results: per-instance values of an agent and a key."""

    def __init__(self, values: dict, agents=None):
        self.values = values  # (agent, key) -> {instance: value}
        self.agents = agents or sorted({a for a, _ in values})
        self.runs = []

    def per_instance(self, agent, key="total_reward"):
        return dict(self.values[(agent, key)])


def _totals(agents, base=100.0, step=7.0):
    """Agent j scores base + step·j + instance on each instance: known pairwise differences."""
    return {(a, "total_reward"): {i: base + step * j + i for i in INST} for j, a in enumerate(agents)}


# -- OGASched -------------------------------------------------------------------------------------------

def test_ogasched_defaults_are_the_papers_readings():
    """FAIRNESS is the active-port reading (§4.1: "each non-empty port without bias"); Table 1's η0 is
    read in 1/8-device units; the earlier readings are the option rows beside them; no regret-growth
    claim for Table 1's step (Theorem 1 covers eq. 26's)."""
    assert make("fairness", family="multiserver-allocation").active_share is True
    assert O.FAIR == ["fairness", "fairness[active_share=false]"]
    assert O._LABEL["fairness"] == "FAIRNESS (active ports)"
    assert make("ogasched", family="multiserver-allocation").eta_units == "eighth-device"
    assert "ogasched[eta_units=problem]" in O.OGA and "ogasched" in O.OGA
    assert O.GROWTH_AGENTS == ["ogasched[lr=eq26]", *O.FAIR]
    assert O._T1_STEP == 25.0 / 64


def test_ogasched_settings_claims_cell():
    agents = list(O.AGENTS)  # random among them: a value taken from the wrong agent shows
    res = FakeResults(_totals(agents))
    scale = {i: 50.0 for i in INST}
    rows, comps = O.setting_claims(res, scale)
    row = next(r for r in rows if r["claim"] == f"{O.OGA['ogasched']} > FAIRNESS (active ports)")
    j_oga, j_fair = agents.index("ogasched"), agents.index("fairness")
    assert row["comparison"].mean == pytest.approx(100 * 7.0 * (j_oga - j_fair) / 50.0)
    c = comps[("ogasched[eta_units=problem]", "fairness[active_share=false]")]
    assert c.mean == pytest.approx(100 * 7.0 * (agents.index("ogasched[eta_units=problem]")
                                                - agents.index("fairness[active_share=false]")) / 50.0)


def test_ogasched_fig4_table_cell(monkeypatch):
    eta = ogasched_more._eta_spec(1)
    vals = {(a, "total_reward"): {i: 130.0 + i for i in INST} for a in
            [*(ogasched_more._eta_spec(e) for e in ogasched_more.ETA0S),
             *(ogasched_more._decay_spec(d) for d in ogasched_more.DECAYS)]}
    fig4 = FakeResults(vals)
    main = {"res": {"paper": FakeResults({("ogasched", "total_reward"): {i: 100.0 + i for i in INST}})},
            "opt": {"paper": {i: 200.0 for i in INST}}}
    monkeypatch.setattr(ogasched_more, "_negative_share", lambda res, agent: {i: 0.0 for i in INST})  # no runs
    lines = ogasched_more.fig4_table(main, fig4)
    cell = next(ln for ln in lines if ln.startswith(f"| `{eta}`"))
    assert "+15.0%" in cell and "(3/0)" in cell  # 100·30/200 on every instance


# -- GADGET ---------------------------------------------------------------------------------------------

def test_gadget_comparisons_use_the_papers_las_and_show_the_repair_option():
    """The LAS of every GADGET comparison is Tiresias' discretised LAS (the default ``las``); the
    continuous LAS and GADGET with repair are option rows beside the defaults in every table."""
    las = make("las", family="ringallreduce")
    assert las.thresholds is not None and las.thresholds.tolist() == [10.0]
    assert make("gadget", family="ringallreduce").rounding_repair is False
    assert make(G.REPAIR, family="ringallreduce").rounding_repair is True
    for agents in (G.CONFIG[True]["fig4_agents"], G.CONFIG[False]["fig4_agents"], G.SCARCE_AGENTS, G.FIG7_AGENTS,
                   gadget_more.AGENTS):
        assert {"gadget", G.REPAIR, "las"} <= set(agents), agents
    assert "las" in G.BASELINES and "las" in gadget_more.BASELINES
    assert not any(a.startswith("las[thresholds=") and a != G.LAS_CONTINUOUS for a in G.SCARCE_AGENTS)


def _fig4_sw(agents):
    vals = {}
    for j, a in enumerate(agents):
        vals[(a, "total_reward")] = {i: 100.0 + 10.0 * j + i for i in INST}
        vals[(a, "mean_waiting_jobs")] = {i: 0.0 for i in INST}
        vals[(a, "mean_gpu_util")] = {i: 0.5 for i in INST}
    cfg = {"horizon": 10, "instances": INST, "fig4_agents": agents, "fig4": {"iterations": [1.0, 2.0]}}
    return {"cfg": cfg, "fig4": {("iterations", 1.0): FakeResults(vals), ("iterations", 2.0): FakeResults(vals)}}


def test_gadget_fig4_table_and_claims_cell():
    agents = ["gadget", G.REPAIR, "fifo", "drf", "las", G.LAS_CONTINUOUS]
    lines, claims = G._fig4_section(_fig4_sw(agents))
    las = next(c for c in claims if c["claim"] == "Fig. 4 (iterations, 10 jobs): GADGET > LAS")
    # gadget 100 + i, las 140 + i: 100·(−40)/(140 + i) on each instance
    assert las["comparison"].mean == pytest.approx(np.mean([-4000 / (140 + i) for i in INST]))
    rep = next(c for c in claims if c["claim"].startswith("Fig. 4 (iterations, 10 jobs): GADGET with repair")
               and c["claim"].endswith("> FIFO"))
    assert rep["comparison"].mean == pytest.approx(np.mean([-1000 / (120 + i) for i in INST]))
    row = next(ln for ln in lines if ln.startswith("| 10 |"))
    assert f"{np.mean([-4000 / (140 + i) for i in INST]):+.1f}%" in row


def test_gadget_scarce_table_cell_is_labelled_an_extension():
    agents = G.SCARCE_AGENTS
    res = FakeResults(_totals(agents, step=5.0))
    sw = {"cfg": {"instances": INST}, "scarce": {m: (res, {i: 1000.0 for i in INST}) for m in G.SCARCE["modes"]}}
    lines, claims = G._scarce_section(sw)
    assert lines[0].startswith("## Extension (not in the paper)")
    assert all(c["claim"].startswith("extension, scarce GPUs") for c in claims)
    assert {c["claim"].split("`")[1] for c in claims} == {"las", G.LAS_CONTINUOUS, "fifo", "drf"}
    las = next(c for c in claims if c["claim"].endswith("`las`") and "worker_slots" in c["claim"])
    j, g = agents.index("las"), agents.index("gadget")
    assert las["comparison"].mean == pytest.approx(np.mean([100 * 5.0 * (g - j) / (100.0 + 5.0 * j + i) for i in INST]))
    row = next(ln for ln in lines if ln.startswith("| las |"))
    share = np.mean([100 * (100.0 + 5.0 * j + i) / 1000.0 for i in INST])
    assert re.search(rf"\| {share:.1f} \[", row), row


def test_gadget_fig56_and_fig7_cells():
    emb = {}
    for g, off in (("gadget", 0.0), (G.REPAIR, 0.2)):
        for kind, scales in (("gpu_scale", [0.5, 2.0]), ("bw_scale", [0.02, 1.0])):
            for k, sc in enumerate(scales):
                emb[g, kind, sc] = {i: 0.5 + off + 0.1 * k for i in INST}
    sw = {"cfg": {"fig56_rate": 12.0, "gscales": [0.5, 2.0], "bscales": [0.02, 1.0]}, "emb": emb}
    lines, claims = G._fig56_section(sw)
    assert next(ln for ln in lines if ln.startswith("| gpu_scale | 2.0 |")).startswith("| gpu_scale | 2.0 | 0.600 [0.600, 0.600] | 0.800 [")
    assert [c["comparison"].mean for c in claims] == pytest.approx([0.1] * 4)
    r7 = {a: {i: [0.3 + 0.1 * j] * 3 for i in INST} for j, a in enumerate(G.FIG7_AGENTS)}
    lines, claims = G._fig7_section({"cfg": {"fig7_horizon": 3, "fig7_instances": INST, "fig7_size": "medium"},
                                     "r7": r7})
    assert next(ln for ln in lines if ln.startswith(f"| {G.REPAIR} |")).split(" | ")[2].startswith("0.400")
    headline = next(c for c in claims if c["claim"].startswith("Fig. 7: `gadget` reaches"))
    assert headline["ours"].startswith("0.300")
    las = next(c for c in claims if c["claim"] == "Fig. 7 ratio: GADGET above `las` (ratio difference)")
    assert las["comparison"].mean == pytest.approx(-0.1 * G.FIG7_AGENTS.index("las"))
