"""The per-run result store (clustergym.runner.runstore): runs written as they end, reused by the next sweep, keyed by
the code that produced them; a reproduction killed part-way finishes from the store with the results of an
uninterrupted one."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from clustergym.experiments import reproduce
from clustergym.runner.results import TIMING_FIELDS
from clustergym.runner.evaluation import evaluate
from clustergym.runner.runstore import RunStore, StoredTask, TaskInfo, code_fingerprint, register_task, use_store
from clustergym.runner.workers import run_tasks

ENV = "clustergym/MultiServerChannel-v0"
CALLS: list = []


def _square(task, report=None):
    CALLS.append(task)
    return {"x": task[0] ** 2, "arr": np.arange(task[0])}


register_task(_square, describe=lambda t: TaskInfo(agent="square", env_id="toy", horizon=int(t[0]) + 1),
              placeholder=lambda t: {"x": -1, "arr": np.zeros(0)})


def test_finished_runs_are_reused_and_missing_ones_run_once(tmp_path):
    CALLS.clear()
    store = RunStore(str(tmp_path / "s"))
    with use_store(store):
        first = run_tasks(_square, [(2,), (3,)], 1)
    assert [r["x"] for r in first] == [4, 9] and len(CALLS) == 2 and store.ran == 2
    with use_store(RunStore(str(tmp_path / "s"))) as again:
        second = run_tasks(_square, [(3,), (4,), (2,)], 1)
    assert [r["x"] for r in second] == [9, 16, 4]
    assert len(CALLS) == 3 and again.reused == 2 and again.ran == 1  # only (4,) ran
    np.testing.assert_array_equal(second[0]["arr"], np.arange(3))


def test_a_changed_code_fingerprint_does_not_reuse_stale_runs(tmp_path):
    CALLS.clear()
    with use_store(RunStore(str(tmp_path / "s"), code="aaaa")):
        run_tasks(_square, [(2,)], 1)
    with use_store(RunStore(str(tmp_path / "s"), code="bbbb")) as new:
        run_tasks(_square, [(2,)], 1)
    assert len(CALLS) == 2 and new.reused == 0 and new.ran == 1
    with use_store(RunStore(str(tmp_path / "s"), code="aaaa")) as old:
        run_tasks(_square, [(2,)], 1)
    assert len(CALLS) == 2 and old.reused == 1  # each fingerprint keeps its own runs


def test_a_plan_runs_nothing_and_counts_what_is_stored(tmp_path):
    CALLS.clear()
    with use_store(RunStore(str(tmp_path / "s"))):
        run_tasks(_square, [(2,)], 1)
    plan = RunStore(str(tmp_path / "s"), plan=True)
    with use_store(plan):
        out = run_tasks(_square, [(2,), (5,)], 1)
    assert len(CALLS) == 1 and out[0]["x"] == 4 and out[1]["x"] == -1  # a stand-in, not a run
    assert len(plan.found) == 1 and len(plan.planned) == 1 and plan.planned[0][1].horizon == 6
    assert not os.path.exists(plan.path(plan.planned[0][2]))  # nothing written for the stand-in
    costs = RunStore(str(tmp_path / "s")).unit_costs()
    assert len(costs) == 1 and all(c >= 0 for c in costs.values())


def test_a_crafted_store_file_cannot_run_code(tmp_path):
    store = RunStore(str(tmp_path / "s"))
    key = store.key(_square, (7,))
    os.makedirs(os.path.dirname(store.path(key)))

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    with open(store.path(key), "wb") as f:
        pickle.dump({"result": Evil()}, f)
    found, _, _ = store.load(key)
    assert not found and not (tmp_path / "pwned").exists()  # refused, and the task runs instead
    with use_store(store):
        assert run_tasks(_square, [(7,)], 1)[0]["x"] == 49


def test_evaluate_through_the_store_gives_the_same_results(tmp_path):
    """Stored runs come back equal (curves included) to runs made without a store."""
    kw = dict(horizon=15, progress=False, env_kwargs={"num_servers": 8, "num_ports": 4})
    plain = evaluate(ENV, ["esdp", "lcf"], [0, 1], **kw)
    with use_store(RunStore(str(tmp_path / "s"))) as s1:
        stored = evaluate(ENV, ["esdp", "lcf"], [0, 1], **kw)
    with use_store(RunStore(str(tmp_path / "s"))) as s2:
        reused = evaluate(ENV, ["esdp", "lcf"], [0, 1], **kw)
    assert s1.ran == 6 and s2.reused == 6 and s2.ran == 0  # 2 agents × 2 seeds + 2 random score references
    for a, b, c in zip(plain.runs, stored.runs, reused.runs):
        da, db, dc = (({k: v for k, v in r.to_json().items() if k not in TIMING_FIELDS}) for r in (a, b, c))
        assert da == db == dc
        np.testing.assert_array_equal(a.reward, c.reward)
        np.testing.assert_array_equal(a.cum_regret, c.cum_regret)
        assert b.wall_s == c.wall_s  # the stored run itself, timings included


def _strip_timing(obj):
    """A results.json without the fields that measure time (they differ between any two runs)."""
    if isinstance(obj, dict):
        return {k: _strip_timing(v) for k, v in obj.items()
                if k not in TIMING_FIELDS and not k.startswith(("wall", "decision_ms", "mean_decision", "time"))}
    if isinstance(obj, list):
        return [_strip_timing(x) for x in obj]
    return obj


def _results(out: str, paper: str) -> dict:
    docs = {}
    for d, _, fs in os.walk(os.path.join(out, paper)):
        for f in fs:
            if f == "results.json":
                with open(os.path.join(d, f)) as fh:
                    docs[os.path.relpath(os.path.join(d, f), out)] = _strip_timing(json.load(fh))
    return docs


PAPER = "opm"
CMD = [sys.executable, "-m", "clustergym", "reproduce", PAPER, "--quick", "--tiny", "--instances", "0-1",
       "--workers", "2", "--no-progress"]


def test_a_reproduction_killed_part_way_finishes_from_the_store_with_the_same_results(tmp_path):
    """SIGKILL to the whole process group (the command and its workers) part-way; the next call reuses the
    finished runs and ends with the results.json of an uninterrupted reproduction (timing fields aside)."""
    full = str(tmp_path / "uninterrupted")
    subprocess.run([*CMD, "--out", full], check=True, capture_output=True, timeout=600)
    runs = sum(len(fs) for _, _, fs in os.walk(os.path.join(full, "store")))
    assert runs > 10

    out = str(tmp_path / "killed")
    proc = subprocess.Popen([*CMD, "--out", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    store = os.path.join(out, "store")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # kill once a part of the runs is stored
        done = sum(1 for _, _, fs in os.walk(store) for f in fs if f.endswith(".pkl")) if os.path.isdir(store) else 0
        if done >= runs // 3 or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the reproduction ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = sum(1 for _, _, fs in os.walk(store) for f in fs if f.endswith(".pkl"))
    assert 0 < kept < runs
    again = subprocess.run([*CMD, "--out", out], check=True, capture_output=True, text=True, timeout=600)
    assert f"{kept} run(s) reused" in again.stdout, again.stdout[-2000:]
    plain = str(tmp_path / "no-store")  # the same reproduction without a store, in this process
    reproduce(PAPER, quick=True, out=plain, workers=1, progress=False, instances=[0, 1], tiny=True)
    assert _results(out, PAPER) == _results(plain, PAPER) == _results(full, PAPER)


def test_plan_lists_the_runs_and_what_the_store_holds(tmp_path, capsys):
    from clustergym.cli.main import main

    out = str(tmp_path / "r")
    assert main(["reproduce", PAPER, "--quick", "--tiny", "--instances", "0-1", "--plan", "--out", out]) == 0
    before = capsys.readouterr().out
    assert "0 stored" in before and not os.path.exists(out)  # a plan writes nothing
    assert main(["reproduce", PAPER, "--quick", "--tiny", "--instances", "0-1", "--workers", "1", "--no-progress",
                 "--out", out]) == 0
    capsys.readouterr()
    assert main(["reproduce", PAPER, "--quick", "--tiny", "--instances", "0-1", "--plan", "--out", out]) == 0
    after = capsys.readouterr().out
    total = after.split("**Total**: ")[1]
    n = int(total.split(" runs")[0].replace(",", ""))
    assert f"{n:,} stored, 0 to run" in total and n > 10
    assert code_fingerprint() in os.listdir(os.path.join(out, "store"))


def test_saved_costs_estimate_a_plan_elsewhere(tmp_path, capsys):
    """``--plan --save-costs FILE`` writes the unit costs measured on a store; a plan of an empty folder on
    ``--costs-from FILE`` estimates every run from them (the same CPU-hours as a plan given the store itself),
    and without them counts every run as unmeasured. A file that is not a costs file is one line, exit 2."""
    from clustergym.cli.main import main

    base = ["reproduce", PAPER, "--quick", "--tiny", "--instances", "0-1"]
    out, costs = str(tmp_path / "r"), str(tmp_path / "costs.json")
    assert main([*base, "--workers", "1", "--no-progress", "--out", out]) == 0
    assert main([*base, "--plan", "--out", str(tmp_path / "empty"), "--costs-from", os.path.join(out, "store"),
                 "--save-costs", costs]) == 0
    from_store, wrote = capsys.readouterr().out.split("**Total**: ")[1].split("\nwrote the unit costs to ")
    assert wrote.strip() == costs and json.load(open(costs))["unit_costs"]
    assert main([*base, "--plan", "--out", str(tmp_path / "empty"), "--costs-from", costs]) == 0
    from_file = capsys.readouterr().out.split("**Total**: ")[1].rstrip("\n")
    assert from_file == from_store and "unmeasured" not in from_file and "0 stored" in from_file
    assert main([*base, "--plan", "--out", str(tmp_path / "empty")]) == 0
    assert "no measured unit cost" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main([*base, "--plan", "--out", str(tmp_path / "empty"), "--costs-from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "neither a run store" in err


def test_fresh_empties_the_store(tmp_path):
    from clustergym.cli.main import main

    out = str(tmp_path / "r")
    args = ["reproduce", PAPER, "--quick", "--tiny", "--instances", "0", "--workers", "1", "--no-progress", "--out", out]
    assert main(args) == 0
    marker = os.path.join(out, "store", "marker")
    open(marker, "w").close()
    assert main([*args, "--overwrite", "--fresh"]) == 0
    assert not os.path.exists(marker) and os.listdir(os.path.join(out, "store"))


def test_stored_task_writes_atomically(tmp_path, monkeypatch):
    """A write that fails part-way leaves no run file (the temporary file is removed)."""
    task = StoredTask(_square, str(tmp_path / "s"), "cccc", "t")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        task((3,))
    files = [f for _, _, fs in os.walk(tmp_path / "s") for f in fs]
    assert files == []


def test_the_learning_modules_key_only_a_trained_models_runs(monkeypatch):
    """Every run but a trained model's is keyed without clustergym/learning (no such run imports it: see
    tests/experiments/test_drl_benchmark.py); an sb3: run's key changes with the learning modules."""
    import clustergym.runner.runstore as rs
    from clustergym.runner.workers import _run_task

    base, learning = rs.fingerprint_files(False), rs.fingerprint_files(True)
    sep = os.sep + "learning" + os.sep
    assert base and learning and not any(sep in p for p in base) and all(sep in p for p in learning)
    assert not any(os.path.basename(p) == "render.py" for p in base)  # renderers cannot change a run
    store = RunStore("unused", code="x")
    plain = (ENV, "esdp", 0, 10, {"scenario_seed": 0})
    model = (ENV, "sb3:pretrained/MultiServerChannel-v0", 0, 10, {"scenario_seed": 0})
    before = store.key(_run_task, plain), store.key(_run_task, model)
    monkeypatch.setitem(rs._FINGERPRINT, True, "another-learning-code")
    after = store.key(_run_task, plain), store.key(_run_task, model)
    assert before[0] == after[0] and before[1] != after[1]


