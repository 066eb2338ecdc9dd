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
