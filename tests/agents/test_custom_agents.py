"""Your own agent everywhere an agent name is accepted: pkg.module:Class and path/to/file.py:Class."""

from __future__ import annotations

import json
import os
import sys

import pytest

from clustergym.cli.main import main
from clustergym.runner.evaluation import evaluate
from tests.helpers import ROOT as REPO_ROOT

P1 = "clustergym/MultiServerChannel-v0"
EXAMPLE = os.path.join(REPO_ROOT, "examples", "my_agent.py")


def test_example_agent_beside_paper_agents_from_the_cli_with_workers(tmp_path, capsys):
    out = tmp_path / "mine"
    spec = f"{EXAMPLE}:MyAgent"
    assert main(["run", P1, "--agents", f"{spec},esdp,hauf", "--seeds", "0-2", "--workers", "2", "--horizon", "60",
                 "--no-progress", "--no-plots", "--out", str(out)]) == 0
    d = json.loads((out / "results.json").read_text())
    assert [r["agent"] for r in d["runs"]].count(spec) == 3
    assert all(r["steps"] == 60 for r in d["runs"])


def test_module_agent_with_options_equals_file_agent(tmp_path, monkeypatch):
    (tmp_path / "myagents_pkg.py").write_text(open(EXAMPLE).read())
    monkeypatch.syspath_prepend(str(tmp_path))
    res = evaluate(P1, ["myagents_pkg:MyAgent[epsilon=0.2]", f"{EXAMPLE}:MyAgent[epsilon=0.2]"], seeds=[1],
                   horizon=50, progress=False, score=False)
    a, b = res.runs
    assert a.total_reward == b.total_reward  # same class, same options, same seed
    c = evaluate(P1, [f"{EXAMPLE}:MyAgent[epsilon=0.9]"], seeds=[1], horizon=50, progress=False, score=False).runs[0]
    assert c.total_reward != a.total_reward  # the option is applied


@pytest.mark.parametrize("spec,word", [
    ("examples/nope.py:MyAgent", "no file"),
    (f"{EXAMPLE}:Nope", "has no 'Nope'"),
    (f"{EXAMPLE}:np", "is not an agent"),
    ("json:JSONDecoder", "is not an agent"),
    ("no_such_module_xyz:X", "cannot import"),
    (f"{EXAMPLE}:MyAgent[epsilon=abc]", "epsilon"),
    (f"{EXAMPLE}:MyAgent[nope=1]", "nope"),
])
def test_bad_custom_agent_is_one_line_exit_2(tmp_path, capsys, spec, word):
    rc = main(["run", P1, "--agents", spec, "--horizon", "5", "--no-progress", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and word in err[0], err


def test_custom_agent_of_another_family_is_refused(tmp_path, capsys):
    rc = main(["run", "clustergym/ApproxJobs-v0", "--agents", f"{EXAMPLE}:MyAgent", "--horizon", "5",
               "--no-progress", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot act in family 'approxjobs'" in err


def test_a_file_that_fails_to_import_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    rc = main(["run", P1, "--agents", f"{bad}:A", "--horizon", "5", "--no-progress", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "boom" in err[0]
    assert not any(k.startswith("clustergym_user_") and "bad_py" in k for k in sys.modules)