def _write_toy_package(root, factor: int) -> None:
    """A package whose task function (``tasks.task``) calls a callee in another module (``callee.scaled``)."""
    pkg = root / "toystorepkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "callee.py").write_text(f"FACTOR = {factor}\n\n\ndef scaled(x):\n    return FACTOR * x\n")
    (pkg / "tasks.py").write_text("from toystorepkg.callee import scaled\n\n\n"
                                  "def task(t, report=None):\n    return {'x': scaled(t[0])}\n")


def _toy_sweep(root, monkeypatch) -> tuple[list, RunStore]:
    """The toy task over (5,) through the store in ``root/s``, as a new process would run it: the modules
    imported afresh, the module hashes computed afresh."""
    import importlib

    import clustergym.runner.codescan as cs
    import clustergym.runner.runstore as rs

    monkeypatch.setattr(rs, "_MODULE_HASHES", {})
    monkeypatch.setattr(cs, "_IMPORTS", {})
    for mod in [m for m in sys.modules if m.startswith("toystorepkg")]:
        del sys.modules[mod]
    importlib.invalidate_caches()
    tasks = importlib.import_module("toystorepkg.tasks")
    register_task(tasks.task, describe=lambda t: TaskInfo(agent="toy", env_id="toy", horizon=1),
                  placeholder=lambda t: {"x": -1})
    with use_store(RunStore(str(root / "s"), code="same-fingerprint")) as store:
        out = run_tasks(tasks.task, [(5,)], 1)
    return out, store


