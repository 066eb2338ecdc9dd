"""``clustergym reproduce PAPER --instances A-B``: every experiment of the paper compares over those
instances, and ``results.json`` and the report name them. The runs use the hidden ``--tiny`` option
(a few slots per run): they test the machinery, not the numbers."""

import json
import os

import pytest

from clustergym.cli.main import main
from clustergym.experiments import describe_instances, instances_for, list_papers
from tests.helpers import ROOT as REPO_ROOT

INSTANCES = [20, 21]  # two instances nobody else uses, the fewest with an interval


def _instances_in(obj) -> set:
    """Every instance a results.json names: its top-level list and each claim's per-instance keys."""
    found = set(obj.get("instances") or [])
    for c in obj.get("claims", []):
        found |= {int(k) for k in (c.get("comparison") or {}).get("per_instance", {})}
    return found


@pytest.mark.parametrize("paper", list_papers())
def test_reproduce_runs_on_the_instances_it_is_given(paper, tmp_path):
    out = tmp_path / "r"
    assert main(["reproduce", paper, "--quick", "--instances", "20-21", "--tiny", "--workers", "1", "--no-progress",
                 "--out", str(out)]) == 0
    d = out / paper
    res = json.loads((d / "results.json").read_text())
    assert res["instances"] == INSTANCES
    if paper == "esdp":  # the runner's results.json: every run on those instances
        assert {r["instance"] for r in res["runs"]} == set(INSTANCES)
    else:  # every claim compares over exactly those instances
        claims = [c for c in res["claims"] if c.get("comparison")]
        assert claims and all({int(k) for k in c["comparison"]["per_instance"]} == set(INSTANCES) for c in claims)
    assert _instances_in(res) == set(INSTANCES)
    if paper == "ogasched":  # each setting's runner results too
        for st in ("paper", "authors-code"):
            sub = json.loads((d / st / "results.json").read_text())
            assert {r["instance"] for r in sub["runs"]} == set(INSTANCES)
    report = (d / "report.md").read_text()
    assert "20, 21" in report and "tiny test mode" in report
    assert "0..4" not in report and "[0, 1, 2, 3, 4]" not in report


def test_reproduce_all_passes_the_instances_to_every_paper(tmp_path, monkeypatch):
    """``reproduce all --instances``: every paper gets the same list; the combined report names it."""
    from clustergym import experiments

    seen = {}

    def fake(quick, out, workers, progress, instances=None, tiny=False, name=""):
        seen[name] = (quick, list(instances), tiny)
        os.makedirs(os.path.join(out, name), exist_ok=True)
        path = os.path.join(out, name, "report.md")
        with open(path, "w") as f:
            f.write(f"# {name}\n")
        return path

    for name in list_papers():
        mod = experiments.load(name)
        monkeypatch.setattr(mod, "reproduce", lambda *a, _n=name, **k: fake(*a, name=_n, **k))
    out = tmp_path / "r"
    assert main(["reproduce", "all", "--quick", "--instances", "30-41", "--no-progress", "--out", str(out)]) == 0
    assert seen == {n: (True, list(range(30, 42)), False) for n in list_papers()}
    combined = (out / "report.md").read_text()
    assert "30–41 (12)" in combined


def test_default_instances_are_ten_quick_and_twenty_full():
    assert instances_for(True) == list(range(10)) and instances_for(False) == list(range(20))
    assert instances_for(True, [5, 3]) == [5, 3]
    with pytest.raises(ValueError, match="instances"):
        instances_for(True, [1, 1])
    assert describe_instances(range(20, 30)) == "20–29" and describe_instances([3, 5]) == "3, 5"


@pytest.mark.parametrize("bad, word", [("3,3", "twice"), ("x", "malformed"), ("5-2", "empty")])
def test_reproduce_instances_errors_are_one_line(bad, word, tmp_path, capsys):
    assert main(["reproduce", "esdp", "--quick", "--instances", bad, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--instances" in err and word in err and len(err.splitlines()) == 1


def test_update_claims_copies_every_claims_table_between_the_markers():
    """docs/update_claims.py: the tables the docs show are the report's claims tables, whole."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("update_claims", os.path.join(
        str(REPO_ROOT), "docs", "update_claims.py"))
    uc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(uc)
    report = "\n".join(["# ESDP reproduction (quick mode)", "", "`env`, 10 instances (scenario_seed 0–9).", "",
                        "## The paper's claims", "", "| claim | paper | ours | verdict |", "|---|---|---|---|",
                        "| a > b | +5% | +1% [+0.5, +1.5] | **direction only** |", "",
                        "Statistic (clustergym.core.stats): per instance ...", "", "Verdicts (docs/evaluation.md): ...", "",
                        "## Other", "", "| agent | x |", "|---|---|", "| a | 1 |", "",
                        "## More claims", "", "| claim | paper | ours | verdict |", "|---|---|---|---|",
                        "| c > d | +2% | -1% [-2, -0.5] | **not reproduced** |", ""])
    body = uc.claims_blocks(report)
    assert "10 instances (scenario_seed 0–9)" in body and "**The paper's claims**" in body
    assert "**direction only**" in body and "**not reproduced**" in body and "Verdicts (docs" in body
    assert "| agent | x |" not in body  # only claims tables
    page = "intro\n<!-- quick-claims:esdp -->\nold\n<!-- /quick-claims:esdp -->\nrest\n"
    new = uc.replace_between(page, "esdp", body)
    assert "old" not in new and new.startswith("intro\n") and new.endswith("rest\n") and body in new
    with pytest.raises(ValueError, match="quick-claims:gadget"):
        uc.replace_between(page, "gadget", body)


def test_opm_tables_survive_a_job_list_with_nothing_spent(tmp_path):
    """In a few slots an agent may spend nothing on a job list (instance 0 in tiny mode): its work per unit of
    budget is undefined (NaN in the tables), not a ZeroDivisionError."""
    assert main(["reproduce", "opm", "--quick", "--instances", "0", "--tiny", "--workers", "1", "--no-progress",
                 "--out", str(tmp_path / "r")]) == 0
