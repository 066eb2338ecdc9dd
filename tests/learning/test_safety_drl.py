"""No lost work for the learned-scheduler benchmark (``clustergym drl``), model files and training.

One test per failure a user met: the shipped model deleted before its source was checked; a sweep of
``*.tmp-*`` / ``*.old-*`` that deleted users' folders; quick and full benchmarks sharing cells; exports from
quick runs, learner subsets or the wrong seed; an edited hyperparameter file not retraining; the train hint
naming the training instances; ``vecnormalize.npz`` unchecked; tracebacks (broken ``done.json``, pickled
weights, a side-car of another algorithm, ``range(0, 10**15)``, Ctrl-C inside numba and in training); and the
guards and conveniences SB3 users expect (``sb3:DIR``, ``import-model``, live TensorBoard logs, ``--version``,
help on every flag). Every test that touches files keeps an earlier state and checks it byte-identical after.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import clustergym  # noqa: E402
from tests.helpers import one_line_exit_2, snapshot  # noqa: E402
from clustergym.cli.main import main  # noqa: E402
from clustergym.experiments import drl, drl_cells, drl_export, drl_plan  # noqa: E402
from clustergym.learning.sb3_agent import PRETRAINED_DIR  # noqa: E402

P1, P2, P3, P4 = clustergym.ENV_IDS
LINUX = os.path.isdir("/proc")


# -- fixtures: a finished quick benchmark (one cell), a "full" one made from it, a small training run -------

@pytest.fixture(scope="module")
def quick_template(tmp_path_factory):
    """A finished quick benchmark folder: P4, learner ppo, training seed 1 (one cell)."""
    out = tmp_path_factory.mktemp("drlq") / "bench"
    drl.run_benchmark(str(out), quick=True, learners=["ppo"], seeds=[1], workers=1, progress=False,
                      log=lambda *_: None)
    assert (out / "p4" / "ppo" / "seed1" / "done.json").exists()
    return out


@pytest.fixture
def quick(quick_template, tmp_path):
    out = tmp_path / "bench"
    shutil.copytree(quick_template, out)
    return out, snapshot(out)


def _as_full(out) -> None:
    """Turn the quick folder into what the full benchmark records (its cell configuration, every learner of P4
    in the table, horizon 200): the export's checks see a complete cell of the full configuration."""
    plan = drl_plan.PLAN["p4"]
    ppo = next(lr for lr in plan.learners if lr.name == "ppo")
    done_p = out / "p4" / "ppo" / "seed1" / "done.json"
    done = json.loads(done_p.read_text())
    done["config"] = drl_cells.cell_config(plan, ppo, 1, drl_plan.HORIZON, False)
    done_p.write_text(json.dumps(done))
    summ = json.loads((out / "summary.json").read_text())
    summ.update(quick=False, horizon=drl_plan.HORIZON, training_seeds=[1])
    rows = summ["envs"]["p4"]["rows"]
    row = next(r for r in rows if r["learner"] == "ppo")
    row["per_seed_score"] = [0.625]
    row["score"] = 0.5  # the learner's mean (over its seeds): not this seed's own
    row["validation_total"] = 100.0
    for lr in plan.learners[1:]:  # higher on the held-out instances, lower on validation: the export keeps ppo
        rows.append({**row, "learner": lr.name, "score": 9.0, "per_seed_score": [9.0], "validation_total": -9.0})
    (out / "summary.json").write_text(json.dumps(summ))


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A copy of the shipped models, which the CLI's export writes to (the package's own stay untouched)."""
    import clustergym.learning.sb3_agent as agent_mod

    dest = tmp_path / "pretrained"
    shutil.copytree(PRETRAINED_DIR, dest)
    monkeypatch.setattr(agent_mod, "PRETRAINED_DIR", str(dest))
    return dest, snapshot(dest)


@pytest.fixture(scope="module")
def train_template(tmp_path_factory):
    """A small training run on P4's pool 0-4 (model, normalisation statistics, side-car, tb/)."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("tr") / "run"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = main(["train", P4, "--algo", "ppo", "--timesteps", "64", "--horizon", "16", "--n-envs", "1",
                   "--instances", "0-4", "--hp", "n_steps=32", "--hp", "batch_size=32", "--hp", "n_epochs=1",
                   "--out", str(out), "--no-progress"])
    assert rc == 0 and (out / "vecnormalize.npz").exists()
    (out.parent / "printed.txt").write_text(printed.getvalue())
    return out


