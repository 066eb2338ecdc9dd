"""`clustergym train`: every bad value or combination is one line, exit 2, before the --out folder is made
and before any log line; absurd sizes are refused from an estimate."""

import os

import pytest

from clustergym.cli.main import main

P1 = "clustergym/MultiServerChannel-v0"


@pytest.mark.parametrize("extra, needle", [
    (["--param-draws", "-1"], ">= 0"),
    (["--param-draws", "1000000000000"], "param_draws=1000000000000"),
    (["--net", "entity", "--vec", "native"], "vec='native'"),
    (["--vec", "native", "--param-draws", "2"], "vec='native'"),
    (["--vec", "subproc", "--n-envs", "64"], "subproc"),
])
def test_bad_train_input_is_one_line_before_any_folder_or_log(extra, needle, tmp_path, capsys):
    out = tmp_path / "t"
    rc = main(["train", P1, "--timesteps", "64", "--horizon", "20", "--no-progress", "--out", str(out), *extra])
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert needle in err
    assert cap.out == "" and not os.path.exists(out)


def test_param_draws_help_states_its_range(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert ">= 0" in " ".join(capsys.readouterr().out.split())


def test_the_commands_defaults_are_train_configs(tmp_path, monkeypatch):
    """`clustergym train ENV --algo A --timesteps N` trains ``TrainConfig(ENV, A, N)``: the config's defaults are
    the command's (empty env kwargs and hyperparameters aside, which mean the same as None)."""
    from dataclasses import replace

    import clustergym.learning.training as training
    from clustergym.learning.training import TrainConfig

    seen = []

    def fake_train(config, out, **kw):
        seen.append(config)
        return {"algo": config.algo, "env_id": config.env_id, "timesteps": 64, "train_wall_s": 0.0}

    monkeypatch.setattr(training, "train", fake_train)
    assert main(["train", P1, "--algo", "ppo", "--timesteps", "64", "--no-progress", "--out", str(tmp_path / "r")]) == 0
    (config,) = seen
    assert config.env_kwargs == {} and config.hyperparams == {}
    assert replace(config, env_kwargs=None, hyperparams=None) == TrainConfig(P1, "ppo", 64)


def test_train_takes_a_train_config(tmp_path):
    from dataclasses import FrozenInstanceError

    from clustergym.learning.training import TrainConfig, train

    with pytest.raises(FrozenInstanceError):
        TrainConfig(P1, "ppo", 64).seed = 1
    with pytest.raises(TypeError, match="expected a TrainConfig, got str"):
        train(P1, str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()
