"""Hostile inputs found by breaking the envs and the CLI on purpose, each pinned here.

Every case ends in a clear ValueError naming the parameter (API) or exit 2 with one line on stderr (CLI),
within a deadline: never a traceback, a hang or a silently wrong result, and nothing replaced on disk.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import signal
import stat
import subprocess
import sys
import threading

import gymnasium as gym
import numpy as np
import pytest

import clustergym
from clustergym.cli.commands import int_list
from clustergym.cli.main import main

P1, P2, P3, P4 = clustergym.ENV_IDS


class Hung(Exception):
    """The deadline of a case passed."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail the case (:class:`Hung`) if it runs longer than ``seconds`` (SIGALRM: Python code only; a case that
    could hang inside one C call runs in a subprocess instead)."""
    def hung(*_):
        raise Hung(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _cli(argv, capsys, seconds: float = 60.0):
    """(exit code, stderr) of ``clustergym argv`` in this process, under a deadline."""
    capsys.readouterr()
    with deadline(seconds):
        rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def _one_line(rc, err, *words):
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for w in words:
        assert w in err, err


def _work_started(what):
    def fail(*args, **kwargs):
        raise AssertionError(f"{what} started before the input was refused")
    return fail


# -- instances: a range is checked in O(1) ---------------------------------------------------------

_HUGE_RANGES = """
import time, gymnasium as gym, clustergym
t = time.perf_counter()
for env_id in clustergym.ENV_IDS:
    env = gym.make(env_id, instances=range(0, 10**15))
    assert env.unwrapped.instances == range(0, 10**15)
    env.close()
