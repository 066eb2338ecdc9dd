"""Ray backend: the same results.json as the local backend; one clear error without Ray.

Compared: every byte of curves.csv and every field of results.json except the timing fields
``clustergym.runner.results.TIMING_FIELDS`` (wall_s, decision_ms_median, decision_ms_p95, per run and the
summary's median): they measure the clock of the machine that ran them and differ between any two
runs, two local ones included. Everything else must be equal, in the same order.
"""

import json
import sys

import pytest

from clustergym.cli.main import main
from clustergym.runner.evaluation import evaluate
from clustergym.runner.results import TIMING_FIELDS
from tests.helpers import ROOT as REPO_ROOT

P1 = "clustergym/MultiServerChannel-v0"
P4 = "clustergym/ApproxJobs-v0"
RAY_MISSING = "backend='ray' needs Ray: pip install 'clustergym[ray]'"


@pytest.fixture(scope="module")
def ray_cluster():
    """One Ray instance for the module (startup takes seconds), as a user's own ``ray.init`` would."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _without_timings(d: dict) -> dict:
    for row in d["runs"] + d["summary"] + d.get("reference_runs", []):
        for key in TIMING_FIELDS:
            row.pop(key, None)
    return d


def _assert_same_outputs(dir_a, dir_b) -> dict:
    a = json.loads((dir_a / "results.json").read_text())
    b = json.loads((dir_b / "results.json").read_text())
    assert all(set(TIMING_FIELDS) <= r.keys() for r in a["runs"] + b["runs"])  # present, just not compared
    assert _without_timings(a) == _without_timings(b)
    assert (dir_a / "curves.csv").read_bytes() == (dir_b / "curves.csv").read_bytes()
    return a


def _sweep(tmp_path, env_id, agents, horizon, backend, **kw):
    res = evaluate(env_id, agents, seeds=[0, 1], horizon=horizon, workers=2, backend=backend, progress=False, **kw)
    out = tmp_path / backend
    res.write(str(out), plots=False)
    return out


def test_ray_backend_starts_and_stops_its_own_ray(tmp_path):
    # First in the file: runs before the module fixture connects this process to Ray.
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized(), "this test must run before the module fixture connects to Ray"
    d = _assert_same_outputs(_sweep(tmp_path, P1, ["hauf", "lwtf"], 50, "ray", env_kwargs={"num_servers": 12}),
                             _sweep(tmp_path, P1, ["hauf", "lwtf"], 50, "local", env_kwargs={"num_servers": 12}))
    assert not ray.is_initialized()  # the Ray it started is shut down again
    assert [(r["agent"], r["seed"]) for r in d["runs"]] == [("hauf", 0), ("hauf", 1), ("lwtf", 0), ("lwtf", 1)]
    assert all(r["total_reward"] > 0 and r["regret"] is not None for r in d["runs"])


def test_ray_backend_uses_existing_ray_and_matches_local(ray_cluster, tmp_path):
    d = _assert_same_outputs(_sweep(tmp_path, P4, ["opm", "fair"], 200, "ray"),
                             _sweep(tmp_path, P4, ["opm", "fair"], 200, "local"))
    assert ray_cluster.is_initialized()  # the user's Ray is left running
    assert [(r["agent"], r["seed"]) for r in d["runs"]] == [("opm", 0), ("opm", 1), ("fair", 0), ("fair", 1)]
    assert all(r["total_reward"] > 0 for r in d["runs"])


def test_cli_backend_ray_writes_same_results_as_local(ray_cluster, tmp_path, capsys):
    base = ["run", P1, "--agents", "hauf,lcf", "--seeds", "0,1", "--horizon", "50", "--set", "num_servers=12",
            "--workers", "2", "--no-plots", "--no-progress"]
    assert main([*base, "--backend", "ray", "--out", str(tmp_path / "ray")]) == 0
    assert main([*base, "--out", str(tmp_path / "local")]) == 0
    assert "hauf" in capsys.readouterr().out
    _assert_same_outputs(tmp_path / "ray", tmp_path / "local")


def test_missing_ray_is_one_clear_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if Ray were absent
    with pytest.raises(ValueError, match=r"backend='ray' needs Ray: pip install 'clustergym\[ray\]'"):
        evaluate(P1, ["hauf"], seeds=[0], horizon=10, backend="ray", progress=False)
    out = tmp_path / "out"
    assert main(["run", P1, "--agents", "hauf", "--horizon", "10", "--backend", "ray", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"clustergym: error: {RAY_MISSING}"
    assert not out.exists()


def test_unknown_backend_lists_the_valid_ones(capsys):
    with pytest.raises(ValueError, match=r"backend='dask' is invalid: expected one of 'local', 'ray'"):
        evaluate(P1, ["hauf"], seeds=[0], horizon=10, backend="dask", progress=False)
    with pytest.raises(SystemExit) as exc:
        main(["run", P1, "--agents", "hauf", "--backend", "dask", "--out", "x"])
    assert exc.value.code == 2 and "invalid choice: 'dask'" in capsys.readouterr().err


def test_ray_address_where_nothing_listens_is_one_line_quickly(tmp_path):
    import os
    import socket
    import subprocess
    import time

    pytest.importorskip("ray")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # a free port: nothing listens there
    env = {**os.environ, "RAY_ADDRESS": f"127.0.0.1:{port}"}
    t0 = time.perf_counter()
    # a fresh process: this module's fixture keeps a Ray instance initialised in the test process
    p = subprocess.run([sys.executable, "-m", "clustergym", "run", P1, "--agents", "hauf", "--horizon", "5",
                        "--backend", "ray", "--no-progress", "--out", str(tmp_path / "o")],
                       env=env, capture_output=True, text=True, timeout=120)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and "RAY_ADDRESS" in err[0], p.stderr
    assert time.perf_counter() - t0 < 60


def test_custom_file_agent_on_ray_equals_local(ray_cluster):
    import os

    spec = os.path.join(REPO_ROOT, "examples", "my_agent.py") + ":MyAgent"
    kw = dict(seeds=[0, 1], horizon=40, progress=False, score=False)
    local = evaluate(P1, [spec, "hauf"], workers=1, **kw)
    ray_ = evaluate(P1, [spec, "hauf"], workers=2, backend="ray", **kw)
    assert [r.total_reward for r in local.runs] == [r.total_reward for r in ray_.runs]


def test_drl_cells_train_on_ray_into_the_same_resumable_folders_as_locally(ray_cluster, tmp_path):
    """``clustergym drl --backend ray``: one Ray task per cell; the cell folder it leaves is the one a local run
    reuses (nothing retrained), and its model scores exactly what the same cell trained locally scores."""
    from clustergym.experiments import drl

    on_ray, local = tmp_path / "ray", tmp_path / "local"
    lines: list[str] = []
    summ_ray = drl.run_benchmark(str(on_ray), quick=True, progress=False, learners=["ppo"], seeds=[0],
                                 backend="ray", log=lines.append)
    assert "1 to train" in lines[0] and (on_ray / "p4" / "ppo" / "seed0" / "done.json").exists()
    lines.clear()
    drl.run_benchmark(str(on_ray), quick=True, workers=1, progress=False, learners=["ppo"], seeds=[0],
                      log=lines.append)
    assert "0 to train" in lines[0]  # the local backend reuses the cell Ray trained
    summ_local = drl.run_benchmark(str(local), quick=True, workers=1, progress=False, learners=["ppo"], seeds=[0],
                                   log=lines.append)
    score = lambda s: {r["learner"]: r["mean_total_reward"] for r in s["envs"]["p4"]["rows"]}  # noqa: E731
    assert score(summ_ray)["ppo"] == score(summ_local)["ppo"]
    with pytest.raises(ValueError, match="backend='spark' is invalid"):
        drl.run_benchmark(str(tmp_path / "x"), quick=True, backend="spark")


def test_reproduce_on_ray_gives_the_local_results(ray_cluster, tmp_path):
    """``reproduce --backend ray``: every sweep's runs are Ray tasks on the connected instance (one session for the
    whole paper) and the paper's results equal the local worker pool's, run for run."""
    import clustergym.runner.workers as workers_mod

    calls = []
    real = workers_mod.run_tasks_ray
    workers_mod.run_tasks_ray = lambda *a, **k: calls.append(len(a[1])) or real(*a, **k)
    try:
        base = ["reproduce", "opm", "--quick", "--instances", "0-1", "--tiny", "--no-progress", "--workers", "2"]
        assert main([*base, "--backend", "ray", "--out", str(tmp_path / "ray")]) == 0
    finally:
        workers_mod.run_tasks_ray = real
    assert calls and sum(calls) > 10  # the sweeps went to Ray
    assert main([*base, "--out", str(tmp_path / "local")]) == 0
    a = json.loads((tmp_path / "ray" / "opm" / "results.json").read_text())
    b = json.loads((tmp_path / "local" / "opm" / "results.json").read_text())

    def runs(d):
        return [{k: v for k, v in r.items() if k not in TIMING_FIELDS and k != "wall_s"} for r in d["runs"]]

    assert runs(a) == runs(b) and len(runs(a)) > 10
