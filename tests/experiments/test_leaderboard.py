"""The leaderboard (clustergym.experiments.leaderboard): the page is what its stored scores say, every env has a
board of every shipped agent on held-out instances, and the command works end to end on a toy size."""

from __future__ import annotations

import csv
import json
import os

import pytest

from clustergym.core.family import family_specs
from clustergym.experiments import leaderboard as lb
from clustergym.experiments.leaderboard_page import read_boards, render
from clustergym.learning.sb3_agent import PRETRAINED_DIR
from clustergym.runner.evaluation import evaluate


def test_the_page_is_the_one_its_stored_scores_give():
    """docs/leaderboard.md == render(docs/data/leaderboard, docs/leaderboard/curves): regenerate it with
    ``python -m clustergym.experiments.leaderboard --page-only`` after editing the scores or the template."""
    with open(lb.PAGE, encoding="utf-8") as f:
        assert f.read() == render(lb.DATA, lb.CURVES)


def test_every_env_has_a_board_of_every_shipped_agent_on_held_out_instances():
    boards = {b.get("name") or b["env_id"].split("/")[-1]: b for b in read_boards(lb.DATA)}
    keys = lb.board_specs()
    assert {s.name for _, s in keys} == {s.name for s in family_specs()} and len(keys) == len(boards) == 5
    for key, spec in keys:
        name = lb.board_name(key, spec)
        board = boards[name]
        assert board["env_id"] == spec.env_ids[0] and board["run_env_kwargs"].items() >= lb.BOARDS[key]["set"].items()
        agents = {a["agent"] for a in board["agents"]}
        assert {a for a, _ in lb.board_agents(spec, key)} == agents
        assert {spec.paper_agent, "random", f"sb3:pretrained/{name}", *lb.BOARDS[key].get("extra", ())} <= agents
        with open(os.path.join(PRETRAINED_DIR, name, "clustergym.json"), encoding="utf-8") as f:
            trained = set(json.load(f)["instances"])
        assert not trained & set(board["instances"]), name  # held out from the model's training pool
        assert not set(range(900, 1000)) & set(board["instances"]), name  # and from its validation instances
        assert len(board["instances"]) >= 3
        for a in board["agents"]:  # a value and a bound on every instance; a score where the bound is above random's
            inst = {str(i) for i in board["instances"]}
            assert set(a["scores"]) <= set(a["values"]) == set(a["bounds"]) == inst, (name, a["agent"])
        assert set(board["bounds"]) == {str(i) for i in board["instances"]}
        rnd = next(a for a in board["agents"] if a["agent"] == "random")
        assert all(abs(s) < 1e-9 for s in rnd["scores"].values())  # the score's zero


def _monitor(folder, returns):
    os.makedirs(os.path.join(folder, "monitor"))
    with open(os.path.join(folder, "monitor", "0.monitor.csv"), "w") as f:
        f.write('#{"t_start": 0.0, "env_id": "x"}\nr,l,t\n')
        for i, r in enumerate(returns):
            f.write(f"{r},100,{i + 1}.0\n")


