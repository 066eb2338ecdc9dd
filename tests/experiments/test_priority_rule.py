"""The learned priority rule for P3: its start is SRPT exactly, each score term ranks as written, the search is
seeded, and rule files load or are refused in one line."""

import json

import numpy as np
import pytest

from clustergym.core.agent import make
from clustergym.experiments.priority_rule import (PARAMS, THETA_SRPT, PriorityRule, load_rule, rule_scores, rule_totals,
                                               rule_totals_many, save_rule, train_rule)
from clustergym.runner.evaluation import evaluate

P3 = "clustergym/RingAllReduce-v0"
GPU_SHORT = {"scenario": "gpu-short"}


def _window(**cols):
    """A three-job window: equal jobs unless ``cols`` says otherwise."""
    n = 3
    base = dict(present=np.ones(n, bool), cap=np.full(n, 2), workers=np.full(n, 2), id=np.arange(n),
                arrival=np.zeros(n), attained=np.zeros(n, np.int64), remaining=np.full(n, 10), zeta=np.ones(n),
                bw=np.full(n, 1.0), lam1=np.full(n, 100.0), lam2=np.full(n, 0.1), lam3=np.full(n, 50.0))
    base.update({k: np.asarray(v) for k, v in cols.items()})
    return base


def _theta(**weights):
    th = dict(zip(PARAMS, (0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0)))
    th.update(weights)
    return [th[k] for k in PARAMS]


def test_the_start_is_srpt_with_row_value_30_bit_for_bit(tmp_path):
    save_rule(str(tmp_path / "rule.json"), THETA_SRPT, env_kwargs=GPU_SHORT)
    res = evaluate(P3, ["srpt[workers=5,row_value=30]", f"rule:{tmp_path}"], [0], 80, env_kwargs=GPU_SHORT,
                   instances=[2, 927], progress=False, score=False)
    tot = {(r.agent, r.instance): r.total_reward for r in res.runs}
    for k in (2, 927):
        assert tot[(f"rule:{tmp_path}", k)] == tot[("srpt[workers=5,row_value=30]", k)]
    assert rule_totals(THETA_SRPT, [927], horizon=80, env_kwargs=GPU_SHORT) == [tot[("srpt[workers=5,row_value=30]",
                                                                                      927)]]


@pytest.mark.parametrize("weights, cols, first", [
    ({"row_value": 30.0}, {"remaining": [30, 5, 10]}, 1),  # SRPT's term: least budget left first
    ({"slots": 5.0}, {"workers": [1, 2, 2], "remaining": [4, 4, 8], "lam1": [0.0, 0.0, 0.0]}, 1),  # 1 slot left
    ({"age": 1.0}, {"arrival": [5, 0, 3], "lam1": [0.0, 0.0, 0.0]}, 1),  # the oldest first
    ({"gain": 10.0}, {"lam3": [500.0, 1.0, 500.0]}, 1),  # the largest increment now (job 1 is at its step)
    ({"gain": 0.0}, {"lam3": [500.0, 1.0, 500.0]}, 0),  # without it, the utility still to gain (job 1 has less)
    ({"bandwidth": 1.0}, {"bw": [1.0, 4.0, 2.0], "lam1": [0.0, 0.0, 0.0]}, 1),  # the widest ring first
    ({"bandwidth": -1.0}, {"bw": [1.0, 4.0, 2.0], "lam1": [0.0, 0.0, 0.0]}, 0),
])
def test_each_score_term_ranks_as_written(weights, cols, first):
    # every other job is equal, so the one term decides: the job it favours is placed first
    win = _window(**cols)
    rows, size = np.arange(3), np.minimum(win["workers"], win["remaining"])
    th = _theta(**weights)
    if "lam1" in cols:  # the utility term is switched off: only the named term is left
        assert np.ptp(rule_scores(_theta(), win, rows, size, 10.0, 5)) == 0.0
    agent = PriorityRule(th)
    agent._t = 10.0
    assert agent._order(win, rows, size)[0] == first


def test_fullness_scales_the_row_worth_with_the_window_filled():
    win = _window(remaining=[2, 20, 20])
    rows, size = np.arange(3), np.full(3, 2)
    s_empty = rule_scores(_theta(row_value=10.0, fullness=1.0), {**win, "present": np.array([1, 0, 0], bool)},
                          rows[:1], size[:1], 0.0, 5)
    s_full = rule_scores(_theta(row_value=10.0, fullness=1.0), win, rows[:1], size[:1], 0.0, 5)
    # (λ1 − μ + c (1 + f n/J)) / left: n/J from 1/3 to 1 adds c · 2/3 over 2 worker-slots left
    assert s_full[0] - s_empty[0] == pytest.approx(10.0 * (2 / 3) / 2)


