"""Hostile training inputs: hyperparameter values and files, sizes, seeds and model files.

Each case runs the CLI in-process under an alarm (a hang fails the test) and must end in exit 2 with one line on
stderr naming the parameter or file, no traceback, and the earlier run in ``--out`` untouched. Where a guard has to
fire before training, training itself is stubbed (a guard that let the case through would exit 0).
"""

from __future__ import annotations

import math
import os
import shutil
import signal

import pytest

pytest.importorskip("stable_baselines3")

import clustergym
from clustergym.cli.main import main
from clustergym.learning import training
from clustergym.runner.results import RUN_FILES

P4 = clustergym.ENV_IDS[3]
_REAL_TRAIN = training.train  # the fixture stubs it; the divergence cases run it with learning stubbed
TIMEOUT_S = 90
OLD = b"the earlier run"


class _Hang(BaseException):
    """Raised by the alarm: not an Exception, so the CLI cannot turn it into its one line."""


def _alarm(signum, frame):
    raise _Hang(f"no answer within {TIMEOUT_S} s")


def _snapshot(root) -> dict:
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            if f == ".clustergym.lock":  # the lock file a command leaves in --out (empty), not a result
                continue
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.join(d, f)] = fh.read()
    return out


@pytest.fixture
def cli(tmp_path, capsys, monkeypatch):
    """``cli(argv, mark)`` -> stderr, asserting exit 2, one line, no traceback, no file changed under tmp_path;
    ``OUT`` in argv is a folder holding an earlier run (its file ``mark``), passed with --overwrite."""
    monkeypatch.chdir(tmp_path)

    def fake_train(config, out, **kw):  # reached only when a guard failed to fire
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, "model.zip"), "w").close()
        return {"algo": config.algo, "env_id": config.env_id, "timesteps": 1, "train_wall_s": 0.0}

    monkeypatch.setattr(training, "train", fake_train)

    def run(argv, mark="model.zip"):
        (tmp_path / "OUT").mkdir(exist_ok=True)
        (tmp_path / "OUT" / mark).write_bytes(OLD)
        before = _snapshot(tmp_path)
        capsys.readouterr()
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(TIMEOUT_S)
        try:
            rc = main([*argv, "--out", str(tmp_path / "OUT"), "--overwrite"])
        except SystemExit as exc:
            rc = exc.code
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        err = capsys.readouterr().err
        assert rc == 2, (argv, rc, err)
        assert "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err
        assert len(err) < 500, err[:600]
        assert _snapshot(tmp_path) == before, argv
        return err

    return run


TRAIN = ["train", P4, "--timesteps", "64", "--no-progress", "--hp", "n_steps=32", "--hp", "batch_size=32"]


@pytest.mark.parametrize("args, named", [
    (["--hp", "gamma=Infinity"], "gamma"),
    (["--hp", "gamma=1.5"], "gamma"),
    (["--hp", "learning_rate=NaN"], "learning_rate"),
    (["--hp", "learning_rate=-0.001"], "learning_rate"),
    (["--hp", "clip_range=0"], "clip_range"),
    (["--hp", "clip_range=Infinity"], "clip_range"),
    (["--hp", "n_steps=0"], "n_steps"),
    (["--hp", "n_steps=1e12"], "n_steps"),
    (["--hp", "batch_size=2.5"], "batch_size"),
    (["--hp", "normalize_advantage=\"no\""], "normalize_advantage"),
    (["--hp", "seed=3"], "--seed"),
    (["--hp", "nonsense=1"], "nonsense"),
    (["--seed=-1"], "seed=-1"),
    (["--seed", str(2**32)], "seed="),
    (["--param-draws", "2000000"], "param_draws"),
    (["--horizon", str(10**12)], "horizon"),
    (["--n-envs", str(10**8)], "n_envs"),
    (["--hp", f"n_steps={10**8}"], "n_steps"),
    (["--hp", 'policy_kwargs={"net_arch": [100000000]}'], "net_arch"),
    (["--hp", 'policy_kwargs={"net_arch": [64, -1]}'], "net_arch"),
    (["--hp", "policy_kwargs=7"], "policy_kwargs"),
])
def test_bad_hyperparameter_or_size_is_one_line_naming_it(cli, args, named):
    err = cli(TRAIN + args)
    assert named in err, err
    if named.startswith("seed"):
        assert "hyperparameters" not in err, err


def _bomb(levels: int = 9) -> str:
    lines = [f"{P4}:", "  l0: &l0 [" + ", ".join(['"lol"'] * 9) + "]"]
    lines += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


HP_FILES = {
    "normalize_no.yml": (f'{P4}:\n  normalize: "no"\n', "normalize"),
    "bomb.yml": (_bomb(), "aliases"),
    "deep.yml": (f"{P4}: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested"),
    "binary.yml": (bytes(range(128, 256)) * 20, "UTF-8"),
    "huge.yml": (f"{P4}:\n" + "".join(f"  k{i}: 1\n" for i in range(300_000)), "bytes"),
    "many_keys.yml": (f"{P4}:\n" + "".join(f"  k{i}: 1\n" for i in range(30_000)), "and 29,995 more"),
    "not_a_mapping.yml": (f"{P4}: [1, 2]\n", "mapping"),
}