@pytest.fixture
def trained(train_template, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(train_template, out)
    (tmp_path / "printed.txt").write_text((train_template.parent / "printed.txt").read_text())
    return out, snapshot(out)


def _train_printed(model) -> list[str]:
    """What `clustergym train` printed when it wrote the template run (kept beside the copy)."""
    return (model.parent / "printed.txt").read_text().splitlines()


@pytest.fixture
def earlier_results(tmp_path):
    """An earlier `run` in --out that a failing run with --overwrite must leave byte-identical."""
    out = tmp_path / "results"
    assert main(["run", P4, "--agents", "random", "--seeds", "0", "--horizon", "5", "--out", str(out),
                 "--no-plots", "--no-progress", "--no-score"]) == 0
    return out, snapshot(out)


def _run_sb3(model, results, *extra):
    return ["run", P4, "--agents", f"sb3:{model},random", "--instances", "7", "--seeds", "0", "--horizon", "8",
            "--out", str(results), "--overwrite", "--no-plots", "--no-progress", "--no-score", *extra]


# -- 1. export checks its source before touching the shipped model -----------------------------------------

def test_export_without_its_source_cell_leaves_the_shipped_model(quick, shipped, capsys):
    out, _ = quick
    dest, before = shipped
    _as_full(out)
    shutil.rmtree(out / "p4" / "ppo" / "seed1")  # the chosen learner's cell is gone
    with pytest.raises(ValueError, match="seed1"):
        drl_export.export_pretrained(str(out), "p4")
    assert snapshot(dest) == before
    # the command: refused before any training, the shipped models untouched
    line = one_line_exit_2(capsys, ["drl", "--learners", "ppo-100k", "--seeds", "1", "--export-pretrained", "--out",
                                     str(out), "--no-progress"])
    assert "--learners" in line and snapshot(dest) == before
    assert not [n for n in os.listdir(dest) if n.startswith(".clustergym")]


# -- 2. the sweep removes only the benchmark's own entries, only in its own cell folders --------------------

def test_sweep_spares_user_folders_and_other_benchmarks(quick, capsys):
    out, _ = quick
    user = [out / "thesis.old-draft", out / "data" / "cache.tmp-2024", out / "p4" / "ppo" / "notes.tmp-1",
            out / "p4" / "ppo" / "seed1.old-draft"]
    for u in user:
        u.mkdir(parents=True)
        (u / "chapter.txt").write_text("mine")
    nested = out / "sub" / "p4" / "ppo" / f"{drl_cells.STAGE}seed0-424242"  # another drl's live cell
    nested.mkdir(parents=True)
    (nested / "model.zip").write_text("x")
    ours = [out / "p4" / "ppo" / f"{drl_cells.STAGE}seed3-99", out / "p4" / "ppo" / f"{drl_cells.OLD}seed3-99",
            out / "p4" / "ppo" / "seed7.tmp-12345"]  # the last: an older version's leftover
    for o in ours:
        o.mkdir()
    before = snapshot(out)
    drl.run_benchmark(str(out), quick=True, learners=["ppo"], seeds=[1], workers=1, progress=False,
                      log=lambda *_: None)
    assert all(u.is_dir() for u in user) and nested.is_dir() and not any(o.exists() for o in ours)
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k in before and "eval" not in k and not k.startswith(
        ("table", "summary", "drl_p4"))} == {k: v for k, v in before.items() if "eval" not in k and not k.startswith(
            ("table", "summary", "drl_p4"))}


# -- 3. quick and full benchmarks never share a folder -------------------------------------------------------

def test_quick_and_full_runs_keep_to_their_own_folders(quick, capsys, tmp_path):
    out, before = quick
    line = one_line_exit_2(capsys, ["drl", "--envs", "p4", "--learners", "ppo", "--seeds", "1", "--out", str(out),
                                     "--no-progress"])
    assert "quick" in line and drl_plan.QUICK["out"] in line
    assert snapshot(out) == before
    full = tmp_path / "full"
    shutil.copytree(out, full)
    _as_full(full)
    snap = snapshot(full)
    line = one_line_exit_2(capsys, ["drl", "--quick", "--learners", "ppo", "--seeds", "1", "--out", str(full)])
    assert "full benchmark" in line and snapshot(full) == snap
    assert drl_plan.QUICK["out"] != drl_plan.FULL_OUT  # and their default folders differ


# -- 4. only a complete cell of the full configuration replaces a shipped model ------------------------------