def test_an_edit_to_a_callee_in_another_module_makes_the_stored_runs_stale(tmp_path, monkeypatch):
    """The key covers the modules the task function's module imports (transitively), not only its own: after
    an edit to the callee the run is computed again (the edited code's result), without an edit it is reused."""
    monkeypatch.syspath_prepend(str(tmp_path))
    _write_toy_package(tmp_path, 2)
    out, first = _toy_sweep(tmp_path, monkeypatch)
    assert out[0]["x"] == 10 and first.ran == 1
    out, same = _toy_sweep(tmp_path, monkeypatch)  # no edit: reused
    assert out[0]["x"] == 10 and same.reused == 1 and same.ran == 0
    _write_toy_package(tmp_path, 3)  # only the callee's module changes
    out, edited = _toy_sweep(tmp_path, monkeypatch)
    assert out[0]["x"] == 15 and edited.reused == 0 and edited.ran == 1


def test_an_experiment_task_is_keyed_by_the_experiment_modules_it_calls():
    """The OPM extra's task calls opm_runs.episode: opm_runs is among the sources its runs are keyed by."""
    from clustergym.runner.codescan import reachable_sources

    files = reachable_sources("clustergym.experiments.extra.opm_more")
    assert "clustergym.experiments.opm_runs" in files and "clustergym.runner.episode" in files
    assert files["clustergym.experiments.opm_runs"].endswith(os.path.join("experiments", "opm_runs.py"))
    assert not any(m.startswith("clustergym.cli") for m in files)  # not imported: a CLI edit keeps the runs
