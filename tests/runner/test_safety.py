"""No lost work: every row below, each with an earlier run in the same --out that
must come out byte-identical (results.json, model.zip and every other file).

Rows: train --overwrite with a bad --hp/--algo; two writers on one folder; kill -9 of the parent; kill -9 of
a worker; extreme floats; an infinite float's printed range; size parameters (demand_max); a symlink-loop /
too-long / size-limited --out; reproduce into an earlier reproduction; failing/hanging plugins; P2's empty
regret figure under -W error::RuntimeWarning; a hand-edited manifest; absurd --seeds/--instances.
(``env.step`` after the end of an episode is another change's subject.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import alive as _alive, children as _children

import clustergym
from clustergym.cli.main import main
from tests.helpers import ROOT as REPO_ROOT, one_line_exit_2, snapshot

P1, P2, P3, P4 = clustergym.ENV_IDS
ROOT = str(REPO_ROOT)
LINUX = os.path.isdir("/proc")


def _run_argv(out, *extra, env=P1, agents="hauf", seeds="0", horizon="10"):
    return ["run", env, "--agents", agents, "--seeds", seeds, "--horizon", horizon, "--out", str(out),
            "--no-progress", "--no-plots", *extra]


def _cli(args, timeout=300, preexec=None, env_extra=None, **kw):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "clustergym", *args], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=preexec, env=env, **kw)


@pytest.fixture(scope="module")
def run_template(tmp_path_factory):
    """An earlier run's folder (results.json, curves.csv, manifest)."""
    out = tmp_path_factory.mktemp("earlier") / "run"
    assert main(_run_argv(out, seeds="0-1")) == 0
    assert os.path.exists(out / "results.json")
    return out