@pytest.mark.parametrize("argv", [["--quick", "--export-pretrained"],
                                  ["--envs", "p4", "--learners", "ppo-100k,ppo-100k-machine", "--export-pretrained"]],
                         ids=["quick", "subset"])
def test_export_refuses_quick_runs_and_learner_subsets(quick, shipped, capsys, argv):
    out, before_out = quick
    dest, before = shipped
    line = one_line_exit_2(capsys, ["drl", *argv, "--out", str(out), "--no-progress"])
    assert "--export-pretrained" in line
    assert snapshot(dest) == before and snapshot(out) == before_out
    with pytest.raises(ValueError, match="not the full benchmark"):  # the API on the quick folder too
        drl_export.export_pretrained(str(out), "p4", dest_root=str(dest))
    assert snapshot(dest) == before


# -- 5. export ships the seed it names, labelled with that seed's own score -------------------------------

def test_export_ships_the_lowest_training_seed_with_its_own_score(quick, tmp_path):
    out, _ = quick
    _as_full(out)
    dest_root = tmp_path / "ship"
    shutil.copytree(PRETRAINED_DIR, dest_root)
    other = {k: v for k, v in snapshot(dest_root).items() if not k.startswith("ApproxJobs-v0")}
    dest = drl_export.export_pretrained(str(out), "p4", dest_root=str(dest_root), log=lambda *_: None)
    meta = json.loads(open(os.path.join(dest, "clustergym.json")).read())
    assert meta["pretrained"]["training_seed"] == 1  # --seeds 1: seed 1, not a seed0 cell
    assert meta["pretrained"]["held_out_score_of_this_seed"] == 0.625
    assert meta["pretrained"]["held_out_score_of_learner"] == 0.5
    assert {k: v for k, v in snapshot(dest_root).items() if not k.startswith("ApproxJobs-v0")} == other
    assert not [n for n in os.listdir(dest_root) if n.startswith(".clustergym")]
    res = clustergym.evaluate(P4, [f"sb3:{dest}"], [0], 8, instances=[0], progress=False, score=False)
    assert len(res.runs) == 1


def test_export_chooses_on_validation_runs_at_the_default_horizon_when_recorded(quick, tmp_path):
    """With several main rows the choice is made where users run them: ``ppo`` is the lowest on the 200-slot
    validation runs but the highest on the default-horizon ones, and is shipped (the only finished cell: the
    200-slot choice would stop on a missing cell)."""
    out, _ = quick
    _as_full(out)
    summ = json.loads((out / "summary.json").read_text())
    env = summ["envs"]["p4"]
    for r in env["rows"]:
        r["validation_total"] = -100.0 if r["learner"] == "ppo" else 9.0
    env["default_horizon"] = {"horizon": 2000, "rows": [],
                              "validation_totals": {lr.name: (100.0 if lr.name == "ppo" else -9.0)
                                                    for lr in drl_plan.PLAN["p4"].main_rows()}}
    (out / "summary.json").write_text(json.dumps(summ))
    dest_root = tmp_path / "ship"
    shutil.copytree(PRETRAINED_DIR, dest_root)
    dest = drl_export.export_pretrained(str(out), "p4", dest_root=str(dest_root), log=lambda *_: None)
    meta = json.loads(open(os.path.join(dest, "clustergym.json")).read())
    assert meta["pretrained"]["learner"] == "ppo"
    assert "at the env's default horizon (2000 slots)" in meta["pretrained"]["selected"]


# -- 6. editing a hyperparameter file retrains exactly the cells it changes ---------------------------------

