"""``clustergym reproduce PAPER --only EXPERIMENT``: one experiment of a paper alone (clustergym.experiments.single),
in the tiny test mode (a few slots: the numbers mean nothing, the wiring is what is tested): the names in ``--help``
and in ``--plan``, one-line errors for a bad name, and one experiment of each paper writing its own report and
claims rows only."""

import json
import re
import os

import pytest

from clustergym.cli.main import main
from clustergym.experiments import list_papers
from clustergym.experiments import alone as single
from clustergym.experiments.extra import esdp_more, ogasched_more

BASE = ["--tiny", "--instances", "0", "--workers", "1", "--no-progress"]


def test_help_lists_every_papers_experiments(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert set(single.EXPERIMENTS) == set(list_papers())
    for paper, names in single.EXPERIMENTS.items():
        assert f"{paper}: {', '.join(names)}" in text


@pytest.mark.parametrize("args, words", [
    (["opm", "--only", "nope"], ["--only 'nope'", "opm", "price"]),
    (["all", "--only", "price"], ["--only", "all"]),
    (["esdp", "--quick", "--only", "servers"], ["--only servers", "full mode only"]),
    (["gadget", "--only", "price"], ["--only 'price'", "scarce, fig7, trace"]),
])
def test_a_bad_experiment_exits_2_with_one_line_and_writes_nothing(args, words, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["reproduce", *args, *BASE, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    for w in words:
        assert w in err, err
    assert not out.exists()


def _run(paper, name, tmp_path, capsys, quick):
    out = tmp_path / "out"
    args = ["reproduce", paper, *(["--quick"] if quick else []), "--only", name, *BASE, "--out", str(out)]
    assert main(args) == 0
    capsys.readouterr()
    assert {f for f in os.listdir(out) if not f.startswith(".")} - {"store"} == {paper}  # store: the runs, if any
    assert sorted(os.listdir(out / paper)) == ["report.md", "results.json"]
    doc = json.loads((out / paper / "results.json").read_text())
    assert doc["experiment"] == name and doc["mode"] == "tiny test" and doc["instances"] == [0]
    report = (out / paper / "report.md").read_text()
    assert report.startswith(f"# {paper}: {name} alone (tiny test mode)")
    claims = [c["claim"] for c in doc["claims"]]
    assert claims and all(c.replace("\\|", "|") in report.replace("\\|", "|") for c in claims)
    return claims, report


def test_esdp_servers_alone(tmp_path, capsys):
    claims, report = _run("esdp", "servers", tmp_path, capsys, quick=False)
    assert "(Fig. 12)" in report and all("Fig. 12" in c for c in claims)
    assert "δ(t) (Fig. 7)" not in report and "Regret against the horizon" not in report


def test_ogasched_table2_alone(tmp_path, capsys, monkeypatch):
    # the hindsight optima are exact LPs on the paper-size scenario (seconds each): a stand-in common value here
    monkeypatch.setattr(ogasched_more, "hindsight", lambda tasks, workers: [[1e4] * len(t[2]) for t in tasks])
    claims, report = _run("ogasched", "table2", tmp_path, capsys, quick=False)
    assert all("Table 2" in c for c in claims) and "Fig. 4" not in report


def test_gadget_fig7_alone(tmp_path, capsys):
    claims, report = _run("gadget", "fig7", tmp_path, capsys, quick=True)
    assert all("Fig. 7" in c for c in claims) and "scarce" not in report


def test_opm_price_alone(tmp_path, capsys):
    claims, report = _run("opm", "price", tmp_path, capsys, quick=True)
    assert "The price rule" in report and "Fig. 1a" not in report and "Fig. 3" not in report


def test_plan_lists_the_experiments_and_only_the_named_ones_runs(tmp_path, capsys):
    assert main(["reproduce", "esdp", "--plan", *BASE, "--out", str(tmp_path / "a")]) == 0
    whole = capsys.readouterr().out
    assert "Experiments that run alone (`--only NAME`): regret, sequences, servers." in whole
    assert main(["reproduce", "esdp", "--only", "servers", "--plan", *BASE, "--out", str(tmp_path / "b")]) == 0
    alone = capsys.readouterr().out
    rows = [ln for ln in alone.splitlines() if ln.startswith("| MultiServerChannel")]
    # one row per |R| of the tiny sweep, and not the main study's (defaults) row
    assert len(rows) == len(esdp_more.TINY["servers"]) and all("num_servers=" in r for r in rows)
    assert any("| defaults |" in ln for ln in whole.splitlines())


def test_the_runs_of_one_experiment_are_the_whole_reproductions(tmp_path, capsys):
    """One store serves both: the runs ``--only price`` made are the ones the whole reproduction's plan finds stored."""
    out = str(tmp_path / "out")
    assert main(["reproduce", "opm", "--quick", "--only", "price", *BASE, "--out", out]) == 0
    assert main(["reproduce", "opm", "--quick", "--only", "price", "--plan", *BASE, "--out", out]) == 0
    alone = re.search(r"\*\*opm\*\*: (\d+) runs, (\d+) stored", capsys.readouterr().out)
    assert alone and int(alone[1]) == int(alone[2]) > 0
    assert main(["reproduce", "opm", "--quick", "--plan", *BASE, "--out", out]) == 0
    whole = re.search(r"\*\*opm\*\*: ([\d,]+) runs, (\d+) stored", capsys.readouterr().out)
    assert whole and int(whole[2]) == int(alone[1]) and int(whole[1].replace(",", "")) > int(alone[1])