@pytest.fixture
def earlier_run(run_template, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(run_template, out)
    return out, snapshot(out)


@pytest.fixture(scope="module")
def train_template(tmp_path_factory):
    """An earlier training run's folder (model.zip, side-car, vecnormalize, tb/, monitor/)."""
    pytest.importorskip("stable_baselines3")
    out = tmp_path_factory.mktemp("earlier") / "train"
    rc = main(["train", P1, "--algo", "ppo", "--timesteps", "64", "--horizon", "16", "--n-envs", "1",
               "--hp", "n_steps=32", "--hp", "batch_size=32", "--eval-freq", "64", "--eval-episodes", "1",
               "--out", str(out), "--no-progress"])
    assert rc == 0 and os.path.exists(out / "model.zip")
    return out


@pytest.fixture
def earlier_train(train_template, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(train_template, out)
    return out, snapshot(out)


# -- row 1: train --overwrite validates everything before replacing the earlier model ---------------

@pytest.mark.parametrize("extra,word", [
    (["--algo", "ppo", "--hp", "n_step=64"], "n_step"),  # a typo of n_steps
    (["--algo", "sac"], "sac"),  # not for P1's discrete actions
    (["--algo", "ppo", "--set", "rho=7"], "rho"),
    (["--algo", "ppo", "--hp", "learning_rate=-1", "--hp", "n_steps=0"], "n_steps"),
])
def test_train_overwrite_with_bad_input_keeps_the_earlier_model(earlier_train, capsys, extra, word):
    out, before = earlier_train
    assert "model.zip" in before and any(k.startswith("tb") for k in before)
    line = one_line_exit_2(capsys, ["train", P1, *extra, "--timesteps", "64", "--horizon", "16", "--n-envs", "1",
                                     "--out", str(out), "--overwrite", "--no-progress"])
    assert word in line
    assert snapshot(out) == before
    assert not [n for n in os.listdir(out) if n.startswith(".clustergym-staging")]


def test_train_overwrite_replaces_the_model_only_when_training_finished(earlier_train, capsys):
    out, before = earlier_train
    rc = main(["train", P1, "--algo", "a2c", "--timesteps", "64", "--horizon", "16", "--n-envs", "1",
               "--hp", "n_steps=8", "--eval-freq", "64", "--eval-episodes", "1", "--out", str(out), "--overwrite",
               "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    after = snapshot(out)
    assert after["model.zip"] != before["model.zip"]
    assert json.load(open(out / "clustergym.json"))["algo"] == "a2c"
    # nothing of the earlier run is left beside the new one (its TensorBoard run was PPO_1)
    assert not [k for k in after if "PPO" in k], sorted(after)


# -- row 2: one writer per output folder -------------------------------------------------------------

def _proc_state(pid: int) -> str:
    """What /proc says of a process that does not react (its state, signal masks, what it waits in)."""
    try:
        status = open(f"/proc/{pid}/status").read().splitlines()
        keep = [ln for ln in status if ln.split(":")[0] in ("State", "Threads", "SigBlk", "SigIgn", "SigCgt")]
        wchan = open(f"/proc/{pid}/wchan").read()
        return "; ".join(keep) + f"; wchan {wchan}"
    except OSError as exc:
        return f"no /proc entry ({exc})"


def _wait_for(path, proc, timeout=120.0):
    t0 = time.time()
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < timeout, "the first writer never took the lock"
        time.sleep(0.1)


@pytest.mark.parametrize("second", ["run", "train", "reproduce"])
def test_a_second_writer_gets_one_line_naming_the_holder(earlier_run, capsys, second):
    out, before = earlier_run
    first = subprocess.Popen([sys.executable, "-m", "clustergym", *_run_argv(out, "--overwrite", horizon="2000000")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out / ".clustergym.lock.holder", first)
        argv = {"run": _run_argv(out, "--overwrite"),
                "train": ["train", P1, "--algo", "ppo", "--timesteps", "64", "--out", str(out), "--overwrite"],
                "reproduce": ["reproduce", "esdp", "--quick", "--out", str(out), "--overwrite"]}[second]
        line = one_line_exit_2(capsys, argv)
        assert f"is in use by pid {first.pid} on " in line and "clustergym run" in line, line
        # the first writer, stopped before it finished, leaves the earlier run as it was
        first.send_signal(signal.SIGTERM)
        try:
            _, err = first.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the first writer did not stop within 180 s of SIGTERM; {_proc_state(first.pid)}")
        assert first.returncode == 130, err
    finally:
        if first.poll() is None:
            first.kill()
    assert snapshot(out) == before


def test_two_runs_started_together_one_wins_the_other_is_refused(tmp_path):
    out = tmp_path / "o"
    argv = [sys.executable, "-m", "clustergym", *_run_argv(out, horizon="300")]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    res = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    codes = sorted(r[2] for r in res)
    assert codes == [0, 2], res
    loser = next(r for r in res if r[2] == 2)
    assert len(loser[1].strip().splitlines()) == 1
    assert "in use by" in loser[1] or "holds an earlier run" in loser[1], loser[1]
    json.load(open(out / "results.json"))


# -- rows 3 and 4: workers die with the parent; a dead worker costs one task ---------------------------

def _workers(pid: int) -> list[int]:
    ws = []
    for k in _children(pid):
        try:
            if "spawn_main" in open(f"/proc/{k}/cmdline").read():
                ws.append(k)
        except OSError:
            pass
    return ws


def _start_and_wait_for_workers(argv, n=2, timeout=120):
    proc = subprocess.Popen([sys.executable, "-m", "clustergym", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while len(_workers(proc.pid)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < timeout, "the workers never started"
        time.sleep(0.1)
    return proc


@pytest.mark.skipif(not LINUX, reason="needs /proc (Linux) to list child processes")
def test_sigkill_of_the_parent_leaves_no_worker_alive(earlier_run):
    out, before = earlier_run
    proc = _start_and_wait_for_workers([*_run_argv(out, "--overwrite", agents="hauf,lcf", seeds="0-3",
                                                   horizon="200000"), "--workers", "2"])
    time.sleep(1.0)
    kids = _children(proc.pid)
    assert len(_workers(proc.pid)) == 2
    proc.kill()  # SIGKILL: no handler of ours runs
    proc.communicate(timeout=30)
    time.sleep(10)
    assert not [k for k in kids if _alive(k)], "a child process outlived its parent"
    assert snapshot(out) == before


TIMING = ("wall_s", "decision_ms_median", "decision_ms_p95")


def _runs(path):
    data = json.load(open(path))
    return [{k: v for k, v in r.items() if k not in TIMING} for r in data["runs"]], data["summary"]


@pytest.mark.skipif(not LINUX, reason="needs /proc (Linux) to list child processes")
def test_killing_one_worker_mid_sweep_costs_one_retry_not_the_sweep(tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "o"
    # Runs of several seconds each (ESDP's decisions at |R| = 80, ~20 ms a slot; at the default size they now take
    # ~2 ms): the worker is killed inside a run, never after its last one (with runs of a second or two they could
    # all finish before a worker passed 3 s of CPU, and nothing was lost; the per-slot oracle is memoised, so it no
    # longer makes runs long).
    # Two runs on two workers: one worker's run is killed while the other's goes on, then the retry runs on the
    # worker that replaces it.
    argv = ["--agents", "esdp", "--seeds", "0-1", "--horizon", "300", "--set", "num_servers=80", "--no-progress",
            "--no-plots", "--no-score"]
    assert main(["run", P1, *argv, "--out", str(ref)]) == 0
    proc = _start_and_wait_for_workers(["run", P1, *argv, "--workers", "2", "--out", str(out)])
    t0 = time.time()
    while True:  # a worker that has started a run (its CPU time grows past the imports)
        ws = _workers(proc.pid)
        busy = [w for w in ws if _cpu_s(w) > 3.0]
        if busy or time.time() - t0 > 60:
            break
        time.sleep(0.1)
    assert busy and proc.poll() is None, "the sweep ended before a worker could be killed"
    os.kill(busy[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and "a worker process died" in lines[0] and "retrying" in lines[0], err
    # The dead worker is named by pid when its exit code was reaped in time (under load it may not be yet).
    assert "pid " not in lines[0] or f"pid {busy[0]} was killed by SIGKILL" in lines[0], err
    assert _runs(out / "results.json")[0] == _runs(ref / "results.json")[0]
    assert len(_runs(out / "results.json")[0]) == 2


def _cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def _dies(task, report=None):
    """A task that kills its own worker (twice: it always does)."""
    if task == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return task


def test_a_run_whose_worker_dies_twice_is_one_line_naming_it():
    from clustergym.runner.workers import WorkerDied, run_tasks

    with pytest.raises(WorkerDied, match=r"run 'die' failed twice: its worker process was killed by SIGKILL"):
        run_tasks(_dies, ["a", "die", "b"], 2)
    assert run_tasks(_dies, ["a", "b", "c"], 2) == ["a", "b", "c"]


# -- rows 5 and 6: numbers that cannot make sense -----------------------------------------------------

@pytest.mark.parametrize("kv,word", [
    ("cost_mean=1e308", "cost_mean=1e+308 is invalid: expected a number in [-1e+09, 1e+09]"),
    ("cost_mean=-1e308", "cost_mean=-1e+308 is invalid: expected a number in [-1e+09, 1e+09]"),
    ("cost_std=1e308", "cost_std=1e+308 is invalid: expected a number in [0, 1e+09]"),
    ("cost_mean=Infinity", "cost_mean=inf is invalid: expected a number in [-1e+09, 1e+09]"),
    ("cost_mean=-Infinity", "cost_mean=-inf is invalid: expected a number in [-1e+09, 1e+09]"),
    ("cost_mean=NaN", "cost_mean=nan is invalid: expected a number in [-1e+09, 1e+09]"),
    ("utility_high=1e300", "utility_high=1e+300 is invalid"),
    ("channel_prob=1e-300", "channel_prob=1e-300 is invalid: expected a number in [1e-09, 1]"),
])
def test_extreme_floats_are_refused_with_the_range_checked(earlier_run, capsys, kv, word):
    out, before = earlier_run
    line = one_line_exit_2(capsys, _run_argv(out, "--overwrite", "--set", kv))
    assert word in line, line
    assert snapshot(out) == before


def test_results_json_is_strict_json(tmp_path):
    """No NaN/Infinity literals: a non-finite value is null, and the note names where."""
    from clustergym.runner.results import Results, RunResult

    r = RunResult(agent="a", seed=0, total_reward=float("nan"), mean_reward=float("inf"), regret=None,
                  oracle_total=None, steps=1, wall_s=0.0, decision_ms_median=0.0, decision_ms_p95=0.0,
                  metrics={"x": float("-inf")}, reward=__import__("numpy").zeros(1))
    res = Results(env_id=P1, env_kwargs={}, horizon=1, runs=[r])
    res.write(str(tmp_path), plots=False)
    text = open(tmp_path / "results.json").read()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert data["runs"][0]["total_reward"] is None and data["runs"][0]["metrics"]["x"] is None
    assert "runs[0].total_reward" in data["non_finite"] and "runs[0].metrics.x" in data["non_finite"]


@pytest.mark.parametrize("kv", ["demand_max=150", "demand_max=1000"])
def test_size_parameters_are_refused_before_allocating(earlier_run, capsys, kv):
    out, before = earlier_run
    t0 = time.time()
    line = one_line_exit_2(capsys, _run_argv(out, "--overwrite", "--set", kv))
    assert time.time() - t0 < 30
    assert kv in line and ("would need about" in line or "cell updates per slot" in line), line
    assert snapshot(out) == before


# -- row 8: --out that cannot work, refused before the work ------------------------------------------

def test_symlink_loop_and_long_names_are_one_line_before_the_work(tmp_path, capsys, monkeypatch):
    from clustergym.runner import evaluation

    monkeypatch.setattr(evaluation, "evaluate", lambda *a, **k: pytest.fail("the work started"))
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    assert "symlink loop" in one_line_exit_2(capsys, _run_argv(tmp_path / "a"))
    assert "symlink loop" in one_line_exit_2(capsys, _run_argv(tmp_path / "a" / "sub"))
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    assert "broken symlink" in one_line_exit_2(capsys, _run_argv(tmp_path / "dangling"))
    line = one_line_exit_2(capsys, _run_argv(tmp_path / ("x" * 300)))
    assert "is 300 bytes long; the file system allows at most" in line
    assert set(os.listdir(tmp_path)) == {"a", "b", "dangling"}  # nothing written


def _fsize_limit(nbytes):
    def set_limit():
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return set_limit


def test_a_file_size_limit_is_refused_before_the_work(earlier_run):
    out, before = earlier_run
    argv = [a for a in _run_argv(out, "--overwrite") if a != "--no-plots"]  # with plots (PNGs of ~45 kB)
    r = _cli(argv, preexec=_fsize_limit(40 * 1024))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "file-size limit (ulimit -f) is 40 KiB" in r.stderr
    assert snapshot(out) == before


def test_a_write_that_fails_midway_keeps_the_earlier_run(earlier_run):
    """The size estimate is skipped, so the write itself hits the limit (EFBIG): one line, earlier run intact."""
    out, before = earlier_run
    code = ("import sys, clustergym.core.outdir as o; o._free_checks = lambda *a: None; from clustergym.cli.main import main; "
            f"sys.exit(main({_run_argv(out, '--overwrite', seeds='0-3', horizon='400')!r}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       preexec_fn=_fsize_limit(20 * 1024))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "File too large" in lines[0] and "earlier run there is intact" in lines[0], r.stderr
    assert snapshot(out) == before
    assert not [n for n in os.listdir(out) if n.startswith(".clustergym-")  and n != ".clustergym-files.json"]


# -- row 9: reproduce has the fresh-folder / --overwrite rule and the staging ------------------------

@pytest.fixture
def stub_reproduce(monkeypatch):
    import clustergym.experiments as experiments

    calls = {}

    def fake(paper, quick=False, out="runs/reproduce", workers=2, progress=True, **kw):
        os.makedirs(os.path.join(out, "esdp"), exist_ok=True)
        with open(os.path.join(out, "esdp", "report.md"), "w") as f:
            f.write(f"new {paper}")
        if calls.get("fail"):
            raise ValueError("the second paper failed")
        with open(os.path.join(out, "report.md"), "w") as f:
            f.write("new combined")
        print(f"wrote {os.path.join(out, 'report.md')}")
        return [os.path.join(out, "report.md")]

    monkeypatch.setattr(experiments, "reproduce", fake)
    return calls


def test_reproduce_into_an_earlier_reproduction(tmp_path, capsys, stub_reproduce):
    out = tmp_path / "rep"
    assert main(["reproduce", "all", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out / 'report.md'}" in printed and "staging" not in printed  # the paths it will have
    before = snapshot(out)
    assert {"report.md", "esdp/report.md"} <= set(before)
    line = one_line_exit_2(capsys, ["reproduce", "all", "--quick", "--out", str(out)])
    assert "holds an earlier run's results" in line and "--overwrite" in line
    stub_reproduce["fail"] = True  # interrupted after the first paper: the old combined report stays whole
    assert "the second paper failed" in one_line_exit_2(capsys, ["reproduce", "all", "--quick", "--out", str(out),
                                                                  "--overwrite"])
    assert snapshot(out) == before
    stub_reproduce["fail"] = False
    (out / "esdp" / "stale.png").write_text("from the earlier reproduction")
    assert main(["reproduce", "esdp", "--quick", "--out", str(out), "--overwrite"]) == 0
    assert open(out / "esdp" / "report.md").read() == "new esdp"
    assert not (out / "esdp" / "stale.png").exists()  # the paper's folder is replaced whole


# -- row 10: plugins -------------------------------------------------------------------------------

@pytest.mark.parametrize("body,word", [("raise RuntimeError('boom')\n", "RuntimeError: boom"),
                                       ("import sys\nsys.exit(3)\n", "SystemExit"),
                                       ("import time\ntime.sleep(600)\n", "did not return within 3 s")])
def test_a_failing_or_hanging_plugin_is_one_line_naming_it(tmp_path, body, word):
    (tmp_path / "cgplug_x.py").write_text(body)
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "CLUSTERGYM_PLUGINS": "cgplug_x", "CLUSTERGYM_PLUGIN_TIMEOUT": "3"}
    r = subprocess.run([sys.executable, "-c", "import clustergym; print(len(clustergym.ENV_IDS))"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, **env})
    assert r.returncode == 0 and r.stdout.strip() == "4", r.stderr  # import clustergym is never broken
    t0 = time.time()
    r = _cli(["list"], timeout=60, env_extra=env)
    assert time.time() - t0 < 30
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'cgplug_x'" in lines[0] and word in lines[0], r.stderr


# -- row 12: P2 plots, and every env under -W error::RuntimeWarning ----------------------------------

@pytest.mark.parametrize("env_id,agents", [(P1, "esdp,hauf"), (P2, "ogasched,drf"), (P3, "gadget,random"),
                                           (P4, "opm,random")])
def test_run_is_clean_under_runtime_warnings_as_errors(tmp_path, env_id, agents):
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "clustergym", "run", env_id,
                        "--agents", agents, "--seeds", "0-1", "--horizon", "12", "--out", str(out), "--no-progress",
                        "--workers", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr, r.stderr
    json.load(open(out / "results.json"))
    if env_id == P2:  # regret at the episode end only (best static in hindsight): no curve, no empty figure
        assert not (out / "cumulative_regret.png").exists()
    if env_id == P1:  # a per-slot regret curve
        assert (out / "cumulative_regret.png").exists()


# -- row 13: the manifest is data from a file ------------------------------------------------------

@pytest.mark.parametrize("manifest", ['{"files": "results.json"}', '{"files": ["../victim"]}',
                                      '{"files": ["sub/x"]}', '{"files": [".."]}', '{"files": ["."]}',
                                      '{"files": [5]}', '["results.json"]', 'not json', '{"files": [""]}',
                                      '{"files": [".clustergym.lock"]}'])
def test_a_hand_edited_manifest_deletes_nothing(earlier_run, capsys, manifest):
    out, _ = earlier_run
    (out / ".clustergym-files.json").write_text(manifest)
    (out / "sub").mkdir()
    (out / "sub" / "x").write_text("keep")
    (out.parent / "victim").write_text("keep")
    before = snapshot(out.parent)
    line = one_line_exit_2(capsys, _run_argv(out, "--overwrite"))
    assert "is not a clustergym manifest" in line, line
    assert snapshot(out.parent) == before


# -- row 14: absurd --seeds / --instances ---------------------------------------------------------

@pytest.mark.parametrize("flag,value", [("--seeds", "0-100000000"), ("--instances", "0-99999999999"),
                                        ("--seeds", "0-99999,100000-199999")])
def test_absurd_seed_ranges_are_one_line(earlier_run, capsys, flag, value):
    out, before = earlier_run
    t0 = time.time()
    line = one_line_exit_2(capsys, [*_run_argv(out, "--overwrite"), flag, value])
    assert time.time() - t0 < 10 and "at most 100,000" in line, line
    assert snapshot(out) == before
    rc = main(_run_argv(out, "--overwrite", "--instances", "0-999", seeds="0-999"))
    assert rc == 2 and "runs per agent; at most 100,000" in capsys.readouterr().err


# -- the output-folder machinery itself ------------------------------------------------------------

def test_leftovers_of_a_killed_command_are_swept_and_the_lock_is_released(earlier_run, capsys):
    out, before = earlier_run
    (out / ".clustergym-staging-dead").mkdir()
    (out / ".clustergym-staging-dead" / "results.json").write_text("half")
    (out / ".clustergym-old-dead").mkdir()
    assert main(_run_argv(out, "--overwrite", seeds="0-1")) == 0
    assert not [n for n in os.listdir(out) if n.startswith((".clustergym-staging", ".clustergym-old"))]
    assert set(snapshot(out)) == set(before)  # the same files (results differ only in timing fields)
    assert not (out / ".clustergym.lock.holder").exists()
    from filelock import FileLock

    lock = FileLock(str(out / ".clustergym.lock"), timeout=0)
    lock.acquire()  # free again
    lock.release()


def test_p2_oracle_with_idle_ports_warns_nothing():
    """Found by the fuzz suite: ports without jobs made the best-static LP's bounds −inf·0 (a NaN, fixed
    later, but a RuntimeWarning: fatal under -W error)."""
    import warnings

    from clustergym.runner.episode import run_one

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = run_one(P2, "ogasched", 0, 12, {"rho": 0.0, "oracle": True})
    assert r.total_reward == 0.0 and r.bound_total == 0.0


def test_p2_alpha_that_breaks_the_best_static_lp_is_refused(earlier_run, capsys):
    """Found by the fuzz suite: alpha_low = alpha_high = 1e-9 made HiGHS fail on the best-static LP
    (a RuntimeError after the runs); now a range error up front."""
    out, before = earlier_run
    line = one_line_exit_2(capsys, _run_argv(out, "--overwrite", "--set", "alpha_low=1e-9", "--set", "alpha_high=1e-9",
                                              env=P2, agents="ogasched"))
    assert "alpha_low=1e-09 is invalid: expected a number in [0.001, 1e+09]" in line, line
    assert snapshot(out) == before
