"""The figure style (clustergym/core/plots.py): one colour per agent name in every figure, 95% intervals of the
mean, paired differences, rolling means, aligned tables."""

import re

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from matplotlib.colors import to_hex  # noqa: E402

from clustergym.core import plots  # noqa: E402
from clustergym.core.agent import list_agents  # noqa: E402
from clustergym.core.family import family_specs  # noqa: E402
from clustergym.runner.evaluation import evaluate  # noqa: E402
from clustergym.core.stats import t_quantile  # noqa: E402

P1 = "clustergym/MultiServerChannel-v0"


def _colors_of(ax) -> dict:
    """label -> line colour (hex) of an axis' labelled lines."""
    from matplotlib.colors import to_hex

    return {ln.get_label(): to_hex(ln.get_color()) for ln in ax.get_lines() if not ln.get_label().startswith("_")}


def test_an_agent_has_the_same_colour_in_two_figures_with_different_agent_sets(tmp_path, monkeypatch):
    res_a = evaluate(P1, ["esdp", "lcf", "random"], seeds=[0, 1], horizon=20, score=False, progress=False)
    res_b = evaluate(P1, ["lwtf", "esdp"], seeds=[0, 1], horizon=20, score=False, progress=False)
    seen = []
    real_save = plots.save

    def spy(fig, path):
        if path.endswith("avg_reward.png"):
            seen.append(_colors_of(fig.axes[0]))
        return real_save(fig, path)

    monkeypatch.setattr(plots, "save", spy)
    plots.plot_results(res_a, str(tmp_path), prefix="a_")
    plots.plot_results(res_b, str(tmp_path), prefix="b_")
    a, b = seen
    assert set(a) == {"esdp", "lcf", "random"} and set(b) == {"lwtf", "esdp"}
    assert a["esdp"] == b["esdp"] == to_hex(plots.agent_color("esdp"))  # first in one figure, second in the other
    assert len(set(a.values())) == 3 and len(set(b.values())) == 2


def test_no_two_agents_of_one_family_share_a_colour():
    for spec in family_specs():
        names = list_agents(family=spec.name)
        colors = [plots.agent_color(n) for n in names]
        assert len(set(colors)) == len(names), (spec.name, dict(zip(names, colors)))


def test_unknown_names_get_a_stable_colour_and_learners_their_own():
    c = plots.agent_color("my-agent[alpha=0.3]")
    assert c == plots.agent_color("my-agent[alpha=0.3]") and c.startswith("#")
    assert plots.agent_color("ppo (3 seeds)") == plots.agent_color("ppo") != plots.agent_color("maskable_ppo")
    assert plots.agent_color("sb3:runs/x/model.zip") == plots.agent_color("sb3:runs/x/model.zip")


def test_mean_ci_is_the_student_t_interval_of_the_mean():
    arr = np.array([[1.0, 2.0], [3.0, 2.0], [5.0, np.nan]])
    m, half = plots.mean_ci(arr)
    np.testing.assert_allclose(m, [3.0, 2.0])
    np.testing.assert_allclose(half[0], t_quantile(2) * 2.0 / np.sqrt(3))  # std 2 over 3 rows
    assert half[1] == 0.0  # two equal values


def test_bands_are_intervals_of_the_mean_not_min_max():
    fig, ax = plots.figure()
    rows = np.random.default_rng(0).normal(size=(20, 5))
    plots.mean_band(ax, np.arange(5), rows, "esdp")
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    m, half = plots.mean_ci(rows)
    assert band.max() <= (m + half).max() + 1e-9 and band.max() < rows.max()  # narrower than min-max
    matplotlib.pyplot.close(fig)


def test_rolling_mean_known_values():
    np.testing.assert_allclose(plots.rolling_mean([1, 2, 3, 4, 5], 2), [1, 1.5, 2.5, 3.5, 4.5])
    np.testing.assert_allclose(plots.rolling_mean([4.0], 10), [4.0])


def test_paired_difference_plot_shows_the_table_interval(tmp_path):
    res = evaluate(P1, ["esdp", "lcf", "random"], seeds=[0, 1, 2], horizon=20, score=False, progress=False)
    paths = plots.plot_results(res, str(tmp_path))
    assert any(p.endswith("paired_difference.png") for p in paths)
    fig, ax = plots.figure()
    comps = res.comparisons(reference="esdp")
    plots.plot_comparisons(ax, comps)
    bars = [c for c in ax.containers]  # one errorbar per agent, top row first
    for comp, eb in zip(comps, bars):
        x = eb.lines[0].get_xdata()[0]
        assert x == pytest.approx(comp.mean)
        seg = eb.lines[2][0].get_segments()[0]
        assert sorted(seg[:, 0]) == pytest.approx([comp.low, comp.high])
    matplotlib.pyplot.close(fig)


