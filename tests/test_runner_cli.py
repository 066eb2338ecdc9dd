"""Runner, results.json contract, CLI behaviour and the no-metrics guarantee for agents."""

import json
import os

import numpy as np
import pytest

import clustergym
from clustergym.agent import BaseAgent, register_agent
from clustergym.cli import main
from clustergym.runner import evaluate, run_one

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


register_agent("spy", "multiserver-channel", "tests.test_runner_cli:SpyAgent")


def test_agents_never_receive_metrics():
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
    r = run_one(ID, "random", seed=0, horizon=50, env_kwargs=SMALL)
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
    assert d["env_kwargs"] == {"num_servers": 10} and len(d["runs"]) == 6


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
    from clustergym.runner import _SHARED_POOL, worker_pool

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