@pytest.mark.parametrize("name", sorted(HP_FILES))
def test_bad_hp_file_is_one_line_naming_the_file(cli, tmp_path, name):
    text, named = HP_FILES[name]
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    err = cli(TRAIN + ["--hp-file", str(path)])
    assert named in err, err
    if name != "normalize_no.yml":
        assert name in err, err


def test_a_strict_yaml_boolean_is_read(tmp_path):
    path = tmp_path / "hp.yml"
    path.write_text(f"{P4}:\n  normalize: false\n  n_steps: 32\n  batch_size: 32\n")
    setup = training.check(training.TrainConfig(P4, "ppo", 64, hyperparams_file=str(path)))
    assert setup.normalize is False


# -- model files: deeply nested data, non-finite weights -----------------------------------------------------------
def _plain_ppo(nan: bool):
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO

    env = gym.wrappers.FlattenObservation(gym.make(P4, horizon=20))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, device="cpu")
    if nan:
        with torch.no_grad():
            next(model.policy.parameters()).fill_(math.nan)
    return model


def _flat_model(tmp_path, nan: bool) -> str:
    path = str(tmp_path / ("nan.zip" if nan else "plain.zip"))
    model = _plain_ppo(nan)
    model.save(path)
    model.get_env().close()
    return path


def test_a_diverged_checkpoint_is_not_saved(tmp_path):
    from clustergym.learning.checkpoints import Checkpoints
    from clustergym.learning.hp_checks import Diverged

    saver = Checkpoints([0], str(tmp_path / "run"), False, 0.0, 64)
    with pytest.raises(Diverged, match="checkpoint at 0 steps"):
        saver.save_now(_plain_ppo(nan=True), 0)
    assert not (tmp_path / "run").exists() and not saver.saved


def test_import_model_with_deeply_nested_data_is_refused(cli, tmp_path):
    import zipfile

    plain = _flat_model(tmp_path, nan=False)
    deep = str(tmp_path / "deep.zip")
    with zipfile.ZipFile(plain) as z, zipfile.ZipFile(deep, "w") as w:
        for n in z.namelist():
            w.writestr(n, "[" * 100_000 + "]" * 100_000 if n == "data" else z.read(n))
    err = cli(["import-model", deep, "--env", P4])
    assert "deep.zip" in err and "nested" in err, err


def test_import_model_with_nan_weights_is_refused(cli, tmp_path):
    err = cli(["import-model", _flat_model(tmp_path, nan=True), "--env", P4])
    assert "nan.zip" in err and "NaN" in err, err


def _no_learning(nan: bool):
    """training._learn without SB3's learn (fast); with ``nan`` the weights become NaN, as a diverged run's."""
    import torch

    def learn(s, model, cb, out, *, progress, **_):
        if nan:
            with torch.no_grad():
                for p in model.policy.parameters():
                    p.fill_(math.nan)
        return 0.0, None
    return learn


def test_training_that_diverged_saves_nothing(cli, monkeypatch):
    monkeypatch.setattr(training, "train", _REAL_TRAIN)  # the real one, with learning stubbed
    monkeypatch.setattr(training, "_learn", _no_learning(nan=True))
    err = cli(TRAIN)
    assert "NaN" in err and "not saved" in err, err


def test_sb3_agent_with_nan_weights_is_refused(cli, tmp_path, monkeypatch):
    from stable_baselines3 import PPO

    monkeypatch.setattr(training, "_learn", _no_learning(nan=False))
    run = str(tmp_path / "good")
    _REAL_TRAIN(training.TrainConfig(P4, "ppo", 64, hyperparams={"n_steps": 32, "batch_size": 32},
                                     curve_references=False), run, progress=False)
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    model = PPO.load(os.path.join(run, "model.zip"), device="cpu")
    import torch

    with torch.no_grad():
        next(model.policy.parameters()).fill_(math.inf)
    model.save(str(bad / "model.zip"))
    err = cli(["run", P4, "--agents", f"sb3:{bad}", "--seeds", "0", "--horizon", "20", "--no-progress"],
              mark=RUN_FILES[0])
    assert "model.zip" in err and "NaN or infinite" in err, err


def test_a_tuning_trial_that_diverges_is_pruned(monkeypatch):
    optuna = pytest.importorskip("optuna")
    from clustergym.learning import tuning
    from clustergym.learning.hp_checks import Diverged

    def diverged(config, out, **kw):
        raise Diverged("the trained model was not saved: 8 of 8 weight tensors hold NaN or infinite values")

    monkeypatch.setattr(tuning, "train", diverged)
    trial = optuna.create_study().ask()
    objective = tuning._objective(tuning.TuneConfig(P4, timesteps=64), {}, {}, False)
    with pytest.raises(optuna.TrialPruned, match="NaN"):
        objective(trial)


@pytest.mark.parametrize("kw, named", [
    ({"seed": -1}, "seed=-1"), ({"eval_seed": -5}, "eval_seed=-5"), ({"param_draws": 2_000_000}, "param_draws"),
    ({"hyperparams": {"gamma": math.inf}}, "gamma"), ({"hyperparams": {"use_sde": "yes"}}, "use_sde"),
    ({"n_envs": 10**8}, "n_envs"),
])
def test_the_python_api_raises_one_clear_error(kw, named):
    config = training.TrainConfig(P4, "ppo", 64, **{"hyperparams": {"n_steps": 32, "batch_size": 32}, **kw})
    with pytest.raises(ValueError, match=named):
        training.check(config)
