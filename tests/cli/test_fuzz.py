"""Fuzz suite (hypothesis): the CLI, env actions, scenario kwargs and trace files under random input.

Each property is what the reliability contract (docs/architecture.md, Reliability) promises:
- every CLI argument list ends in exit 0, or exit 2 with one line on stderr; never a traceback, never a
  file written outside ``--out``;
- an action an env rejects (ValueError) leaves it unchanged: stepping on afterwards equals a clean run;
- random scenario kwargs either build an env or raise a ValueError naming the parameter;
- a malformed trace file either loads or raises a TraceFormatError starting ``file:line:``.

Example counts are bounded to keep the suite fast; ``make fuzz`` runs the same properties with many
more examples (``CLUSTERGYM_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import os
import re

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clustergym
from clustergym.cli.main import main

N = int(os.environ.get("CLUSTERGYM_FUZZ_EXAMPLES", "0"))
FAST = settings(max_examples=N or 25, deadline=None, derandomize=not N,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

P1, P2, P3, P4 = clustergym.ENV_IDS


# -- CLI -------------------------------------------------------------------------------------------

TOKENS = ["run", "list", "reproduce", "train", "bench", "esdp", "all", "--quick", "--agents", "hauf", "random",
          "esdp[only_active=maybe]", "hauf,lcf", "fair", "drf", "--seeds", "0", "0-1", "5-1", "-1", "x", "0,,1",
          "--instances", "1", "--horizon", "3", "0", "-5", "2.5", "--set", "rho=0.5", "rho=7", "num_ports=0",
          "scenario_seed=2", "horizon=3", "bogus", "--workers", "1", "0", "--backend", "ray", "local", "--out",
          "OUT", "OUT/sub", "FILE", "FILE/x", "--no-progress", "--no-plots", "--no-score", "--overwrite",
          "--debug", "--algo", "ppo", "sac", "--timesteps", "16", "--hp", "n_steps=-5", "--only", "gadget",
          P1, P2, P3, P4, "clustergym/Nope-v0", "", "--", "-h"]


def _assert_one_line_or_success(argv, rc, err) -> None:
    """Exit 0, or exit 2 with one line on stderr; never a traceback."""
    assert rc in (0, 2), (argv, rc, err)
    assert "Traceback" not in err, (argv, err)
    if rc == 2:
        assert len(err.strip().splitlines()) == 1, (argv, err)


@pytest.fixture
def stub_heavy(monkeypatch):
    """The CLI layer is fuzzed; the long jobs behind ``reproduce`` (and its plan), ``bench`` and ``train`` are stubbed
    (they write one file into --out, as the real ones do, so a write outside --out would show)."""
    import clustergym.cli.bench as bench
    import clustergym.experiments as experiments
    import clustergym.learning.training as training
    from clustergym.core.family import env_family
    from clustergym.learning.algos import check_algo

    def fake_reproduce(paper, quick=False, out="runs/reproduce", workers=2, progress=True, **kw):
        experiments.load(paper) if paper != "all" else None
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, "report.md"), "w").close()

    def fake_bench(only=None, quick=False, out=None):
        if only is not None:
            experiments.load(only)
        if out:
            open(out, "w").close()

    def fake_train(config, out, **kw):
        check_algo(config.algo, env_family(config.env_id))
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, "model.zip"), "w").close()
        return {"algo": config.algo, "env_id": config.env_id, "timesteps": 1 if config.timesteps is None else
                config.timesteps, "train_wall_s": 0.0}

    monkeypatch.setattr(experiments, "reproduce", fake_reproduce)
    monkeypatch.setattr(experiments, "plan", lambda *a, **k: {"papers": {}, "unmeasured": 0})  # a full run's estimate
    monkeypatch.setattr(bench, "run_bench", fake_bench)
    monkeypatch.setattr(training, "train", fake_train)


def _snapshot(root):
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs} | {d for d, _, _ in os.walk(root)}


@FAST
@given(st.lists(st.sampled_from(TOKENS), min_size=0, max_size=10))
def test_cli_random_arguments_exit_0_or_2_with_one_line(tmp_path_factory, capsys, stub_heavy, tokens):
    root = tmp_path_factory.mktemp("cli")
    (root / "FILE").write_text("x")
    out = root / "OUT"
    argv = [str(root / t) if t.split("/")[0] in ("OUT", "FILE") else t for t in tokens]
    cwd = os.getcwd()
    os.chdir(root)
    before = _snapshot(root)
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        rc = exc.code
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err
    _assert_one_line_or_success(argv, rc, err)
    new = _snapshot(root) - before
    outside = [p for p in new if not (p == str(out) or p.startswith(str(out) + os.sep)
                                      or p.startswith(str(root / "OUT") + os.sep))]
    assert not outside, (argv, outside)


# -- actions ---------------------------------------------------------------------------------------

ENV_CASES = [(P1, {}), (P2, {}), (P2, {"action_mode": "port"}), (P2, {"action_mode": "port_device"}),
             (P3, {"action_mode": "placement"}), (P3, {"action_mode": "ring_size"}), (P4, {}), (P4, {"action_mode": "job"})]


def _idle(space):
    return np.zeros(space.shape, dtype=space.dtype)


def _weird_action(draw, space):
    shape = space.shape
    kind = draw(st.sampled_from(["sample", "shape", "nan", "inf", "big", "neg", "float", "str", "obj", "complex",
                                 "bool", "list", "none", "scalar"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    base = np.asarray(space.sample(), dtype=np.float64) if kind != "shape" else None
    if kind == "sample":
        space.seed(int(rng.integers(2**31)))
        return space.sample()
    if kind == "shape":
        extra = draw(st.sampled_from([(1,), (2, 3), (shape[0] + 1,) + tuple(shape[1:]), ()]))
        return rng.integers(0, 2, size=extra)
    if kind == "nan":
        base.flat[rng.integers(base.size)] = np.nan
        return base
    if kind == "inf":
        base.flat[rng.integers(base.size)] = np.inf
        return base
    if kind == "big":
        return base * 1e12 + 1e9
    if kind == "neg":
        return -np.abs(base) - 1
    if kind == "float":
        return base + 0.5
    if kind == "str":
        return base.astype(str)
    if kind == "obj":
        return base.astype(object)
    if kind == "complex":
        return base.astype(complex) + 1j
    if kind == "bool":
        return base.astype(bool)
    if kind == "list":
        return base.tolist()
    if kind == "none":
        return None
    return 1


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


@pytest.mark.parametrize("infeasible", ["repair", "raise"])
@pytest.mark.parametrize("env_id,kw", ENV_CASES, ids=["P1", "P2", "P2-port", "P2-port_device", "P3-placement",
                                                      "P3-ring_size", "P4", "P4-job"])
@FAST
@given(data=st.data())
def test_rejected_actions_leave_the_env_unchanged(env_id, kw, infeasible, data):
    small = {P1: {}, P2: {"num_servers": 16}, P3: {"scenario": "toy"}, P4: {"num_machines": 12}}[env_id]
    mk = lambda: gym.make(env_id, horizon=12, oracle=False, infeasible=infeasible, **small, **kw)  # noqa: E731
    fuzz, clean = mk(), mk()
    seed = data.draw(st.integers(0, 50))
    o1, _ = fuzz.reset(seed=seed)
    o2, _ = clean.reset(seed=seed)
    space = fuzz.action_space
    for _ in range(data.draw(st.integers(1, 6))):
        action = _weird_action(data.draw, space)
        try:
            r1 = fuzz.step(action)
        except ValueError:
            action = _idle(space)  # rejected: the env must be as before, so both now take the same valid step
            r1 = fuzz.step(action)
        r2 = clean.step(action)
        assert _same(r1[0], r2[0]) and r1[1] == r2[1] and r1[2:4] == r2[2:4]
        if r1[2] or r1[3]:
            break


# -- scenario kwargs -------------------------------------------------------------------------------

def _valid_names(env_id):
    try:
        gym.make(env_id, __fuzz_probe__=1)
    except ValueError as exc:
        listed = str(exc).split("the scenario parameters ")[1].split(" was raised")[0]
        return [n.strip() for n in listed.split(",")]
    raise AssertionError("an unknown kwarg was accepted")


VALUES = st.one_of(st.integers(-50, 300), st.floats(-10, 1000), st.sampled_from([float("nan"), float("inf")]),
                   st.sampled_from(["", "paper", "x", None, True, False, [], [1, 2], "philly", "synthetic"]))


@pytest.mark.parametrize("env_id", [P1, P2, P3, P4])
@FAST
@given(data=st.data())
def test_random_scenario_kwargs_build_or_name_the_parameter(env_id, data):
    names = _valid_names(env_id)
    name = data.draw(st.sampled_from(names))
    value = data.draw(VALUES)
    if name in ("trace_path",) and isinstance(value, str) and value:
        value = "/nonexistent/trace.csv"
    kwargs = {"horizon": 3, "oracle": False, name: value}
    # a min/max pair is checked together: the message may name the partner ("bw_max=5 ... expected [6, inf]")
    partner = {name.replace(a, b) for a, b in (("_min", "_max"), ("_max", "_min"), ("_low", "_high"),
                                               ("_high", "_low"))} - {name}
    try:
        env = gym.make(env_id, **kwargs)
    except (ValueError, FileNotFoundError) as exc:
        assert any(n in str(exc) for n in (name, *partner)) or "trace" in str(exc), (name, value, str(exc))
        return
    env.reset(seed=0)
    env.step(_idle(env.action_space))


# -- trace files -----------------------------------------------------------------------------------

HEADERS = {
    "philly": "timestamp,duration,num_gpus,gpu_time,cluster",
    "pollux": "time,num_replicas",
    "tiresias": "job_id,num_gpu,submit_time,iterations,model_name,duration",
}
GOOD_ROWS = {
    "philly": "2017-10-03 10:00:00,3600,4,14400,a",
    "pollux": "12.0,4",
    "tiresias": "1,4,0,1000,resnet50,3600",
}
CORRUPT = st.sampled_from(["", "abc", "-1", "0", "1e30", "6_6.0", "\u0661", "nan", "\ufeff", "\"", "1,2,3,4,5,6,7",
                           "2017-13-45", "x" * 50, " ", "\r", "ü"])


def _load(kind, path):
    from clustergym.envs.traces import philly, tiresias

    if kind == "philly":
        return philly.load_philly(path)
    if kind == "pollux":
        return philly.load_pollux_workload(path)
    return tiresias.load_tiresias_jobs(path)


@pytest.mark.parametrize("kind", list(HEADERS))
@FAST
@given(data=st.data())
def test_malformed_trace_files_load_or_name_file_and_line(tmp_path_factory, kind, data):
    from clustergym.envs.traces.csvread import TraceFormatError

    rows = [GOOD_ROWS[kind]] * data.draw(st.integers(0, 4))
    header = HEADERS[kind]
    op = data.draw(st.sampled_from(["cell", "header", "bom", "crlf", "extra", "drop", "empty"]))
    if op == "cell" and rows:
        i = data.draw(st.integers(0, len(rows) - 1))
        cells = rows[i].split(",")
        cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(CORRUPT)
        rows[i] = ",".join(cells)
    elif op == "header":
        cols = header.split(",")
        cols[data.draw(st.integers(0, len(cols) - 1))] = data.draw(st.sampled_from(["", "x", cols[0]]))
        header = ",".join(cols)
    elif op == "extra":
        rows = [r + ",extra" for r in rows]
    elif op == "drop" and rows:
        rows[0] = ",".join(rows[0].split(",")[:-2])
    text = "\n".join([header, *rows]) + "\n"
    if op == "bom":
        text = "\ufeff" + text
    if op == "crlf":
        text = text.replace("\n", "\r\n")
    if op == "empty":
        text = ""
    path = tmp_path_factory.mktemp("tr") / f"{kind}.csv"
    path.write_text(text, encoding="utf-8")
    try:
        _load(kind, path)
    except TraceFormatError as exc:
        assert re.match(re.escape(str(path)) + r":\d+: ", str(exc)), str(exc)


@pytest.mark.parametrize("dtype", [str, complex, "datetime64[s]", object])
def test_p2_refuses_actions_that_are_not_real_numbers(dtype):
    env = gym.make(P2, horizon=5, oracle=False).unwrapped
    env.reset(seed=0)
    bad = np.zeros(env.action_space.shape).astype(dtype)
    with pytest.raises(ValueError, match="expected real numbers"):
        env.step(bad)


@pytest.mark.parametrize("env_id,kw,word", [
    (P3, {"scenario": "tiresias-60", "num_racks": 3}, "num_racks"),
    (P3, {"scenario": "tiresias-60", "gpu_choices": [8]}, "gpu_choices"),
    (P3, {"scenario": "tiresias-60", "budget_max": 100}, "budget_max"),
    (P3, {"scenario": "philly", "workers_min": 2}, "workers_min"),
    (P3, {"slot_seconds": 30.0}, "slot_seconds"),
    (P4, {"scenario": "philly", "arrivals": "synthetic"}, "arrivals"),
    (P4, {"trace_path": "/tmp/x.csv"}, "trace_path"),
    (P4, {"trace_start": 100.0}, "trace_start"),
])
def test_preset_parameters_that_would_be_ignored_are_refused(env_id, kw, word):
    """A value a preset does not use is an error, never recorded in results.json as if applied."""
    with pytest.raises(ValueError, match=word):
        gym.make(env_id, horizon=3, **kw)


def _work_started(what):
    def fail(*args, **kwargs):
        raise AssertionError(f"{what} started before the memory check refused the sizes")
    return fail


def test_memory_guard_names_the_parameter(monkeypatch):
    """Sizes whose arrays would not fit are one ValueError naming the parameter, before any allocation: the
    functions that would run the episodes or draw the scenario's arrays fail the test when called, so a missing
    guard fails here at once (instead of running 10^8 slots)."""
    import clustergym.envs.multiserver.allocation.scenario as p2_scenario
    import clustergym.envs.multiserver.channel.scenario as p1_scenario

    import clustergym.core.scenario as core
    from clustergym.runner import evaluation

    monkeypatch.setattr(core, "available_memory", lambda: 2**30)  # pretend 1 GiB is available
    monkeypatch.setattr(evaluation, "_run_and_score", _work_started("the runs"))
    with pytest.raises(ValueError, match="horizon=100000000 would need"):
        evaluation.evaluate(P1, ["hauf"], seeds=[0], horizon=100_000_000, progress=False)
    for env_id, module in ((P1, p1_scenario), (P2, p2_scenario)):
        with monkeypatch.context() as m:
            m.setattr(module, "as_generator", _work_started("drawing the scenario"))
            with pytest.raises(ValueError, match="num_ports=2000, num_servers=100000 would need"):
                gym.make(env_id, num_ports=2000, num_servers=100_000)
    gym.make(P1, num_ports=8, num_servers=40)  # the defaults fit easily


def test_memory_guard_passes_sizes_that_fit(monkeypatch):
    """The same guard lets a size that fits through to the work (so the test above is not passing on a guard
    that refuses everything)."""
    import clustergym.core.scenario as core
    from clustergym.runner import evaluation

    monkeypatch.setattr(core, "available_memory", lambda: 2**30)
    monkeypatch.setattr(evaluation, "_run_and_score", _work_started("the runs"))
    with pytest.raises(AssertionError, match="the runs started"):
        evaluation.evaluate(P1, ["hauf"], seeds=[0], horizon=1000, progress=False)


@pytest.mark.parametrize("dtype", [str, complex, "datetime64[s]", object])
def test_p2_vector_env_refuses_actions_that_are_not_real_numbers(dtype):
    envs = gym.make_vec(P2, num_envs=2, vectorization_mode="vector_entry_point", oracle=False)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="expected real numbers"):
        envs.step(np.zeros(envs.action_space.shape).astype(dtype))


# -- extreme floats in every numeric kwarg, size parameters ------------------------------

EXTREME = st.sampled_from([1e308, -1e308, 1.7976931348623157e308, 5e-324, -5e-324, 1e-308, 1e-300, float("inf"),
                           float("-inf"), float("nan"), 1e9, -1e9, 1e9 * (1 + 1e-15), 1e-9, 0.0, -0.0, 10**20,
                           -(10**20), 2**63, 1e15, -1e15, 1e6, 1e12])


def _numeric_names(env_id):
    import inspect

    defaults = {}
    env = gym.make(env_id, horizon=3, oracle=False)
    defaults.update(env.unwrapped.scenario.params)
    env.close()
    names = [n for n in _valid_names(env_id) if isinstance(defaults.get(n), (int, float)) and
             not isinstance(defaults.get(n), bool) and n != "horizon"]  # horizon: the runner's memory guard
    del inspect
    return names


def _finite_episode(env, steps=3):
    env.reset(seed=0)
    for _ in range(steps):
        obs, reward, term, trunc, info = env.step(env.action_space.sample())
        assert np.isfinite(reward), reward
        for m in (info.get("metrics") or {}).values():
            if isinstance(m, (float, np.floating)):
                assert not np.isnan(m), info["metrics"]
        if term or trunc:
            break


@pytest.mark.parametrize("env_id", [P1, P2, P3, P4])
@FAST
@given(data=st.data())
def test_extreme_floats_in_every_numeric_kwarg_build_finite_or_name_the_parameter(env_id, data):
    """No accepted configuration gives a NaN/inf reward; a refused one names the parameter (or its
    min/max partner, or the size parameters of a memory/work guard)."""
    names = _numeric_names(env_id)
    picked = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    kwargs = {n: data.draw(EXTREME) for n in picked}
    try:
        env = gym.make(env_id, horizon=3, **kwargs)
    except ValueError as exc:
        msg = str(exc)
        partners = {n.replace(a, b) for n in picked for a, b in (("_min", "_max"), ("_max", "_min"),
                                                                 ("_low", "_high"), ("_high", "_low"))}
        assert len(msg.splitlines()) == 1, msg
        assert any(n in msg for n in (*picked, *partners)), (kwargs, msg)
        return
    env.action_space.seed(0)
    _finite_episode(env)


SIZES = st.sampled_from([1, 2, 3, 7, 64, 1000, 10**4, 10**5, 10**6, 10**9, 10**12, 2**62])


@pytest.mark.parametrize("env_id", [P1, P2, P3, P4])
@FAST
@given(data=st.data())
def test_size_parameters_build_or_refuse_in_one_line(env_id, data, monkeypatch):
    """Integer size parameters (counts, demands, capacities) at any magnitude: the env builds, or one
    ValueError names a parameter: never a MemoryError, never an allocation that swaps."""
    import clustergym.core.scenario as core

    monkeypatch.setattr(core, "available_memory", lambda: 2 * 2**30)  # pretend 2 GiB: the guard must act
    names = [n for n in _numeric_names(env_id) if isinstance(gym.make(env_id, horizon=3, oracle=False)
                                                                 .unwrapped.scenario.params.get(n), int)]
    picked = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    kwargs = {n: data.draw(SIZES) for n in picked}
    try:
        env = gym.make(env_id, horizon=3, **kwargs)
    except ValueError as exc:
        assert len(str(exc).splitlines()) == 1 and any(n.split("_")[0] in str(exc) for n in picked) or \
            "would need about" in str(exc), (kwargs, str(exc))
        return
    env.action_space.seed(0)
    _finite_episode(env, steps=1)


# -- concurrent writers -----------------------------------------------------------------

class _FakeResults:
    """What ``evaluate`` returns, enough for ``cmd_run``: writes results.json and curves.csv with a mark."""

    def __init__(self, mark, fail, pause):
        self.mark, self.fail, self.pause = mark, fail, pause

    def table(self):
        return ""

    def write(self, out, plots=True):
        import json
        import time

        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump({"mark": self.mark}, f)
        time.sleep(self.pause)
        if self.fail:
            raise ValueError(f"writer {self.mark} failed midway")
        with open(os.path.join(out, "curves.csv"), "w") as f:
            f.write(self.mark)
        return [os.path.join(out, "results.json"), os.path.join(out, "curves.csv")]


@FAST
@given(writers=st.lists(st.tuples(st.floats(0, 0.03), st.booleans(), st.booleans(), st.floats(0, 0.03)),
                        min_size=2, max_size=4),
       earlier=st.booleans())
def test_concurrent_writers_one_wins_the_rest_get_one_line(tmp_path_factory, capsys, monkeypatch, writers, earlier):
    """Writers on one --out, started at random moments, some with --overwrite, some failing midway:
    each exits 0 or 2 with one line; the folder holds exactly one complete run (never a mix, never
    a half-written one), and an earlier run survives every writer that did not finish."""
    import threading
    import time

    from clustergym.runner import evaluation

    out = tmp_path_factory.mktemp("cw") / "out"
    if earlier:
        out.mkdir()
        (out / "results.json").write_text('{"mark": "earlier"}')
        (out / "curves.csv").write_text("earlier")

    def fake_evaluate(env_id, agents, seeds, horizon, **kw):
        d, _, fail, pause = writers[int(agents[0][1:])]
        time.sleep(pause)
        return _FakeResults(agents[0], fail, pause)

    monkeypatch.setattr(evaluation, "evaluate", fake_evaluate)
    codes = [None] * len(writers)

    def go(i):
        delay, overwrite, _, _ = writers[i]
        time.sleep(delay)
        argv = ["run", P1, "--agents", f"w{i}", "--out", str(out), "--no-progress", "--no-plots"]
        codes[i] = main(argv + (["--overwrite"] if overwrite else []))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(writers))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    captured = capsys.readouterr()
    assert all(c in (0, 2) for c in codes), codes
    # one error line per refused writer (threads share stderr, so lines may interleave: count the heads)
    assert captured.err.count("clustergym: error: ") == codes.count(2), (codes, captured.err)
    assert "Traceback" not in captured.err, captured.err
    winners = [f"w{i}" for i, c in enumerate(codes) if c == 0]
    assert all(not writers[int(w[1:])][2] for w in winners)  # a failing writer never exits 0
    leftovers = [n for n in os.listdir(out) if n.startswith((".clustergym-staging", ".clustergym-old"))] \
        if out.exists() else []
    assert not leftovers, leftovers
    if not winners:
        if earlier:
            assert (out / "curves.csv").read_text() == "earlier"
            assert '"earlier"' in (out / "results.json").read_text()
        else:
            assert not (out / "results.json").exists()
        return
    import json

    mark = json.loads((out / "results.json").read_text())["mark"]
    assert mark in winners and (out / "curves.csv").read_text() == mark  # one complete run, never a mix


# -- replay and tune --------------------------------------------------------------------------------

REPLAY_OPTS = {
    "env": [P1, P4, "clustergym/Nope-v0"],
    "--agents": ["esdp", "esdp,lcf", "fair", "a,b,c", "bogus", ""],
    "--fps": ["8", "nan", "inf", "-inf", "0", "-1", "1e308", "0.001"],
    "--horizon": ["3", "0", "-1", "1000000000000"],
    "--every": ["1", "2", "0", "-3"],
    "--seed": ["0", "7", "-1"],
    "--set": ["rho=0.5", "horizon=3", "render_mode=ansi", "bogus", "scenario_seed=2"],
    "--out": ["OUT.gif", "OLD.gif", "OUT.mp4", "OUT.txt", "FILE/x.gif", "DIR", "missing/x.gif", ""],
}


def _draw_argv(data, opts, command):
    argv = [command, data.draw(st.sampled_from(opts["env"]))]
    for flag, values in opts.items():
        if flag != "env" and data.draw(st.booleans()):
            argv += [flag, data.draw(st.sampled_from(values))]
    if data.draw(st.booleans()):
        argv.append("--overwrite" if command == "replay" else "--no-progress")
    return argv


def _run_in(root, argv):
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return main(argv)
    except SystemExit as exc:  # argparse: a usage error (2)
        return exc.code
    finally:
        os.chdir(cwd)


@FAST
@given(st.data())
def test_replay_random_arguments_exit_0_or_2_and_keep_an_existing_file(tmp_path_factory, capsys, monkeypatch, data):
    import clustergym.runner.replay as rp
    from clustergym.core.agent import make as make_agent

    def frames(env_id, agent, seed=0, **kw):  # the episode is stubbed: the arguments are fuzzed
        gym.spec(env_id)
        make_agent(agent, env_id=env_id)
        return [np.full((4, 6, 3), 40 * i, np.uint8) for i in range(3)]

    monkeypatch.setattr(rp, "record_episode", frames)
    monkeypatch.setattr(rp, "replay_estimate", lambda *a, **k: "expected replay time: stubbed")  # a real warm-up
    root = tmp_path_factory.mktemp("replay")
    (root / "FILE").write_text("x")
    (root / "DIR").mkdir()
    (root / "OLD.gif").write_bytes(b"old")
    argv = _draw_argv(data, REPLAY_OPTS, "replay")
    before = _snapshot(root)
    rc = _run_in(root, argv)
    err = capsys.readouterr().err
    _assert_one_line_or_success(argv, rc, err)
    new = _snapshot(root) - before
    assert new <= {str(root / "OUT.gif"), str(root / "OUT.mp4")}, (argv, new)
    if not (rc == 0 and "--overwrite" in argv and "OLD.gif" in argv):
        assert (root / "OLD.gif").read_bytes() == b"old", argv


TUNE_OPTS = {
    "env": [P4, P1, "clustergym/Nope-v0"],
    "--algo": ["ppo", "a2c", "sac"],
    "--trials": ["1", "2", "0", "-1"],
    "--timesteps": ["16", "0"],
    "--instances": ["900", "900-901", "0", "1000", "seed", "x"],
    "--seeds": ["0", "5-1", ""],
    "--horizon": ["5", "0"],
    "--storage": ["bogus://x", "sqlite:////nonexistent/dir/x.db", "sqlite:///FILE", "sqlite:///OUT/s.db",
                  "sqlite://", "not a url", "postgresql://u:p@127.0.0.1:1/db"],
    "--train-seeds": ["1", "0"],
}


@FAST
@given(st.data())
def test_tune_random_arguments_exit_0_or_2_and_leave_no_folder_on_refusal(tmp_path_factory, capsys, monkeypatch,
                                                                          data):
    from clustergym.learning import tuning

    def objective(cfg, ref, rnd, progress):  # the training is stubbed: the arguments are fuzzed
        return lambda trial: float(len(tuning.sample_params(trial, cfg.algo)))

    monkeypatch.setattr(tuning, "_objective", objective)
    monkeypatch.setattr(tuning, "_reference_values", lambda *a: ({}, {}))
    root = tmp_path_factory.mktemp("tune")
    (root / "FILE").write_text("{}")
    argv = _draw_argv(data, TUNE_OPTS, "tune") + ["--out", "OUT"]
    argv = [str(root / a[10:]) if a.startswith("sqlite:///") and a[10:] in ("FILE", "OUT/s.db")
            else a for a in argv]
    argv = [a.replace(str(root / "FILE"), "sqlite:///" + str(root / "FILE")).replace(
        str(root / "OUT/s.db"), "sqlite:///" + str(root / "OUT/s.db")) for a in argv]
    rc = _run_in(root, argv)
    err = capsys.readouterr().err
    _assert_one_line_or_success(argv, rc, err)
    if rc == 2:
        assert not (root / "OUT").exists() or "OUT/s.db" in " ".join(argv), (argv, os.listdir(root / "OUT"))