print(f"ok {time.perf_counter() - t:.2f}")
"""


def test_a_huge_range_of_instances_builds_at_once():
    """``instances=range(0, 10**15)`` builds every env without walking the range (a subprocess: a walk over
    10^15 seeds inside one C call could not be interrupted, so it is killed at the timeout and fails)."""
    try:
        out = subprocess.run([sys.executable, "-c", _HUGE_RANGES], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("gym.make(..., instances=range(0, 10**15)) did not return within 60 s")
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]


@pytest.mark.parametrize("instances,word", [
    (range(10**30), "at most 2**63 - 1"),
    (range(3, 10**20, 7), "at most 2**63 - 1"),
    (range(-5, 10), "integers >= 0"),
    (range(10, -2, -1), "integers >= 0"),
    (range(5, 5), "non-empty"),
    (np.arange(2_000_000), "at most 1,000,000 listed seeds"),
])
def test_instances_out_of_range_name_the_parameter(instances, word):
    with deadline(120), pytest.raises(ValueError, match="instances") as exc:
        gym.make(P1, instances=instances)
    assert word in str(exc.value) and "\n" not in str(exc.value)


def test_a_descending_range_of_instances_draws_from_it():
    env = gym.make(P4, num_machines=12, instances=range(10, -1, -1))
    env.reset(seed=0)
    assert env.unwrapped.instances == range(10, -1, -1)


# -- P4 horizon: the memory check before the arrivals are drawn -------------------------------------

@pytest.mark.parametrize("horizon", [10**10, 10**30])
def test_p4_huge_horizon_is_refused_before_any_allocation(monkeypatch, horizon):
    import clustergym.envs.approxjobs.scenario as p4_scenario

    monkeypatch.setattr(p4_scenario, "as_generator", _work_started("drawing the scenario"))
    with deadline(120), pytest.raises(ValueError, match=f"horizon={horizon} would need") as exc:
        gym.make(P4, horizon=horizon)
    assert "\n" not in str(exc.value)


def test_p4_horizon_that_fits_still_builds():
    env = gym.make(P4, horizon=50_000, num_machines=12)
    assert env.unwrapped.horizon == 50_000


@pytest.mark.parametrize("horizon", [10**10, 10**30])
def test_run_huge_horizon_is_one_line_naming_horizon(tmp_path, capsys, monkeypatch, horizon):
    from clustergym.runner import evaluation

    monkeypatch.setattr(evaluation, "evaluate", _work_started("the comparison"))
    out = tmp_path / "out"
    rc, err = _cli(["run", P4, "--agents", "opm", "--horizon", horizon, "--out", out], capsys)
    _one_line(rc, err, f"--horizon {horizon} would need")
    assert not out.exists()


# -- P2: huge action values ------------------------------------------------------------------------

HUGE = [1e19, -1e19, 1e300, float(2**62), float(np.finfo(np.float32).max), 1.5e9]


def _p2(**kw):
    env = gym.make(P2, horizon=20, oracle=False, num_servers=16, **kw)
    env.reset(seed=3)
    return env


@pytest.mark.parametrize("value", HUGE)
@pytest.mark.parametrize("infeasible", ["repair", "raise"])
def test_p2_huge_channel_actions_are_refused_and_leave_the_env_unchanged(value, infeasible):
    env = _p2(infeasible=infeasible)
    twin = copy.deepcopy(env)
    space = env.action_space
    action = np.zeros(space.shape, dtype=np.float64)
    action[0, 0] = value
    with deadline(120), pytest.raises(ValueError) as exc:
        env.step(action)
    msg = str(exc.value)
    assert "\n" not in msg and ("beyond ±1e+09" in msg if infeasible == "repair" else "is outside [0, a]" in msg)
    ok = np.zeros(space.shape, dtype=space.dtype)
    a, b = env.step(ok), twin.step(ok)
    assert np.array_equal(a[0]["last_allocation"], b[0]["last_allocation"]) and a[1] == b[1]


def test_p2_the_largest_repairable_action_is_projected():
    env = _p2()
    action = np.full(env.action_space.shape, 1e9)
    _, _, _, _, info = env.step(action)
    y = info["feedback"]["allocation"]
    assert np.isfinite(y).all() and info["metrics"]["repaired"] > 0


@pytest.mark.parametrize("mode", ["port", "port_device"])
def test_p2_huge_request_fractions_are_clipped_as_documented(mode):
    env = _p2(action_mode=mode)
    _, _, _, _, info = env.step(np.full(env.action_space.shape, 1e19))
    assert info["metrics"]["repaired"] > 0 and np.isfinite(info["feedback"]["allocation"]).all()


@pytest.mark.parametrize("num_envs,kw", [(2, {}), (8, {}), (8, {"max_edges": 400})])
def test_p2_vector_env_refuses_huge_actions_before_any_state_change(num_envs, kw):
    mk = lambda: gym.make_vec(P2, num_envs=num_envs, vectorization_mode="vector_entry_point",  # noqa: E731
                              oracle=False, num_servers=16, **kw)
    envs, twin = mk(), mk()
    envs.reset(seed=1)
    twin.reset(seed=1)
    action = np.full(envs.action_space.shape, 0.5 if kw else 0.0)
    bad = action.copy()
    bad[1, 0, 0] = 1e19
    with deadline(120), pytest.raises(ValueError, match="sub-env 1: .*beyond"):
        envs.step(bad)
    a, b = envs.step(action), twin.step(action)
    assert np.array_equal(a[1], b[1])


def test_projection_of_huge_values_stays_in_the_solution_space():
    """Π_Y of values so large that z − u rounds to z: the bracket of the root is degenerate; the result is
    still in Y (no division by zero)."""
    from clustergym.envs.multiserver.projection import project

    pb = _p2().unwrapped.scenario.problem
    z = np.full((pb.num_edges, pb.num_device_types), 1e19)
    y = project(z, pb.edge_port, pb.edge_server, pb.edge_demand, pb.capacity, pb.num_servers)
    sums = np.zeros_like(pb.capacity, dtype=float)
    np.add.at(sums, pb.edge_server, y)
    assert np.isfinite(y).all() and (y >= 0).all() and (y <= pb.edge_demand + 1e-9).all()
    assert (sums <= pb.capacity + 1e-6).all()


# -- the CLI: --set depth, --agents repeats ----------------------------------------------------------

def test_set_nested_20000_deep_is_one_line(tmp_path, capsys):
    deep = "[" * 20_000 + "]" * 20_000
    out = tmp_path / "out"
    rc, err = _cli(["run", P1, "--agents", "hauf", "--horizon", 3, "--out", out, "--set", f"scenario={deep}"],
                   capsys)
    _one_line(rc, err, "--set scenario", "20,000 deep")
    assert len(err) < 300 and not out.exists()


def test_set_nested_32_deep_is_parsed(tmp_path, capsys):
    rc, err = _cli(["run", P1, "--agents", "hauf", "--horizon", 3, "--out", tmp_path / "o",
                    "--set", "scenario=" + "[" * 32 + "]" * 32], capsys)
    _one_line(rc, err, "scenario=")  # the env refuses the value, the parser took it
    assert "deep" not in err


@pytest.mark.parametrize("env_id,agents", [(P4, "fair,fair"), (P1, "hauf,random,hauf"), (P2, "drf[],drf[]")])
def test_an_agent_listed_twice_is_refused(tmp_path, capsys, monkeypatch, env_id, agents):
    from clustergym.runner import evaluation

    monkeypatch.setattr(evaluation, "_run_and_score", _work_started("the runs"))
    out = tmp_path / "out"
    rc, err = _cli(["run", env_id, "--agents", agents, "--horizon", 3, "--out", out], capsys)
    _one_line(rc, err, "more than once")
    assert not out.exists()
    with deadline(120), pytest.raises(ValueError, match="more than once"):
        evaluation.evaluate(env_id, agents.split(","), seeds=[0], horizon=3, progress=False)


# -- --costs-from ---------------------------------------------------------------------------------

PLAN = ["reproduce", "esdp", "--quick", "--tiny", "--instances", "0", "--plan"]


@pytest.mark.parametrize("costs,word", [
    ('{"unit_costs": {"a": [NaN, 10]}}', "[nan, 10]"),
    ('{"unit_costs": {"a": [Infinity, 10]}}', "[inf, 10]"),
    ('{"unit_costs": {"a": [-60, 10]}}', "[-60.0, 10]"),
    ('{"unit_costs": {"a": [1e300, 10]}}', "[1e+300, 10]"),
    ('{"unit_costs": {"a": [0.1, 1e999]}}', "[0.1, inf]"),
    ('{"unit_costs": {"a": [0.1, 2.5]}}', "[0.1, 2.5]"),
    ('{"unit_costs": {"a": [0.1, 0]}}', "[0.1, 0]"),
    ('{"unit_costs": {"a": [0.1, true]}}', "[0.1, True]"),
])
def test_costs_from_a_bad_unit_cost_is_one_line(tmp_path, capsys, costs, word):
    path = tmp_path / "costs.json"
    path.write_text(costs)
    rc, err = _cli([*PLAN, "--out", tmp_path / "o", "--costs-from", path], capsys)
    _one_line(rc, err, "--costs-from", word)


def test_costs_from_an_output_folder_names_its_store(tmp_path, capsys):
    folder = tmp_path / "run"
    (folder / "store").mkdir(parents=True)
    rc, err = _cli([*PLAN, "--out", tmp_path / "o", "--costs-from", folder], capsys)
    _one_line(rc, err, "--costs-from", "holds no measured runs", os.path.join(str(folder), "store"))
    rc, err = _cli([*PLAN, "--out", tmp_path / "o", "--costs-from", tmp_path / "o2"], capsys)
    _one_line(rc, err, "--costs-from")


# -- --save-costs and bench --out: regular files only, one writer at a time ---------------------------

def _fifo(tmp_path):
    path = str(tmp_path / "pipe")
    os.mkfifo(path)
    return path


def test_save_costs_refuses_a_fifo(tmp_path, capsys, monkeypatch):
    from clustergym import experiments

    monkeypatch.setattr(experiments, "plan", _work_started("the plan"))  # refused before the plan runs
    fifo = _fifo(tmp_path)
    rc, err = _cli([*PLAN, "--out", tmp_path / "o", "--save-costs", fifo], capsys)
    _one_line(rc, err, "--save-costs", "FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_bench_out_refuses_a_fifo(tmp_path, capsys, monkeypatch):
    from clustergym.cli import bench

    monkeypatch.setattr(bench, "load", lambda name: type("M", (), {"bench_rows": staticmethod(lambda q: [])}))
    fifo = _fifo(tmp_path)
    rc, err = _cli(["bench", "--only", "esdp", "--quick", "--out", fifo], capsys)
    _one_line(rc, err, "--out", "FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with deadline(120), pytest.raises(ValueError, match="FIFO"):
        bench.run_bench(only="esdp", quick=True, out=fifo)  # the writer itself refuses too (no pre-check)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_the_writer_refuses_special_files_without_touching_them(tmp_path):
    """A device node (``/dev/null``: only stat-ed here, never written) and a FIFO are refused; a FIFO is left
    in place by the writer itself."""
    from clustergym.runner.results import check_file_target, exclusive_write

    with pytest.raises(ValueError, match="'/dev/null' is a device"):
        check_file_target("/dev/null", "--save-costs")
    with pytest.raises(ValueError, match="is a folder"):
        check_file_target(str(tmp_path), "--save-costs")
    fifo = _fifo(tmp_path)
    with deadline(120), pytest.raises(ValueError, match="FIFO"):
        exclusive_write(fifo, lambda f: f.write("x"), "--save-costs")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]


def test_save_costs_replaces_a_regular_file(tmp_path):
    from clustergym.experiments import read_costs, write_costs

    path = str(tmp_path / "costs.json")
    write_costs(path, {"a": (0.5, 10)})
    write_costs(path, {"b": (0.25, 20)})
    assert read_costs(path) == {"b": (0.25, 20)} and os.listdir(tmp_path) == ["costs.json"]


def _concurrent(path, first_content, second):
    """Writer 1 writes ``first_content`` and, while it holds the file open, ``second()`` runs in another
    thread; returns writer 2's outcome (its exception or None)."""
    from clustergym.runner.results import exclusive_write

    inside, done, outcome = threading.Event(), threading.Event(), {}

    def slow(f):
        f.write(first_content)
        inside.set()
        assert done.wait(30)

    def other():
        assert inside.wait(30)
        try:
            second()
            outcome["error"] = None
        except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
            outcome["error"] = exc
        done.set()

    t = threading.Thread(target=other)
    t.start()
    try:
        exclusive_write(path, slow, "--save-costs")
    finally:
        done.set()
        t.join(30)
    return outcome["error"]


