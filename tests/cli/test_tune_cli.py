"""`clustergym tune`: a storage URL that cannot work is one line, exit 2, before any folder is made; Ctrl-C
keeps the finished trials (one line saying how many) and a continued study proposes new hyperparameters."""

import json

import pytest

from clustergym.cli.main import main
from clustergym.learning import tuning

P4 = "clustergym/ApproxJobs-v0"


def _one_line(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def _bad_urls(tmp_path):
    js = tmp_path / "a.json"
    js.write_text(json.dumps({"not": "a database"}))
    return {"bogus://x": "unknown database", "sqlite:////nonexistent/dir/x.db": "does not exist",
            "postgresql://u:secret@127.0.0.1:1/db": "postgresql", f"sqlite:///{js}": "not an SQLite database",
            "not a url": "not a database URL"}


@pytest.mark.parametrize("which", range(5))
def test_bad_storage_is_one_line_and_leaves_no_folder(which, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tuning, "_reference_values", lambda *a: pytest.fail("the study started"))
    url, needle = list(_bad_urls(tmp_path).items())[which]
    out = tmp_path / "t"
    assert main(["tune", P4, "--trials", "1", "--timesteps", "64", "--storage", url, "--out", str(out),
                 "--no-progress"]) == 2
    err = _one_line(capsys)
    assert needle in err and "secret" not in err
    assert not out.exists()


def _fake_objective(stop_after=None):
    """An objective that samples the search space and scores without training; KeyboardInterrupt on call
    ``stop_after`` (Ctrl-C mid-trial)."""
    calls = []

    def make(cfg, ref, rnd, progress):
        def objective(trial):
            calls.append(trial.number)
            hp = tuning.sample_params(trial, cfg.algo)
            if stop_after is not None and len(calls) > stop_after:
                raise KeyboardInterrupt
            trial.set_user_attr("hyperparams", hp)
            return float(trial.number)
        return objective

    return make


def _proposals(path):
    return [json.dumps(t["params"], sort_keys=True) for t in json.load(open(path))["trials"]
            if t["state"] == "COMPLETE"]


def test_interrupted_study_keeps_its_trials_and_continues_with_new_proposals(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tuning, "_reference_values", lambda *a: ({}, {}))
    out = tmp_path / "t"
    argv = lambda n: ["tune", P4, "--algo", "ppo", "--trials", str(n), "--timesteps", "64", "--out", str(out),  # noqa: E731
                      "--no-progress"]
    monkeypatch.setattr(tuning, "_objective", _fake_objective(stop_after=4))
    assert main(argv(8)) == 130
    err = _one_line(capsys)
    assert "holds 4 finished trials" in err and "continue" in err
    first = _proposals(out / "tuning.json")
    assert len(first) == 4
    monkeypatch.setattr(tuning, "_objective", _fake_objective())
    assert main(argv(4)) == 0
    both = _proposals(out / "tuning.json")
    assert both[:4] == first and len(both) == 8
    assert not set(both[4:]) & set(first)  # new hyperparameters, not the first run's again


def test_the_sampler_seed_is_the_seed_for_a_new_study_and_new_for_a_continued_one():
    assert tuning.sampler_seed(3, 0) == 3
    assert len({tuning.sampler_seed(3, n) for n in range(0, 6)}) == 6
    assert tuning.sampler_seed(3, 4) != tuning.sampler_seed(4, 4)


@pytest.mark.parametrize("extra, needle", [
    (["--horizon", "1000000000000"], "horizon=1000000000000"),
    (["--horizon", "0"], "horizon=0"),
])
def test_absurd_tune_sizes_are_one_line_before_any_folder(extra, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tuning, "_reference_values", lambda *a: pytest.fail("the study started"))
    out = tmp_path / "t"
    assert main(["tune", P4, "--trials", "1", "--timesteps", "64", "--out", str(out), "--no-progress", *extra]) == 2
    assert needle in _one_line(capsys) and not out.exists()


def test_a_failure_before_any_trial_leaves_no_folder(tmp_path, capsys, monkeypatch):
    def fail(*a):
        raise ValueError("the reference failed")

    monkeypatch.setattr(tuning, "_reference_values", fail)
    out = tmp_path / "t"
    assert main(["tune", P4, "--trials", "1", "--timesteps", "64", "--out", str(out), "--no-progress"]) == 2
    assert "the reference failed" in _one_line(capsys) and not out.exists()


BASE = ["tune", P4, "--algo", "ppo", "--trials", "1", "--timesteps", "64", "--horizon", "10", "--no-progress"]
# Every setting a study keeps, the option changed and the words the refusal names (the option, the new value and
# the study's): a continuation with any of them different is refused before anything runs.
CHANGED = {
    "env_id": (lambda a: [a[0], "clustergym/MultiServerChannel-v0", *a[2:]], "ENV_ID clustergym/MultiServerChannel-v0"),
    "algo": (lambda a: [*a, "--algo", "a2c"], "--algo a2c differs"),
    "net": (lambda a: [*a, "--net", "entity"], "--net entity differs"),
    "timesteps": (lambda a: [*a, "--timesteps", "128"], "--timesteps 128 differs"),
    "horizon": (lambda a: [*a, "--horizon", "12"], "--horizon 12 differs"),
    "reference": (lambda a: [*a, "--reference", "edf"], "--reference edf differs"),
    "instances": (lambda a: [*a, "--instances", "901"], "--instances 901 differs"),
    "seeds": (lambda a: [*a, "--seeds", "1"], "--seeds 1 differs"),
    "set": (lambda a: [*a, "--set", "beta=0.7"], "--set beta=0.7 differs"),
    "train_seeds": (lambda a: [*a, "--train-seeds", "3"], "--train-seeds 3 differs"),
    "n_envs": (lambda a: [*a, "--n-envs", "2"], "--n-envs 2 differs"),
    "seed": (lambda a: [*a, "--seed", "5"], "--seed 5 differs"),
    "study": (lambda a: [*a, "--study", "another"], "--study another differs"),
}
SHOWN = {"env_id": "(clustergym/ApproxJobs-v0)", "algo": "(ppo)", "net": "(mlp)", "timesteps": "(64)",
         "horizon": "(10)", "reference": "(fair)", "instances": "(900-909)", "seeds": "(0)", "set": "(none)",
         "train_seeds": "(2)", "n_envs": "(4)", "seed": "(0)", "study": "(ApproxJobs-v0-ppo)"}


def _first_study(monkeypatch, argv) -> None:
    """One trial of a study without training: the reference runs and the objective stubbed."""
    monkeypatch.setattr(tuning, "_reference_values", lambda *a: ({}, {}))
    monkeypatch.setattr(tuning, "_objective", _fake_objective())
    assert main(argv) == 0


def _no_run(monkeypatch) -> None:
    monkeypatch.setattr(tuning, "_reference_values", lambda *a: pytest.fail("a refused continuation ran"))
    monkeypatch.setattr(tuning, "_objective", lambda *a: pytest.fail("a refused continuation trained"))


@pytest.mark.parametrize("setting", sorted(CHANGED))
def test_a_continuation_into_the_same_out_with_another_setting_is_refused(setting, tmp_path, capsys, monkeypatch):
    """The study's record in --out holds its settings: a run with another one would score its trials against
    the study's reference runs (or replace its record), so it is one line naming the option, exit 2, and the
    record is left as it was."""
    out = tmp_path / "t"
    _first_study(monkeypatch, [*BASE, "--out", str(out)])
    capsys.readouterr()
    before = (out / "tuning.json").read_bytes()
    _no_run(monkeypatch)
    change, needle = CHANGED[setting]
    assert main([*change(BASE), "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert needle in err and SHOWN[setting] in err and str(out) in err and "another --out" in err, err
    assert (out / "tuning.json").read_bytes() == before


@pytest.mark.parametrize("setting", sorted(set(CHANGED) - {"study"}))
def test_a_continuation_of_a_shared_study_with_another_setting_is_refused(setting, tmp_path, capsys, monkeypatch):
    """The same through a shared --storage and --study from another --out (no record there): the study keeps its
    settings; the refusal leaves no folder."""
    storage, argv = f"sqlite:///{tmp_path / 'shared.db'}", [*BASE, "--study", "s"]
    _first_study(monkeypatch, [*argv, "--storage", storage, "--out", str(tmp_path / "first")])
    capsys.readouterr()
    _no_run(monkeypatch)
    change, needle = CHANGED[setting]
    out = tmp_path / "second"
    assert main([*change(argv), "--storage", storage, "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert needle in err and SHOWN[setting] in err and "--storage" in err and "another --study" in err, err
    assert not out.exists()


@pytest.mark.parametrize("shared", [False, True])
def test_a_continuation_with_the_same_settings_continues(shared, tmp_path, capsys, monkeypatch):
    """Only the number of trials may change: the study goes on (its trials kept, the record holds them all)."""
    out = tmp_path / "t"
    extra = ["--storage", f"sqlite:///{tmp_path / 'shared.db'}", "--study", "s"] if shared else []
    _first_study(monkeypatch, [*BASE, *extra, "--out", str(out)])
    assert main([*BASE, *extra, "--trials", "2", "--out", str(out)]) == 0
    assert len(_proposals(out / "tuning.json")) == 3


def test_a_file_in_out_that_is_not_a_tuning_record_is_kept(tmp_path, capsys, monkeypatch):
    out = tmp_path / "t"
    out.mkdir()
    (out / "tuning.json").write_text("not json")
    _no_run(monkeypatch)
    assert main([*BASE, "--out", str(out)]) == 2
    assert "is not a tuning record" in _one_line(capsys) and (out / "tuning.json").read_text() == "not json"