def test_editing_the_hyperparameter_file_retrains_its_cells(quick, tmp_path, monkeypatch):
    """P4's cell follows its family's ppo.yml entry and the algorithm file's ``default`` it is read over."""
    import clustergym.learning.hyperparams as hp_mod
    from clustergym.core.family import env_entry

    out, before = quick
    hp_dir, own_dir = tmp_path / "hp", tmp_path / "own"
    shutil.copytree(hp_mod.HERE, hp_dir, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    hooks = env_entry("clustergym/ApproxJobs-v0")[0].hooks()
    shutil.copytree(hooks.HYPERPARAMS_DIR, own_dir)
    monkeypatch.setattr(hp_mod, "HERE", str(hp_dir))
    monkeypatch.setattr(hooks, "HYPERPARAMS_DIR", str(own_dir))
    plan = drl.plan_cells(str(out), quick=True, learners=["ppo"], seeds=[1])
    assert plan["todo"] == []
    with open(hp_dir / "ppo.yml", "a") as f:  # another env's entry: P4's cell stays
        f.write("\nclustergym/MultiServerChannel-v0-unused:\n  gamma: 0.5\n")
    assert drl.plan_cells(str(out), quick=True, learners=["ppo"], seeds=[1])["todo"] == []
    text = (own_dir / "ppo.yml").read_text()
    assert "clustergym/ApproxJobs-v0:" in text
    (own_dir / "ppo.yml").write_text(text.replace("clustergym/ApproxJobs-v0:", "clustergym/ApproxJobs-v0:\n  max_grad_norm: 0.4", 1))
    plan = drl.plan_cells(str(out), quick=True, learners=["ppo"], seeds=[1])
    assert plan["todo"] == [("p4", "ppo", 1)] and plan["stale"] == [("p4", "ppo", 1)]
    (own_dir / "ppo.yml").write_text(text)  # as before, then the shared default changes under it
    assert drl.plan_cells(str(out), quick=True, learners=["ppo"], seeds=[1])["todo"] == []
    shared = (hp_dir / "ppo.yml").read_text()
    (hp_dir / "ppo.yml").write_text(shared.replace("  normalize: true\n", "  normalize: false\n", 1))
    plan = drl.plan_cells(str(out), quick=True, learners=["ppo"], seeds=[1])
    assert plan["todo"] == [("p4", "ppo", 1)] and plan["stale"] == [("p4", "ppo", 1)]
    assert snapshot(out) == before  # planning writes nothing


# -- 7. train names held-out instances; the run table marks runs on training instances ----------------------

def test_train_hint_and_table_mark_training_instances(trained, earlier_results, capsys):
    from clustergym.cli.commands import _held_out

    assert _held_out(range(0, 5)) == "5-9" and _held_out([1000, 1001]) == "0-4" and _held_out([2]) == "0,1,3,4,5"
    model, before = trained
    hint = [ln for ln in _train_printed(model) if "evaluate on others" in ln]
    assert len(hint) == 1 and "trained on instances 0-4" in hint[0] and "--instances 5-9 " in hint[0], hint
    res_out, res_before = earlier_results
    assert main(_run_sb3(model, res_out, "--instances", "0,7")) == 0  # instance 0 is in its pool 0-4
    text = capsys.readouterr().out
    assert f"sb3:{model}*" in text and "1 of 2 runs on instances it was trained on (0)" in text
    assert snapshot(model) == before


# -- 8. vecnormalize.npz is validated ----------------------------------------------------------------------

@pytest.mark.parametrize("edit,word", [
    (lambda z: {**z, "mean": z["mean"][:-1]}, "mean has shape"),
    (lambda z: {**z, "var": -z["var"] - 1.0}, "var has negative"),
    (lambda z: {k: v for k, v in z.items() if k != "var"}, "missing var"),
    (lambda z: {**z, "mean": z["mean"] * np.nan}, "non-finite"),
    (lambda z: {**z, "clip_obs": np.float64(-1)}, "clip_obs"),
], ids=["shape", "negative-var", "no-var", "nan", "clip"])
def test_bad_normalisation_statistics_are_one_line(trained, earlier_results, capsys, edit, word):
    model, before = trained
    res_out, res_before = earlier_results
    npz = model / "vecnormalize.npz"
    with np.load(npz) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(npz, **edit(arrays))
    line = one_line_exit_2(capsys, _run_sb3(model, res_out))
    assert word in line and "vecnormalize.npz" in line
    assert snapshot(res_out) == res_before
    np.savez(npz, **arrays)  # restored: the model evaluates again
    assert main(_run_sb3(model, res_out)) == 0


def test_normalize_false_beside_statistics_is_one_line(trained, earlier_results, capsys):
    model, _ = trained
    res_out, res_before = earlier_results
    side = model / "clustergym.json"
    text = side.read_text()
    side.write_text(json.dumps({**json.loads(text), "normalize": False}))
    line = one_line_exit_2(capsys, _run_sb3(model, res_out))
    assert "normalize: false" in line and snapshot(res_out) == res_before
    side.write_text(text)


# -- tracebacks that are one line now ---------------------------------------------------------------------

@pytest.mark.parametrize("content,word", [("[1, 2]", "not a JSON object"), (None, "no 'timesteps_trained'"),
                                          ("{not json", "unreadable")], ids=["list", "no-timesteps", "garbage"])
def test_a_broken_done_json_is_one_line_before_any_training(quick, capsys, content, word):
    out, _ = quick
    done = out / "p4" / "ppo" / "seed1" / "done.json"
    if content is None:
        d = json.loads(done.read_text())
        del d["timesteps_trained"]
        content = json.dumps(d)
    done.write_text(content)
    before = snapshot(out)
    # seed 2 is not trained yet: the broken record is reported before it is (not after every other cell)
    line = one_line_exit_2(capsys, ["drl", "--quick", "--learners", "ppo", "--seeds", "1,2", "--out", str(out),
                                     "--no-progress"])
    assert word in line and "delete the folder" in line and "seed1" in line
    assert snapshot(out) == before and not (out / "p4" / "ppo" / "seed2").exists()


def test_a_corrupt_model_in_a_finished_cell_names_the_cell_to_delete(quick, capsys):
    out, _ = quick
    (out / "p4" / "ppo" / "seed1" / "model.zip").write_bytes(b"PK\x03\x04 truncated")
    before = snapshot(out)
    line = one_line_exit_2(capsys, ["drl", "--quick", "--learners", "ppo", "--seeds", "1", "--out", str(out),
                                     "--no-progress"])
    assert "model.zip" in line and "delete the folder" in line and snapshot(out) == before


def _rewrite_zip(path, name, data: bytes) -> None:
    tmp = str(path) + ".new"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for item in src.namelist():
            dst.writestr(item, data if item == name else src.read(item))
    os.replace(tmp, path)


def test_pickled_weights_are_refused_in_one_line(trained, earlier_results, capsys, tmp_path):
    import datetime

    import torch

    model, _ = trained
    res_out, res_before = earlier_results
    blob = tmp_path / "w.pth"
    torch.save({"when": datetime.date(2024, 1, 1)}, blob)  # a pickled object: not loadable with weights_only
    _rewrite_zip(model / "model.zip", "policy.pth", blob.read_bytes())
    line = one_line_exit_2(capsys, _run_sb3(model, res_out))
    assert "does not load" in line and snapshot(res_out) == res_before


@pytest.mark.parametrize("algo,word", [("a2c", "not saved by a2c"), ("sac", "sac"), ("maskable_ppo", "policy")])
def test_a_side_car_of_another_algorithm_is_one_line(trained, earlier_results, capsys, algo, word):
    model, before = trained
    res_out, res_before = earlier_results
    side = model / "clustergym.json"
    text = side.read_text()
    side.write_text(json.dumps({**json.loads(text), "algo": algo}))
    line = one_line_exit_2(capsys, _run_sb3(model, res_out))
    assert word in line and snapshot(res_out) == res_before
    side.write_text(text)
    assert snapshot(model) == before


def test_huge_instance_ranges_are_refused_at_once(tmp_path):
    from clustergym.learning.training import TrainConfig, train

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="instances has 1,000,000,000,000,000 values"):
        clustergym.evaluate(P4, ["random"], [0], 5, instances=range(0, 10**15), progress=False)
    with pytest.raises(ValueError, match="instances has"):
        train(TrainConfig(P4, "ppo", 64, instances=range(0, 10**15)), str(tmp_path / "t"))
    with pytest.raises(ValueError, match="seeds has"):
        clustergym.evaluate(P4, ["random"], range(0, 10**12), 5, progress=False)
    assert time.perf_counter() - t0 < 30 and not (tmp_path / "t").exists()