@pytest.mark.parametrize("existing", [False, True])
def test_two_concurrent_writers_one_wins_the_other_gets_one_line(tmp_path, existing):
    from clustergym.runner.results import exclusive_write

    path = str(tmp_path / "costs.json")
    if existing:
        with open(path, "w") as f:
            f.write("old")
    with deadline(60):
        err = _concurrent(path, "first", lambda: exclusive_write(path, lambda f: f.write("second"), "--save-costs"))
    assert isinstance(err, ValueError) and "being written by another command" in str(err) and "\n" not in str(err)
    assert open(path).read() == "first" and sorted(os.listdir(tmp_path)) == ["costs.json"]


def test_a_target_created_meanwhile_is_not_replaced(tmp_path):
    """Another program creates the file while this writer writes it: the writer refuses (one line) and the
    other program's file is left as it is."""
    path = str(tmp_path / "costs.json")

    def create():
        with open(path, "x") as f:
            f.write("theirs")

    with deadline(60), pytest.raises(ValueError, match="was created by another command"):
        _concurrent(path, "ours", create)
    assert open(path).read() == "theirs" and sorted(os.listdir(tmp_path)) == ["costs.json"]


def test_two_processes_saving_costs_at_once_never_lose_a_file(tmp_path):
    """Two processes write the same new costs file at the same time: each ends in exit 0 (one after the other)
    or exit 2 with one line, the file is one writer's whole document, no temporary file is left."""
    path = str(tmp_path / "costs.json")
    code = ("import sys, time; from clustergym.runner.results import exclusive_write\n"
            "def w(f):\n    f.write(sys.argv[2]); f.flush(); time.sleep(1.0)\n"
            "try:\n    exclusive_write(sys.argv[1], w, '--save-costs')\n"
            "except ValueError as e:\n    print(e, file=sys.stderr); sys.exit(2)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, path, json.dumps({"writer": i})], stderr=subprocess.PIPE,
                              text=True) for i in range(2)]
    results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    assert all(rc == 0 or (rc == 2 and len(err.strip().splitlines()) == 1) for rc, err in results), results
    assert any(rc == 0 for rc, _ in results)
    assert json.load(open(path))["writer"] in (0, 1) and os.listdir(tmp_path) == ["costs.json"]


def test_int_list_reads_the_seeds_syntax_and_refuses_bad_lists_in_one_line():
    assert int_list("900-903") == [900, 901, 902, 903] and int_list("0,2,5") == [0, 2, 5]
    for bad in ("5-2", "a-b", "", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            int_list(bad)
