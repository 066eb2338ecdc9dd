"""Runner, results.json contract, CLI behaviour and the no-metrics guarantee for agents."""

import json
import os

import numpy as np
import pytest

import clustergym
from clustergym.core import family as family_mod
from clustergym.core.agent import BaseAgent
from clustergym.cli.main import main
from clustergym.runner.episode import run_one
from clustergym.runner.evaluation import evaluate

ID = "clustergym/MultiServerChannel-v0"
SMALL = {"num_servers": 12}


class SpyAgent(BaseAgent):
    """Records every info it is handed, to prove agents never see metrics."""

    name = "spy"
    families = ("multiserver-channel",)
    seen: list = []

    def act(self, obs, info):
        SpyAgent.seen.append(("act", info))
        return np.zeros(self.problem.num_edges, dtype=np.int8)

    def update(self, obs, action, reward, next_obs, info):
        SpyAgent.seen.append(("update", info))


@pytest.fixture
def spy(monkeypatch):
    """The spy agent, registered for one test (registered at import, it would join the registry-parametrised
    tests of every module collected after this one)."""
    monkeypatch.setitem(family_mod._AGENTS, "spy", {"multiserver-channel": "tests.cli.test_runner_cli:SpyAgent"})
    return SpyAgent


def test_agents_never_receive_metrics(spy):
    SpyAgent.seen.clear()
    run_one(ID, "spy", seed=0, horizon=30, env_kwargs=SMALL)
    assert len(SpyAgent.seen) == 60
    assert all("metrics" not in info for _, info in SpyAgent.seen)
    assert all("feedback" in info for kind, info in SpyAgent.seen if kind == "update")


def test_results_json_contract_and_files(tmp_path):
    res = evaluate(ID, ["hauf", "random"], seeds=[0, 1], horizon=40, env_kwargs=SMALL, progress=False)
    paths = res.write(str(tmp_path))
    d = json.load(open(tmp_path / "results.json"))
    assert {"env_id", "env_kwargs", "horizon", "version", "runs", "summary"} <= d.keys()
    assert d["env_id"] == ID and d["horizon"] == 40 and d["version"] == clustergym.__version__
    run_keys = {"agent", "seed", "total_reward", "mean_reward", "regret", "oracle_total", "steps", "wall_s",
                "decision_ms_median", "decision_ms_p95", "metrics"}
    assert len(d["runs"]) == 4 and all(run_keys <= r.keys() for r in d["runs"])
    assert all(r["regret"] >= -1e-9 and r["oracle_total"] >= r["regret"] for r in d["runs"])
    summ = {s["agent"]: s for s in d["summary"]}
    assert set(summ) == {"hauf", "random"} and all(s["n"] == 2 for s in summ.values())
    for s in summ.values():
        assert {"mean_total_reward", "std_total_reward", "mean_regret", "n"} <= s.keys()
    lines = open(tmp_path / "curves.csv").read().splitlines()
    assert lines[0] == "agent,seed,t,reward,cumulative_reward,cumulative_regret,instance"
    assert len(lines) == 1 + 4 * 40
    assert {os.path.basename(p) for p in paths} >= {"avg_reward.png", "cumulative_regret.png"}
    for p in paths:
        assert os.path.getsize(p) > 0


def test_same_seed_runs_are_identical_and_parallel_matches_serial():
    a = evaluate(ID, ["esdp", "lwtf"], seeds=[0, 1], horizon=40, env_kwargs=SMALL, progress=False)
    b = evaluate(ID, ["esdp", "lwtf"], seeds=[0, 1], horizon=40, env_kwargs=SMALL, progress=False, workers=2)
    for ra, rb in zip(a.runs, b.runs):
        assert (ra.agent, ra.seed) == (rb.agent, rb.seed)
        assert ra.total_reward == rb.total_reward and ra.regret == rb.regret
        assert np.array_equal(ra.reward, rb.reward)


def test_curves_regret_is_cumulative_of_per_slot():
    r = run_one(ID, "random", seed=0, horizon=50, env_kwargs={**SMALL, "oracle": True})
    assert np.all(np.diff(r.cum_regret) >= -1e-9)
    assert r.cum_regret[-1] == pytest.approx(r.regret)