def _start(argv, out_dir):
    """The CLI as a user starts it from a terminal (SIGINT at its default: a suite run as a background job has
    it ignored, which children inherit), with line-buffered output."""
    return subprocess.Popen([sys.executable, "-m", "clustergym", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait(cond, proc, what, timeout=180.0):
    t0 = time.time()
    while not cond():
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < timeout, f"{what} never happened"
        time.sleep(0.1)


def _staging(folder):
    try:
        return [os.path.join(folder, n) for n in os.listdir(folder) if n.startswith(".clustergym-staging-")]
    except OSError:
        return []


@pytest.mark.skipif(not LINUX, reason="POSIX signals")
def test_ctrl_c_during_an_in_process_esdp_run_is_one_line_exit_130(earlier_results):
    out, before = earlier_results
    proc = _start(["run", P1, "--agents", "esdp", "--seeds", "0", "--horizon", "100000", "--no-progress",
                   "--no-score", "--overwrite", "--out", str(out)], out)
    try:
        _wait(lambda: _staging(out), proc, "the run's start")
        time.sleep(4.0)  # inside ESDP's compiled dynamic programme most of the time
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, err
    assert lines[0].startswith("clustergym: interrupted after 0 of 1 runs"), err
    assert snapshot(out) == before and not _staging(out)


@pytest.mark.skipif(not LINUX, reason="POSIX signals")
def test_ctrl_c_during_train_is_one_line_and_tensorboard_logs_were_live(trained):
    out, before = trained
    proc = _start(["train", P4, "--algo", "ppo", "--timesteps", "1000000", "--horizon", "16", "--n-envs", "1",
                   "--hp", "n_steps=32", "--hp", "batch_size=32", "--hp", "n_epochs=1", "--instances", "0-4",
                   "--overwrite", "--no-progress", "--out", str(out)], out)
    try:
        first = proc.stdout.readline()
        assert first.startswith("TensorBoard logs, live: tensorboard --logdir "), first
        tb = first.split("--logdir ", 1)[1].split(" (moved", 1)[0]
        assert tb.startswith(str(out)) and os.sep + ".clustergym-staging-" in tb

        def events():
            return [f for _, _, fs in os.walk(tb) for f in fs if f.startswith("events.out.tfevents")]

        _wait(lambda: events() and os.path.getsize(os.path.join(
            next(d for d, _, fs in os.walk(tb) if events()[0] in fs), events()[0])) > 100, proc, "a live event")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, err
    assert lines[0].startswith("clustergym: interrupted") and "nothing in --out was replaced" in lines[0], err
    assert snapshot(out) == before and not _staging(out)


@pytest.mark.skipif(not LINUX, reason="POSIX signals")
def test_ctrl_c_during_drl_keeps_finished_cells_in_one_line(quick):
    out, before = quick
    proc = _start(["drl", "--quick", "--learners", "ppo", "--seeds", "1,4", "--workers", "1", "--no-progress",
                   "--out", str(out)], out)
    cells = out / "p4" / "ppo"
    try:
        _wait(lambda: [n for n in os.listdir(cells) if n.startswith(drl_cells.STAGE)], proc, "a cell's training")
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, err
    assert lines[0].startswith("clustergym: interrupted after 0 of 1 cells") and "finished cells are kept" in lines[0]
    assert snapshot(out) == before  # the finished cell (seed 1) and everything else as it was; seed 4 discarded
    assert not [n for n in os.listdir(cells) if n.startswith(drl_cells.STAGE)]


# -- guards ------------------------------------------------------------------------------------------------

def test_drl_shares_the_lock_of_run_and_train(quick, capsys, tmp_path):
    from clustergym.core.outdir import FolderLock, OutputFolder

    out, before = quick
    with FolderLock(str(out)):  # drl holds the folder: run and train are refused
        line = one_line_exit_2(capsys, ["run", P4, "--agents", "random", "--out", str(out), "--horizon", "5",
                                         "--no-progress"])
        assert "in use" in line
    held = OutputFolder(str(out), overwrite=True, marks=()).__enter__()  # a run holds it: drl is refused
    try:
        line = one_line_exit_2(capsys, ["drl", "--quick", "--learners", "ppo", "--seeds", "1,3", "--out", str(out),
                                         "--no-progress"])
        assert "in use" in line
    finally:
        held.__exit__(RuntimeError, None, None)  # the run failed: it commits nothing
    assert snapshot(out) == before and not (out / "p4" / "ppo" / "seed3").exists()


@pytest.mark.skipif(not LINUX, reason="ulimit -f")
def test_drl_checks_free_space_and_the_file_size_limit_first(tmp_path):
    import resource

    out = tmp_path / "d"

    def small():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    r = subprocess.run([sys.executable, "-m", "clustergym", "drl", "--quick", "--learners", "ppo", "--seeds", "0",
                        "--out", str(out), "--no-progress"], capture_output=True, text=True, timeout=300,
                       preexec_fn=small)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "ulimit -f" in lines[0], r.stderr
    assert not out.exists()


def test_bc_steps_without_warm_start_is_one_line(trained, capsys):
    out, before = trained
    for flag in ("--bc-steps", "--bc-epochs"):
        line = one_line_exit_2(capsys, ["train", P4, "--algo", "ppo", flag, "5", "--out", str(out), "--overwrite"])
        assert flag in line and "--warm-start" in line
    assert snapshot(out) == before


def test_drl_quick_clones_briefly():
    """--quick keeps every code path with short behaviour cloning (not the full run's 20,000 teacher slots)."""
    for p in drl_plan.PLAN.values():
        for lr in p.learners:
            if "warm_start" in lr.options:
                o = lr.config(True)["options"]
                assert o["bc_steps"] == drl_plan.QUICK["bc_steps"] <= 1000 and o["bc_epochs"] <= 10
                assert "bc_steps" not in lr.config(False)["options"] or lr.config(False)["options"]["bc_steps"] > 1000


# -- as SB3 users expect --------------------------------------------------------------------------------------

def test_sb3_accepts_a_run_folder_and_names_a_missing_side_car(trained, earlier_results, capsys, tmp_path):
    model, before = trained
    res_out, _ = earlier_results
    assert main(_run_sb3(model, res_out)) == 0  # sb3:DIR
    a = json.loads((res_out / "results.json").read_text())["runs"]
    assert main(_run_sb3(model / "model.zip", res_out)) == 0  # sb3:DIR/model.zip: the same model, the same runs
    b = json.loads((res_out / "results.json").read_text())["runs"]
    assert [r["total_reward"] for r in a] == [r["total_reward"] for r in b]
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(model / "model.zip", bare)
    capsys.readouterr()
    line = one_line_exit_2(capsys, _run_sb3(bare, res_out))
    assert "in the folder" in line and "import-model" in line
    assert snapshot(model) == before


@pytest.fixture(scope="module")
def plain_sb3(tmp_path_factory):
    """A PPO trained the way SB3's documentation shows, on FlattenObservation(gym.make(id)), tiny budget."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    d = tmp_path_factory.mktemp("plain")
    env = gym.wrappers.FlattenObservation(gym.make(P4, horizon=20))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(64)
    model.save(d / "ppo_p4.zip")
    obs, _ = env.reset(seed=3)
    acts = []  # the model's own deterministic actions on the env's own rollout
    for _ in range(5):
        a, _ = model.predict(obs, deterministic=True)
        acts.append(np.asarray(a).copy())
        obs, *_ = env.step(a)
    return d / "ppo_p4.zip", acts


def test_a_plain_sb3_model_evaluates_through_import_model(plain_sb3, tmp_path, capsys):
    zip_path, acts = plain_sb3
    imp = tmp_path / "imported"
    assert main(["import-model", str(zip_path), "--env", P4, "--out", str(imp)]) == 0
    out = capsys.readouterr().out
    assert f"--agents sb3:{imp}" in out
    meta = json.loads((imp / "clustergym.json").read_text())
    assert meta["obs"] == "flatten" and meta["algo"] == "ppo" and not meta["normalize"]
    res = tmp_path / "res"
    assert main(["run", P4, "--agents", f"sb3:{imp},random", "--seeds", "0-1", "--horizon", "20", "--out", str(res),
                 "--no-plots", "--no-progress"]) == 0
    runs = json.loads((res / "results.json").read_text())["runs"]
    assert len([r for r in runs if r["agent"] == f"sb3:{imp}"]) == 2
    # the agent acts as the model does on FlattenObservation: same actions on the same rollout
    from clustergym.core.agent import make

    import gymnasium as gym

    agent = make(f"sb3:{imp}", env_id=P4)
    env = gym.make(P4, horizon=20)
    obs, info = env.reset(seed=3)
    agent.reset(env.unwrapped.problem, seed=3)
    for want in acts:
        a = agent.act(obs, info)
        assert np.array_equal(np.asarray(a), want)
        obs, r, term, trunc, info = env.step(a)
        agent.update(obs, a, r, obs, info)


def test_import_model_checks_spaces_and_writes_nothing_on_a_mismatch(plain_sb3, tmp_path, capsys):
    zip_path, _ = plain_sb3
    imp = tmp_path / "imp"
    line = one_line_exit_2(capsys, ["import-model", str(zip_path), "--env", P1, "--out", str(imp)])
    assert "FlattenObservation" in line and not imp.exists()
    line = one_line_exit_2(capsys, ["import-model", str(zip_path), "--env", P4, "--algo", "a2c", "--out", str(imp)])
    assert "a2c" in line and not imp.exists()
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    line = one_line_exit_2(capsys, ["import-model", str(bad), "--env", P4, "--out", str(imp)])
    assert "not a model saved by SB3" in line and not imp.exists()


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"clustergym {clustergym.__version__}"


def test_every_cli_flag_has_help():
    import argparse

    from clustergym.cli.main import build_parser

    p = build_parser()
    missing = [f"{name} {a.option_strings or a.dest}" for name, sp in p._subparsers._group_actions[0].choices.items()
               for a in sp._actions if not a.help and not isinstance(a, argparse._HelpAction)]
    missing += [str(a.option_strings) for a in p._actions
                if not a.help and not isinstance(a, argparse._SubParsersAction)]
    assert not missing, missing


def test_the_eta_is_weighted_by_each_agents_measured_cost():
    from clustergym.core.progress import CostBar, interleaved

    class Bar:
        total, n, postfix = 0, 0, ""

        def update(self, n):
            self.n += n

        def set_postfix_str(self, text, refresh=True):
            self.postfix = text

    now = [0.0]
    tasks = [("e", "fast", s, 100, {}) for s in range(3)] + [("e", "slow", s, 100, {}) for s in range(3)]
    order = interleaved(tasks)
    assert [tasks[i][1] for i in order] == ["fast", "slow"] * 3
    bar = CostBar(Bar(), tasks, 1, clock=lambda: now[0], every=0.0)
    bar.start_task(tasks[0])
    for _ in range(100):  # 1 ms a slot
        now[0] += 0.001
        bar.update(1)
    assert bar.eta() == pytest.approx(500 * 0.001)  # only the fast agent measured: the others count as it
    bar.start_task(tasks[3])
    for _ in range(50):  # 100 ms a slot
        now[0] += 0.1
        bar.update(1)
    # 200 fast slots at 1 ms + 250 slow slots at 100 ms: the slow agent's measured cost, not a slot average
    assert bar.eta() == pytest.approx(200 * 0.001 + 250 * 0.1)
    assert "ETA 00:25" in bar.bar.postfix
    two = CostBar(Bar(), tasks, 2, clock=lambda: now[0])
    two.run_done(type("R", (), {"agent": "slow", "wall_s": 10.0, "steps": 100})())
    assert two.eta() == pytest.approx((300 * 0.1 + 200 * 0.1) / 2)
    # the runner runs round-robin and returns results in the order asked, equal to a parallel sweep's
    a = clustergym.evaluate(P1, ["hauf", "lcf"], [0, 1], 20, progress=True, score=False)
    b = clustergym.evaluate(P1, ["hauf", "lcf"], [0, 1], 20, progress=False, score=False, workers=2)
    assert [(r.agent, r.seed) for r in a.runs] == [("hauf", 0), ("hauf", 1), ("lcf", 0), ("lcf", 1)]
    assert [r.total_reward for r in a.runs] == [r.total_reward for r in b.runs]


# -- the side-car is validated like every other untrusted file --------------------------------------------

def _deep(side, meta):
    side.write_text(json.dumps({**meta, "hyperparams": {}})[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")


@pytest.mark.parametrize("edit, words", [
    (_deep, ("nested 100,001 levels", "at most 64")),
    (lambda side, m: side.write_text(json.dumps({**m, "instances": "0-99999999999"})),
     ("instances '0-99999999999'", "list of 1 to 100,000")),
    (lambda side, m: side.write_text(json.dumps({**m, "env_kwargs": {**m["env_kwargs"], "horizon": 1e30}})),
     ("env_kwargs.horizon 1e+30", "from 1 to")),
    (lambda side, m: side.write_text(json.dumps({**m, "timesteps_trained": float("nan")})),
     ("timesteps_trained nan", "an integer >= 0")),
    (lambda side, m: (side.parent / "vecnormalize.npz").unlink(),
     ("normalize is true", "vecnormalize.npz is missing")),
    (lambda side, m: side.write_text(" " * (5 * 2**20)), ("MiB", "at most 4 MiB")),
], ids=["deep", "instances", "horizon", "nan", "no-statistics", "huge"])
def test_a_bad_side_car_is_one_line_naming_the_file_field_and_valid_values(trained, earlier_results, capsys, edit,
                                                                           words):
    model, _ = trained
    res_out, res_before = earlier_results
    side = model / "clustergym.json"
    edit(side, json.loads(side.read_text()))
    line = one_line_exit_2(capsys, _run_sb3(model, res_out))
    assert "clustergym.json" in line and all(w in line for w in words), line
    assert snapshot(res_out) == res_before


def test_the_benchmark_reads_side_cars_with_the_same_limits(tmp_path):
    """`clustergym drl` checks a finished cell's side-car with the sb3: agent's validated reader: a file nested
    100,000 levels deep is a cell error naming the depth, not a RecursionError."""
    from clustergym.experiments.drl_cells import CellError, check_cell_files

    (tmp_path / "clustergym.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CellError, match="nested"):
        check_cell_files(str(tmp_path))