def test_the_command_end_to_end_on_a_toy_size(tmp_path, monkeypatch):
    """P4 on two instances at 100 slots (without the pretrained model: loading it takes longer than the rest):
    runs, data, page; then a row for an agent scored the board's way, and one line naming the setting when a
    folder was scored another way."""
    monkeypatch.setattr(lb, "PRETRAINED_DIR", str(tmp_path / "no-models"))
    out, data, curves, page = (str(tmp_path / n) for n in ("out", "data", "curves", "page.md"))
    _monitor(str(tmp_path / "train"), [4.0, 1.5, 2.5])
    argv = ["--envs", "P4", "--instances", "0-1", "--horizon", "100", "--workers", "1", "--out", out, "--data", data,
            "--curves-dir", curves, "--page", page, "--curves", f"ApproxJobs-v0={tmp_path / 'train'}"]
    assert lb.main(argv) == 0
    (board,) = read_boards(data)
    assert board["horizon"] == 100 and board["instances"] == [0, 1] and board["env_id"] == "clustergym/ApproxJobs-v0"
    text = open(page, encoding="utf-8").read()
    assert text == render(data, curves) and "## P4 ApproxJobs-v0" in text and "## P1" not in text
    assert "(leaderboard/curves/ApproxJobs-v0.csv)" in text
    with open(os.path.join(curves, "ApproxJobs-v0.csv"), newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["steps", "episode", "return"] and [r[2] for r in rows[1:]] == ["4", "1.5", "2.5"]
    assert [int(r[0]) for r in rows[1:]] == [100, 200, 300]
    for a in board["agents"]:  # the table shows each agent's mean score over the instances
        mean = sum(a["scores"].values()) / 2
        assert f"| `{a['agent']}` | {a['kind']} | {mean:.3f} [" in text, a["agent"]

    mine = str(tmp_path / "mine")
    evaluate("clustergym/ApproxJobs-v0", ["fair", "random"], seeds=[0], horizon=100, instances=[0, 1],
             progress=False).write(mine, plots=False)
    row = lb.row_of(mine, data)
    fair = next(a for a in board["agents"] if a["agent"] == "fair")
    assert row.startswith("| `fair` | yours | ") and f"{sum(fair['scores'].values()) / 2:.3f} [" in row
    with open(os.path.join(mine, "results.json"), encoding="utf-8") as f:
        res = json.load(f)
    for key, value, said in (("horizon", 120, "horizon 120, the board uses 100"),
                             ("instances", [0, 2], r"instances \[0, 2\], the board uses \[0, 1\]"),
                             ("env_kwargs", {}, r"env_kwargs \{\}, the board uses \{'oracle': True\}")):
        other = tmp_path / f"other-{key}"
        other.mkdir()
        (other / "results.json").write_text(json.dumps({**res, key: value}), encoding="utf-8")
        with pytest.raises(SystemExit, match=said):
            lb.row_of(str(other), data)


def test_the_gpu_short_board_and_its_rows(tmp_path):
    """P3 has a second board, on its ``gpu-short`` scenario, selected as ``--envs P3-gpu-short``; a run folder of
    that scenario gets its row from it, one of the default scenario from P3's own; an unknown id is one line."""
    data = {b.get("name"): b for b in read_boards(lb.DATA)}
    short = data["RingAllReduce-v0-gpu-short"]
    assert short["run_env_kwargs"]["scenario"] == "gpu-short" and "--envs P3-gpu-short " in short["command"]
    assert lb.board_specs({"P3-GPU-SHORT"}) == [("ringallreduce-gpu-short", lb.board_specs({"P3"})[0][1])]
    mine = str(tmp_path / "mine")
    srpt = "srpt[workers=5,row_value=30]"
    evaluate("clustergym/RingAllReduce-v0", [srpt, "random"], seeds=short["seeds"], horizon=short["horizon"],
             instances=short["instances"], env_kwargs={"scenario": "gpu-short"}, progress=False).write(mine, plots=False)
    row = next(a for a in short["agents"] if a["agent"] == srpt)
    mean = sum(row["scores"].values()) / len(row["scores"])
    assert lb.row_of(mine, lb.DATA).startswith(f"| `{srpt}` | yours | {mean:.3f} [")
    with pytest.raises(SystemExit, match="--envs: no board P9; the boards are P1, P2, P3, P4, P3-gpu-short"):
        lb.main(["--envs", "P9", "--out", str(tmp_path)])


def test_bad_inputs_are_one_line_naming_the_option(tmp_path):
    with pytest.raises(SystemExit, match="--instances: malformed 'a-b'"):
        lb.main(["--instances", "a-b", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--row: .*results.json does not exist"):
        lb.main(["--row", str(tmp_path)])
    (tmp_path / "t" / "monitor").mkdir(parents=True)
    with pytest.raises(SystemExit, match="--curves: .* no finished training episode"):
        lb.write_curve(str(tmp_path / "t"), str(tmp_path / "c.csv"))