def test_legend_sits_outside_the_data():
    fig, ax = plots.figure()
    ax.plot([0, 1], [0, 1], label="esdp")
    plots.style(ax)
    fig.canvas.draw()
    leg = ax.get_legend().get_window_extent()
    assert leg.x0 >= ax.get_window_extent().x1  # right of the axes
    matplotlib.pyplot.close(fig)


def test_results_table_aligns_long_agent_names():
    import dataclasses

    res = evaluate(P1, ["esdp", "lcf", "random"], seeds=[0, 1], horizon=10, score=False, progress=False)
    long_name = "lcf[" + "x" * 40 + "]"
    res = dataclasses.replace(res, runs=[dataclasses.replace(r, agent=long_name) if r.agent == "lcf" else r
                                         for r in res.runs])
    lines = res.table().splitlines()[1:]
    rule, body = lines[1], lines[2:]
    assert len(body) == 3 and any(long_name in ln for ln in body)
    # columns line up: the separators between the rule's dashes are blank in every row, and each cell
    # touches its column's left edge (left-aligned) or right edge (right-aligned)
    seg = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
    assert len(seg) == 7
    for ln in body:
        ln = ln.ljust(len(rule))
        assert len(ln) == len(rule), res.table()
        assert all(ln[b:c].strip() == "" for (_, b), (c, _) in zip(seg, seg[1:])), res.table()
        for k, (a, b) in enumerate(seg):
            cell = ln[a:b]
            if cell.strip():
                assert (cell[0] != " ") if k in (0, 2) else (cell[-1] != " "), (k, res.table())


def test_claims_figure_draws_each_relative_claim_with_its_table_interval(tmp_path, monkeypatch):
    from clustergym.core.stats import paired_comparison

    a = {0: 11.0, 1: 12.0, 2: 10.5}
    ref = {0: 10.0, 1: 10.0, 2: 10.0}
    rows = [{"claim": "OPM > fair", "paper": "+12%", "comparison": paired_comparison(a, ref, agent="opm",
                                                                                     reference="fair")},
            {"claim": "points", "paper": "+9 points",
             "comparison": paired_comparison(a, ref, agent="x", reference="y", relative=False)}]
    seen = []
    real_save = plots.save
    monkeypatch.setattr(plots, "save", lambda fig, path: (seen.append(fig.axes[0]), real_save(fig, path))[1])
    path = plots.plot_claims(rows, str(tmp_path / "c.png"), "claims")
    assert path and (tmp_path / "c.png").exists()
    ax = seen[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["OPM > fair"]  # the absolute row is left out
    eb = ax.containers[0]
    comp = rows[0]["comparison"]
    assert eb.lines[0].get_xdata()[0] == pytest.approx(comp.mean)
    assert to_hex(eb.lines[0].get_color()) == to_hex(plots.agent_color("fair"))  # a paper policy's claim: its baseline
    paper = [c for c in ax.collections if c.get_label() == "the paper's number"]
    assert paper and paper[0].get_offsets()[0][0] == pytest.approx(12.0)
    assert plots.plot_claims(rows[1:], str(tmp_path / "none.png"), "t") is None


def test_agents_of_one_figure_never_share_a_colour():
    # two names whose own colours coincide (hash of an sb3: path, two learners' labels, two options of a policy)
    sb3 = [f"sb3:runs/m{i}" for i in range(40)]
    by = {}
    for n in sb3:
        by.setdefault(plots.agent_color(n), []).append(n)
    clash = next(v for v in by.values() if len(v) > 1)[:2]
    assert plots.agent_color(clash[0]) == plots.agent_color(clash[1])
    for names in (clash, ["ppo (3 seeds)", "ppo[lr=1e-3]"], ["random", *sb3], ["gadget", "gadget[placement=bf]", "drf"]):
        cols = plots.agent_colors(names)
        assert list(cols) == list(dict.fromkeys(names)) and len(set(cols.values())) == len(cols), cols
    cols = plots.agent_colors(["sb3:x", "random", "esdp"])  # the names the table knows keep their own colour
    assert cols["random"] == plots.agent_color("random") and cols["esdp"] == plots.agent_color("esdp")
    assert plots.agent_colors(clash) == plots.agent_colors(clash)  # stable