def test_totals_of_many_rules_keep_each_rule_and_instance_in_its_place():
    thetas, ks = [THETA_SRPT, _theta(age=1.0)], [927, 2, 1004]
    one = [rule_totals(th, ks, horizon=30, env_kwargs=GPU_SHORT) for th in thetas]
    assert len(set(one[0])) == 3  # the instances' totals differ, so a swap would show
    for processes in (1, 2):
        many = rule_totals_many(thetas, ks, horizon=30, env_kwargs=GPU_SHORT, processes=processes)
        assert [m.tolist() for m in many] == one


def test_the_search_is_seeded_and_starts_from_its_start():
    kw = dict(iterations=2, population=3, elite=2, horizon=30, env_kwargs=GPU_SHORT, progress=False)
    a = train_rule([1000, 1004], seed=3, **kw)
    b = train_rule([1000, 1004], seed=3, processes=2, **kw)
    c = train_rule([1000, 1004], seed=4, **kw)
    assert a.theta.tolist() == b.theta.tolist() and a.history == b.history
    assert a.theta.tolist() != c.theta.tolist()
    assert a.history[0]["mean_gain_pct"] == 0.0  # the first iteration's mean candidate is the start itself
    assert a.env_steps == (1 + 2 * 3) * 2 * 30
    with pytest.raises(ValueError, match="at least one"):
        train_rule([], **kw)
    with pytest.raises(ValueError, match="elite"):
        train_rule([1000], seed=0, **{**kw, "elite": 4})


def test_rule_files_round_trip_and_bad_ones_are_refused(tmp_path):
    path = tmp_path / "r" / "rule.json"
    save_rule(str(path), _theta(row_value=7.0, age=0.5), training={"seed": 1})
    agent = make(f"rule:{path}", family="ringallreduce")
    assert agent.theta.tolist() == _theta(row_value=7.0, age=0.5) and agent.workers == 5
    assert make(f"rule:{path.parent}[workers=3]", family="ringallreduce").workers == 3
    with pytest.raises(ValueError, match="cannot act in family"):
        make(f"rule:{path}", family="approxjobs")
    doc = json.loads(path.read_text())
    for broken, match in ((dict(doc, format="x"), "not a rule file"),
                          (dict(doc, theta={k: v for k, v in doc["theta"].items() if k != "age"}), "lacks age"),
                          (dict(doc, theta=dict(doc["theta"], exponent=-1.0)), "exponent")):
        path.write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=match):
            load_rule(str(path))
    path.write_text("{")
    with pytest.raises(ValueError, match="not a rule file"):
        load_rule(str(path))
    with pytest.raises(FileNotFoundError, match="no rule file"):
        load_rule(str(tmp_path / "none.json"))
    with pytest.raises(FileNotFoundError, match="no pretrained rule"):
        load_rule("pretrained/Nothing-v0")
    with pytest.raises(ValueError, match="7 finite numbers"):
        PriorityRule([1.0, 2.0])


def test_the_benchmark_trains_validates_and_resumes(tmp_path):
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [sys.executable, os.path.join(root, "benchmarks", "p3_priority_rule.py"), "--seeds", "0", "--train",
           "1000-1001", "--iterations", "1", "--population", "2", "--elite", "1", "--validation", "900-901",
           "--horizon", "40", "--workers", "1", "--out", str(tmp_path)]
    first = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "| mean of the seeds' totals |" in first.stdout and "| 0 | row_value=" in first.stdout
    rule = tmp_path / "seed0" / "rule.json"
    stamp = rule.stat().st_mtime_ns
    again = subprocess.run(cmd, capture_output=True, text=True, check=True)  # the fitted seed is not trained again
    assert rule.stat().st_mtime_ns == stamp and "cross-entropy search" not in again.stderr
    overlap = subprocess.run(cmd[:-2] + ["--validation", "1000-1001", "--out", str(tmp_path)], capture_output=True,
                             text=True)
    assert overlap.returncode == 2 and "must be disjoint" in overlap.stderr


def test_the_hindsight_ceiling_fits_one_rule_per_instance_and_saves_none(tmp_path):
    """``--hindsight``: a search per validation instance on that instance alone; each gain is at least 0 (SRPT is the
    search's first candidate) and the per-instance gains are those the search itself records; no rule file."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = tmp_path / "h"
    cmd = [sys.executable, os.path.join(root, "benchmarks", "p3_priority_rule.py"), "--hindsight", "--iterations", "2",
           "--population", "4", "--elite", "2", "--validation", "900-901", "--horizon", "40", "--workers", "1",
           "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    got = json.loads((out / "results.json").read_text())["hindsight"]
    assert got["instances"] == [900, 901] and all(g >= 0 for g in got["gain_pct"])
    for k, g in zip(got["instances"], got["gain_pct"]):
        fit = train_rule([k], seed=0, iterations=2, population=4, elite=2, horizon=40,
                         env_kwargs={"scenario": "gpu-short"}, progress=False)
        assert g == max(h["best_gain_pct"] for h in fit.history)
        assert f"| {k} | {g:+.2f}% |" in res.stdout
    assert not list(out.glob("**/rule.json"))
