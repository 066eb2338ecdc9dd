"""Training on a pool of instances and evaluating on others, and the
hyperparameter files ``clustergym train`` reads."""

import json

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from clustergym.cli.main import main  # noqa: E402
from clustergym.core.family import family_spec  # noqa: E402
from clustergym.learning.instances import instance_problems  # noqa: E402

P1 = "clustergym/MultiServerChannel-v0"
SMALL = ["--set", "num_servers=12"]
TINY = ["--timesteps", "64", "--horizon", "16", "--n-envs", "2", "--hp", "n_steps=32", "--hp", "batch_size=32",
        "--hp", "n_epochs=1", "--no-progress"]


def _sizes(instances):
    spec = family_spec("multiserver-channel")
    return {k: spec.instance_sizes(pb)["max_edges"] for k, pb in instance_problems(P1, {"num_servers": 12}, instances)}


@pytest.fixture(scope="module")
def pool_model(tmp_path_factory):
    run = tmp_path_factory.mktemp("pool") / "run"
    assert main(["train", P1, "--algo", "ppo", "--instances", "10-13", "--out", str(run), *SMALL, *TINY]) == 0
    return run


def test_pool_training_records_pool_and_padding(pool_model):
    meta = json.loads((pool_model / "clustergym.json").read_text())
    assert meta["instances"] == [10, 11, 12, 13]
    # the pool, the default evaluation set and the validation instances
    need = max(_sizes(list(range(0, 100)) + [10, 11, 12, 13] + list(range(900, 1000))).values())
    assert meta["env_kwargs"]["max_edges"] == need
    assert meta["head"] == "fast" and meta["hyperparams"]["n_steps"] == 32  # --hp over the file's 512
    assert meta["hyperparams"]["n_epochs"] == 1 and meta["hyperparams"]["gae_lambda"] == 0.95  # the rest: ppo.yml


def test_sb3_model_runs_on_other_instances_and_marks_trained_ones(pool_model, tmp_path, capsys):
    out = tmp_path / "eval"
    rc = main(["run", P1, "--agents", f"sb3:{pool_model}/model.zip,hauf,random", "--instances", "2,3,11",
               "--seeds", "0", "--horizon", "12", "--out", str(out), "--no-progress", "--no-plots", *SMALL])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "over 3 instance(s)" in printed and "95% t over instances" in printed
    res = json.loads((out / "results.json").read_text())
    sb3 = {r["instance"]: r for r in res["runs"] if r["agent"].startswith("sb3:")}
    assert set(sb3) == {2, 3, 11} and all(r["steps"] == 12 and np.isfinite(r["total_reward"]) for r in sb3.values())
    assert {k: r["trained_on"] for k, r in sb3.items()} == {2: False, 3: False, 11: True}
    assert all(r["trained_on"] is None for r in res["runs"] if not r["agent"].startswith("sb3:"))
    assert sorted({r["instance"] for r in res["runs"]}) == [2, 3, 11]  # same instances for every agent


def test_sb3_model_refused_where_it_does_not_fit(pool_model, tmp_path, capsys):
    meta = json.loads((pool_model / "clustergym.json").read_text())
    sizes = _sizes(list(range(100, 1500)))
    too_big = [k for k, v in sizes.items() if v > meta["env_kwargs"]["max_edges"]]
    assert too_big, "no instance larger than the padding in 100-1499: widen the scan"
    agents = f"sb3:{pool_model}/model.zip,random"
    rc = main(["run", P1, "--agents", agents, "--instances", f"2,{too_big[0]}", "--seeds", "0", "--horizon", "5",
               "--out", str(tmp_path / "a"), "--no-progress", *SMALL])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and f"instance {too_big[0]}" in err and "max_edges" in err
    rc = main(["run", P1, "--agents", agents, "--instances", "2", "--seeds", "0", "--horizon", "5",
               "--out", str(tmp_path / "b"), "--no-progress", "--set", "num_servers=14"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "num_servers" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists(), "refused before any work"


def test_single_instance_model_stays_pinned_and_bad_train_input(tmp_path, capsys):
    run = tmp_path / "one"
    assert main(["train", P1, "--algo", "ppo", "--set", "scenario_seed=3", "--out", str(run), *SMALL, *TINY]) == 0
    meta = json.loads((run / "clustergym.json").read_text())
    assert meta["instances"] is None and "max_edges" not in meta["env_kwargs"]
    out = tmp_path / "eval"
    assert main(["run", P1, "--agents", f"sb3:{run}/model.zip,random", "--seeds", "0", "--horizon", "8",
                 "--out", str(out), "--no-progress", "--no-plots", *SMALL]) == 0
    res = json.loads((out / "results.json").read_text())
    assert {r["instance"] for r in res["runs"]} == {3}
    assert all(r["trained_on"] is True for r in res["runs"] if r["agent"].startswith("sb3:"))
    capsys.readouterr()
    rc = main(["train", P1, "--algo", "ppo", "--set", "scenario_seed=3", "--instances", "5-6",
               "--out", str(tmp_path / "x"), *SMALL, *TINY])
    assert rc == 2 and "scenario_seed" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_hyperparameter_file_is_read_and_bad_files_are_one_line(tmp_path, capsys):
    from clustergym.learning.hyperparams import hyperparams_path, load_hyperparams

    entry = load_hyperparams("ppo", P1)
    assert entry["n_steps"] == 512 and entry["n_envs"] == 4
    for algo in ("ppo", "a2c", "maskable_ppo", "sac"):
        assert load_hyperparams(algo, "clustergym/MultiServerAllocation-v0" if algo == "sac" else P1), algo
        assert hyperparams_path(algo).endswith(f"hyperparams/{algo}.yml")
    own = tmp_path / "hp.yml"
    own.write_text(f"{P1}:\n  n_steps: 16\n  batch_size: 16\n  n_epochs: 1\n  learning_rate: 0.001\n")
    run = tmp_path / "r"
    assert main(["train", P1, "--algo", "ppo", "--hp-file", str(own), "--timesteps", "32", "--horizon", "8",
                 "--n-envs", "2", "--set", "scenario_seed=0", "--out", str(run), "--no-progress", *SMALL]) == 0
    meta = json.loads((run / "clustergym.json").read_text())
    assert meta["hyperparams"] == {"n_steps": 16, "batch_size": 16, "n_epochs": 1, "learning_rate": 0.001}
    bad = tmp_path / "bad.yml"
    bad.write_text("a: [1,\n")
    rc = main(["train", P1, "--algo", "ppo", "--hp-file", str(bad), "--timesteps", "32", "--out", str(tmp_path / "y")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "not valid YAML" in err


def test_loader_supplies_the_policy_class_the_side_car_names(pool_model, tmp_path):
    """The zip's pickled policy_class is never read: the side-car's head picks our class (fast) or SB3's."""
    import shutil

    from stable_baselines3.common.policies import ActorCriticPolicy

    from clustergym.core.agent import make
    from clustergym.learning.heads import FastActorCriticPolicy

    assert type(make(f"sb3:{pool_model}/model.zip").model.policy) is FastActorCriticPolicy
    run = tmp_path / "copy"
    shutil.copytree(pool_model, run)
    meta = json.loads((run / "clustergym.json").read_text())
    (run / "clustergym.json").write_text(json.dumps({**meta, "head": "sb3"}))
    assert type(make(f"sb3:{run}/model.zip").model.policy) is ActorCriticPolicy  # same weights, SB3's class
    (run / "clustergym.json").write_text(json.dumps({**meta, "head": "os.system"}))
    with pytest.raises(ValueError, match="head"):
        make(f"sb3:{run}/model.zip")