@pytest.mark.parametrize("argv, msg", [
    (["run", ID, "--agents", "nosuch", "--out", "X"], "unknown agent 'nosuch'"),
    (["run", "clustergym/Nope-v0", "--agents", "hauf", "--out", "X"], "unknown env id 'clustergym/Nope-v0'"),
    (["run", ID, "--agents", "hauf", "--set", "rho", "--out", "X"], "malformed --set 'rho'"),
    (["run", ID, "--agents", "hauf", "--set", "rho=1.5", "--out", "X"], "rho=1.5 is invalid"),
    (["run", ID, "--agents", "hauf", "--seeds", "a,b", "--out", "X"], "malformed --seeds"),
    (["run", ID, "--agents", "esdp[alpha=7]", "--out", "X"], "alpha=7 is invalid"),
])
def test_cli_bad_input_one_line_exit_2(argv, msg, capsys, tmp_path):
    argv = [a if a != "X" else str(tmp_path / "out") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and msg in err and err.startswith("clustergym: error:")
    assert not (tmp_path / "out").exists()  # nothing written on bad input


def test_cli_run_writes_outputs(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", ID, "--agents", "hauf,lcf,esdp[only_active=true]", "--seeds", "0-1", "--horizon", "30",
                 "--set", "num_servers=10", "--no-progress", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "esdp[only_active=true]" in text and "hauf" in text
    d = json.load(open(out / "results.json"))
    # the env kwargs the runs used: the user's and the oracle the score turned on (score_env_kwargs)
    assert d["env_kwargs"] == {"num_servers": 10, "oracle": True} and len(d["runs"]) == 6


def test_cli_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert ID in out and "esdp" in out and "lwtf" in out


def test_list_agents_by_env():
    assert {"esdp", "hauf", "lcf", "lwtf", "random"} <= set(clustergym.list_agents(ID))


def test_combined_reproduce_report(tmp_path):
    """`reproduce all` writes one report: every paper's section, links pointing into its folder."""
    from clustergym.experiments import write_combined_report

    reports = []
    for name in ("esdp", "opm"):
        d = tmp_path / name
        d.mkdir()
        (d / "report.md").write_text(f"# {name} reproduction\n\n| a | b |\n|---|---|\n\n![fig](fig.png)\n"
                                     f"[data](results.json) [web](https://example.org/x)\n")
        reports.append(str(d / "report.md"))
    path = write_combined_report(str(tmp_path), ["esdp", "opm"], reports, [61.0, 119.0], True, 2)
    text = open(path).read()
    assert path == str(tmp_path / "report.md")
    assert "total wall time 3.0 min" in text
    assert "| esdp | [esdp/report.md](esdp/report.md) | 61 s |" in text
    assert "## esdp reproduction" in text and "## opm reproduction" in text
    assert "![fig](esdp/fig.png)" in text and "![fig](opm/fig.png)" in text
    assert "[data](opm/results.json)" in text and "(https://example.org/x)" in text


def test_shared_worker_pool_gives_same_results():
    """evaluate() calls inside one worker_pool reuse its processes; results equal the in-process runs."""
    from clustergym.runner.workers import _SHARED_POOL, worker_pool

    env_id, agents = "clustergym/ApproxJobs-v0", ["fair", "random"]
    ref = clustergym.evaluate(env_id, agents, [0, 1], 60, workers=1, progress=False)
    with worker_pool(2) as ex:
        a = clustergym.evaluate(env_id, agents, [0, 1], 60, workers=2, progress=False)
        b = clustergym.evaluate(env_id, agents, [0, 1], 60, workers=2, progress=False)
        assert _SHARED_POOL[2] is ex
    assert 2 not in _SHARED_POOL  # shut down at the end of the block
    for res in (a, b):
        assert [(r.agent, r.seed, r.total_reward) for r in res.runs] == \
            [(r.agent, r.seed, r.total_reward) for r in ref.runs]
        for r, q in zip(res.runs, ref.runs):
            np.testing.assert_array_equal(r.reward, q.reward)


@pytest.mark.parametrize("kw,word", [({"seeds": [0.7, 1.9]}, "seeds"), ({"horizon": 5.9}, "horizon"),
                                     ({"horizon": "5"}, "horizon"), ({"workers": 1.9}, "workers"),
                                     ({"instances": [0.5]}, "instances"), ({"seeds": [True]}, "seeds")])
def test_evaluate_rejects_coerced_arguments(kw, word):
    from clustergym.runner.evaluation import evaluate

    args = dict(env_id="clustergym/MultiServerChannel-v0", agents=["hauf"], seeds=[0], horizon=5, progress=False)
    args.update(kw)
    with pytest.raises(ValueError, match=word):
        evaluate(**args)


def test_evaluate_takes_a_single_agent_name_as_one_agent():
    from clustergym.runner.evaluation import evaluate

    res = evaluate("clustergym/MultiServerChannel-v0", "hauf", seeds=[0], horizon=5, progress=False, score=False)
    assert [r.agent for r in res.runs] == ["hauf"]


def test_curves_csv_round_trips_bracketed_agent_names(tmp_path):
    import csv

    from clustergym.runner.evaluation import evaluate

    name = "esdp[alpha=0.4,only_active=true]"
    res = evaluate("clustergym/MultiServerChannel-v0", [name, "hauf"], seeds=[0], horizon=4, progress=False,
                   score=False)
    res.write(str(tmp_path), plots=False)
    with open(tmp_path / "curves.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["agent", "seed", "t", "reward", "cumulative_reward", "cumulative_regret", "instance"]
    assert {r[0] for r in rows[1:]} == {name, "hauf"}
    assert all(len(r) == 7 for r in rows)


@pytest.mark.parametrize("argv", [
    ["run", "clustergym/MultiServerChannel-v0", "--agents", "hauf", "--horizon", "5", "--out", "{f}"],
    ["run", "clustergym/MultiServerChannel-v0", "--agents", "hauf", "--horizon", "5", "--out", "{f}/x"],
    ["bench", "--only", "esdp", "--quick", "--out", "{f}/x.json"],
    ["bench", "--only", "esdp", "--quick", "--out", "{d}"],
    ["reproduce", "esdp", "--quick", "--out", "{f}/r"],
    ["train", "clustergym/MultiServerChannel-v0", "--algo", "ppo", "--timesteps", "10", "--out", "{f}"],
])
def test_bad_out_fails_before_any_work(tmp_path, capsys, argv):
    import time

    f = tmp_path / "afile"
    f.write_text("keep me")
    t0 = time.perf_counter()
    rc = main([a.format(f=f, d=tmp_path) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--out" in err[0]
    assert time.perf_counter() - t0 < 5  # refused up front, not after the work
    assert f.read_text() == "keep me"


_E = "clustergym/MultiServerChannel-v0"


@pytest.mark.parametrize("argv,word", [
    (["run", _E, "--agents", "hauf", "--seeds=-1", "--horizon", "5"], "seeds"),
    (["run", _E, "--agents", "hauf", "--set", "render_mode=human", "--horizon", "5"], "render_mode"),
    (["run", _E, "--agents", "hauf", "--set", "horizon=5"], "--horizon"),
    (["run", _E, "--agents", "hauf", "--seeds", "5-1"], "empty"),
    (["run", _E, "--agents", "hauf", "--set", "scenario_seed=-1", "--horizon", "5"], "scenario_seed"),
    (["run", _E, "--agents", "hauf", "--set", "scenario_seed=1.5", "--horizon", "5"], "scenario_seed"),
    (["run", _E, "--agents", "hauf", "--instances", "3-1", "--horizon", "5"], "--instances"),
    (["reproduce", "esdp", "--workers", "0"], "--workers"),
    (["train", _E, "--algo", "ppo", "--timesteps", "100", "--eval-freq", "-1"], "eval_freq"),  # 0 = off
    (["train", _E, "--algo", "ppo", "--timesteps", "100", "--eval-episodes", "0"], "eval_episodes"),
    (["train", _E, "--algo", "ppo", "--timesteps", "100", "--hp", "n_steps=-5"], "n_steps"),
    (["train", _E, "--algo", "ppo", "--timesteps", "100", "--hp", "learning_rate=abc"], "learning_rate"),
])
def test_more_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, word):
    rc = main([*argv, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("clustergym: error:") and word in err[0]


def test_debug_is_accepted_after_the_subcommand(tmp_path):
    assert main(["run", _E, "--agents", "hauf", "--horizon", "3", "--no-progress", "--no-plots", "--debug",
                 "--out", str(tmp_path / "o")]) == 0
    with pytest.raises(ValueError):  # --debug after the subcommand shows the exception
        main(["run", _E, "--agents", "hauf", "--seeds", "5-1", "--debug", "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("patch,word", [({"env_id": "os:Foo-v0"}, "not a clustergym env"),
                                        ({"family": None}, "family"),
                                        ({"family": "approxjobs"}, "does not match")])
def test_sb3_side_car_is_checked_before_use(tmp_path, patch, word):
    import json as _json

    from clustergym.core.agent import make

    side = {"env_id": _E, "family": "multiserver-channel", "algo": "ppo", "stats": True, "env_kwargs": {},
            "normalize": False}
    side.update(patch)
    if side["family"] is None:
        del side["family"]
    (tmp_path / "model.zip").write_bytes(b"not read: the side-car is checked first")
    (tmp_path / "clustergym.json").write_text(_json.dumps(side))
    with pytest.raises(ValueError, match=word):
        make(f"sb3:{tmp_path}/model.zip")


def test_second_run_into_the_same_out_needs_overwrite_and_leaves_nothing_of_the_first(tmp_path, capsys):
    out = str(tmp_path / "o")
    base = ["--horizon", "4", "--no-progress", "--out", out]
    assert main(["run", _E, "--agents", "hauf", *base]) == 0
    assert (tmp_path / "o" / "cumulative_regret.png").exists()  # P1 has regret
    capsys.readouterr()
    assert main(["run", "clustergym/ApproxJobs-v0", "--agents", "fair", *base]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert json.loads((tmp_path / "o" / "results.json").read_text())["env_id"] == _E  # untouched
    assert main(["run", "clustergym/ApproxJobs-v0", "--agents", "fair", *base, "--overwrite"]) == 0
    assert json.loads((tmp_path / "o" / "results.json").read_text())["env_id"] == "clustergym/ApproxJobs-v0"
    assert not (tmp_path / "o" / "cumulative_regret.png").exists()  # the first run's plot is gone
    (tmp_path / "o" / "notes.txt").write_text("mine")  # a user's own file survives --overwrite
    assert main(["run", "clustergym/ApproxJobs-v0", "--agents", "fair", *base, "--overwrite"]) == 0
    assert (tmp_path / "o" / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".clustergym-")]  # no temp folder left


def test_core_use_never_imports_torch_or_sb3():
    """The core install has no torch/SB3 ([drl] extra): envs, every agent but sb3:, and a run work without."""
    import subprocess
    import sys

    code = ("import sys, gymnasium as gym, clustergym\n"
            "from clustergym.core.agent import list_agents, make\n"
            "for e in clustergym.ENV_IDS:\n"
            "    gym.make(e)\n"
            "    [make(a, env_id=e) for a in list_agents(e)]\n"
            "clustergym.evaluate(clustergym.ENV_IDS[0], ['esdp', 'random'], [0], 3, progress=False)\n"
            "bad = [m for m in ('torch', 'stable_baselines3', 'sb3_contrib', 'tensorboard', 'ray') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_progress_moves_during_parallel_runs_not_only_at_their_end():
    from clustergym.runner.workers import run_local

    class Bar:
        def __init__(self):
            self.updates = []

        def update(self, n):
            self.updates.append(n)

    bar = Bar()
    tasks = [("clustergym/MultiServerChannel-v0", a, 0, 1000, {"scenario_seed": 0}) for a in ("hauf", "lcf")]
    run_local(tasks, 2, bar)
    assert sum(bar.updates) == 2000 and len(bar.updates) >= 10  # every 200 slots of each run


def test_run_without_horizon_uses_the_envs_own(tmp_path, monkeypatch):
    """``clustergym run`` without ``--horizon`` runs each env's own episode length (RingAllReduce-v0: 200
    slots, not another env's 2,000), and ``--set`` kwargs that change it are honoured."""
    from clustergym.cli import commands as cli_commands

    seen = []
    real = cli_commands.evaluation.evaluate

    def spy(env_id, agents, seeds, horizon, **kw):
        seen.append(horizon)
        return real(env_id, agents, seeds, 3, **kw)  # the run itself kept short

    monkeypatch.setattr(cli_commands.evaluation, "evaluate", spy)
    for args, want in ((["clustergym/RingAllReduce-v0"], 200), ([ID, "--set", "num_servers=12"], 2000),
                       ([ID, "--set", "num_servers=12", "--horizon", "7"], 7)):
        out = tmp_path / f"o{len(seen)}"
        assert main(["run", *args, "--agents", "random", "--seeds", "0", "--no-progress", "--no-plots",
                     "--out", str(out)]) == 0
        assert seen[-1] == want
