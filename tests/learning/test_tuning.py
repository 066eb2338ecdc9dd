"""Hyperparameter tuning on validation instances (clustergym.learning.tuning, `clustergym tune`)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("optuna")
pytest.importorskip("stable_baselines3")

import optuna  # noqa: E402

from clustergym.cli.main import main  # noqa: E402
from clustergym.learning.training import TrainConfig  # noqa: E402
from clustergym.learning.tuning import (SEARCH_SPACE, TuneConfig, normalised_value, sample_params,  # noqa: E402
                                        tune)

P4 = "clustergym/ApproxJobs-v0"
TINY = dict(trials=2, timesteps=128, instances=(900, 901), horizon=12, n_envs=2, train_seeds=1)


def test_normalised_value_is_zero_at_random_one_at_the_reference_and_drops_empty_denominators():
    ref = {(900, 0): 10.0, (901, 0): 4.0, (902, 0): 3.0}
    rnd = {(900, 0): 2.0, (901, 0): 1.0, (902, 0): 3.0}  # on 902 the reference does not beat random
    got = normalised_value({(900, 0): 10.0, (901, 0): 1.0, (902, 0): 5.0}, ref, rnd)
    assert got == {(900, 0): 1.0, (901, 0): 0.0}
    assert normalised_value({(900, 0): 6.0}, ref, rnd) == {(900, 0): 0.5}
    assert normalised_value({(900, 0): 0.0}, ref, rnd)[(900, 0)] < 0  # below random is negative


def test_sampled_parameters_stay_in_the_search_space():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(20):
        hp = sample_params(study.ask(), "ppo")
        assert set(hp) == set(SEARCH_SPACE["ppo"])
        for k, spec in SEARCH_SPACE["ppo"].items():
            if spec[0] == "log":
                assert spec[1] <= hp[k] <= spec[2]
            else:
                assert hp[k] in spec[1]
    with pytest.raises(ValueError, match="cannot be tuned"):
        sample_params(study.ask(), "sac")


def test_validation_instances_must_not_touch_the_training_pool_or_the_evaluation_instances(tmp_path):
    for bad in ((1000, 900), (3, 900)):
        with pytest.raises(ValueError, match="training pool or the evaluation"):
            tune(TuneConfig(P4, **{**TINY, "instances": bad}), str(tmp_path / "o"), progress=False)


def test_a_tiny_study_records_every_trial_continues_and_replays_with_the_same_seed(tmp_path):
    rec = tune(TuneConfig(P4, **TINY), str(tmp_path / "a"), progress=False)
    assert [t["state"] for t in rec["trials"]] == ["COMPLETE", "COMPLETE"]
    assert rec["reference"] == "fair" and rec["validation_instances"] == [900, 901]
    values = [t["value"] for t in rec["trials"]]
    assert rec["best"]["value"] == max(values)
    for t in rec["trials"]:  # the objective is the mean of the per-run values
        per = list(t["per_run"].values())
        assert 1 <= len(per) <= 2 and abs(sum(per) / len(per) - t["value"]) < 1e-12
        assert t["params"]["batch_size"] <= t["params"]["n_steps"] * 2  # capped at one rollout
    on_disk = json.load(open(tmp_path / "a" / "tuning.json"))
    assert on_disk["trials"] == rec["trials"]
    # the same seed: the same trials, the same values
    again = tune(TuneConfig(P4, **TINY), str(tmp_path / "b"), progress=False)
    assert [(t["params"], t["value"]) for t in again["trials"]] == [(t["params"], t["value"]) for t in rec["trials"]]
    # the same folder continues the study from its storage
    more = tune(TuneConfig(P4, **{**TINY, "trials": 1}), str(tmp_path / "a"), progress=False)
    assert len(more["trials"]) == 3 and more["trials"][:2] == rec["trials"]


def test_cli_tune_writes_the_record_and_names_the_best_trial(tmp_path, capsys):
    out = tmp_path / "t"
    rc = main(["tune", P4, "--algo", "ppo", "--trials", "1", "--timesteps", "128", "--horizon", "12",
               "--instances", "900-901", "--n-envs", "2", "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "1 trials of study ApproxJobs-v0-ppo" in text and "best: trial 0" in text
    rec = json.load(open(out / "tuning.json"))
    assert rec["trials"][0]["state"] == "COMPLETE"
    assert rec["train_seeds"] == 2  # the default: each trial scored on two training seeds
    assert main(["tune", P4, "--instances", "1000-1001", "--out", str(tmp_path / "u")]) == 2


def test_every_tuned_entry_holds_its_shipped_records_best_trial():
    """An entry with a ``tuned`` key trains with exactly the best trial's values of its study's record
    (``hyperparams/tuning/<EnvName>-<algo>.json`` of the family's folder), and the record was scored on validation
    instances only."""
    import os

    from clustergym.core.family import env_ids
    from clustergym.learning.hyperparams import load_hyperparams, tuning_dir
    from clustergym.learning.instances import DEFAULT_EVAL_INSTANCES, DEFAULT_TRAIN_INSTANCES

    checked = 0
    for algo in ("ppo", "a2c", "maskable_ppo"):
        for env_id in env_ids():
            entry = load_hyperparams(algo, env_id)
            if "tuned" not in entry:
                continue
            with open(os.path.join(tuning_dir(env_id), f"{env_id.split('/')[-1]}-{algo}.json")) as f:
                rec = json.load(f)
            assert rec["env_id"] == env_id and rec["algo"] == algo
            assert not set(rec["validation_instances"]) & (set(DEFAULT_TRAIN_INSTANCES) | set(DEFAULT_EVAL_INSTANCES))
            best = max((t for t in rec["trials"] if t["value"] is not None), key=lambda t: t["value"])
            assert best["number"] == rec["best"]["number"]
            assert sorted(entry["tuned"]) == sorted(best["params"])
            assert {k: entry[k] for k in entry["tuned"]} == best["params"], env_id
            checked += 1
    assert checked >= 2  # P2 and P4 ship tuned PPO entries


def test_ring_allreduce_validation_runs_pair_instance_and_seed_so_each_run_has_its_own_job_list(tmp_path, capsys):
    """P3's job list comes from the dynamics seed: at one seed, ten instances would be one run ten times.
    Its default validation runs are instance = seed 900-909 (distinct reference totals), recorded as such."""
    from clustergym.learning.tuning import default_runs

    assert default_runs("clustergym/RingAllReduce-v0") == (None, tuple(range(900, 910)))
    assert default_runs(P4) == (tuple(range(900, 910)), (0,))
    out = tmp_path / "p3"
    rc = main(["tune", "clustergym/RingAllReduce-v0", "--trials", "1", "--timesteps", "64", "--horizon", "8",
               "--seeds", "900-902", "--n-envs", "1", "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    rec = json.load(open(out / "tuning.json"))
    assert rec["validation_instances"] == "instance = seed" and rec["seeds"] == [900, 901, 902]
    assert sorted(rec["trials"][0]["per_run"]) == ["[900, 900]", "[901, 901]", "[902, 902]"]
    study = optuna.load_study(study_name=rec["study"], storage=f"sqlite:///{out / 'study.db'}")
    assert len(set(study.user_attrs["reference_values"].values())) == 3  # three job lists, not one
    # instance = seed never reaches the training pool or the evaluation instances either
    assert main(["tune", "clustergym/RingAllReduce-v0", "--seeds", "5-6", "--out", str(tmp_path / "u")]) == 2


def test_a_study_of_the_per_entity_network_trains_it_and_says_so(tmp_path):
    from clustergym.learning.tuning import study_name_of

    cfg = TuneConfig(P4, **{**TINY, "trials": 1, "net": "entity"})
    assert study_name_of(cfg) == "ApproxJobs-v0-ppo-entity"
    rec = tune(cfg, str(tmp_path / "e"), progress=False)
    assert rec["net"] == "entity" and rec["study"] == "ApproxJobs-v0-ppo-entity"
    assert rec["trials"][0]["state"] == "COMPLETE"
    with pytest.raises(ValueError, match="net='entity' supports"):  # P3 has no per-entity network
        tune(TuneConfig("clustergym/RingAllReduce-v0", **{**TINY, "trials": 1, "net": "entity"}),
             str(tmp_path / "x"), progress=False)


def test_a_study_of_p3s_decoder_trains_the_decoder_through_the_cli(tmp_path, capsys):
    out = tmp_path / "ar"
    rc = main(["tune", "clustergym/RingAllReduce-v0", "--net", "autoregressive", "--set", 'scenario="gpu-short"',
               "--trials", "1", "--timesteps", "64", "--horizon", "8", "--seeds", "900", "--train-seeds", "1",
               "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    rec = json.load(open(out / "tuning.json"))
    assert rec["net"] == "autoregressive" and rec["study"] == "RingAllReduce-v0-ppo-autoregressive"
    assert rec["trials"][0]["state"] == "COMPLETE" and rec["env_kwargs"] == {"scenario": "gpu-short"}


def test_every_shipped_record_is_used_with_its_best_values_and_was_scored_on_validation_runs_only():
    """Each record in a family's ``hyperparams/tuning/`` is either adopted by its yml entry (the ``tuned`` key) or
    carried by a ``clustergym drl`` tuning row that trains the record's network with exactly the best trial's
    values; it is a record of one of the family's env ids."""
    import glob
    import os

    from clustergym.core.family import family_specs
    from clustergym.experiments.drl_plan import PLAN
    from clustergym.learning.hyperparams import load_hyperparams, tuning_dir
    from clustergym.learning.instances import DEFAULT_EVAL_INSTANCES, DEFAULT_TRAIN_INSTANCES

    folders = {tuning_dir(spec.env_ids[0]): spec for spec in family_specs()}
    paths = sorted((p, spec) for d, spec in folders.items() if d for p in glob.glob(os.path.join(d, "*.json")))
    assert len(paths) >= 5
    for path, spec in paths:
        with open(path) as f:
            rec = json.load(f)
        assert rec["env_id"] in spec.env_ids, path
        runs = rec["seeds"] if rec["validation_instances"] == "instance = seed" else rec["validation_instances"]
        assert not set(runs) & (set(DEFAULT_TRAIN_INSTANCES) | set(DEFAULT_EVAL_INSTANCES)), path
        best = max((t for t in rec["trials"] if t["value"] is not None), key=lambda t: t["value"])
        assert best["number"] == rec["best"]["number"] and best["params"] == rec["best"]["params"]
        entry = load_hyperparams(rec["algo"], rec["env_id"])
        adopted = rec.get("net", "mlp") == "mlp" and {k: entry.get(k) for k in entry.get("tuned", ())} == best["params"]
        rows = [lr for p in PLAN.values() if p.env_id == rec["env_id"] for lr in p.learners
                if lr.ablation == "tuning" and lr.options.get("hyperparams") == best["params"]
                and lr.options.get("net", "mlp") == rec.get("net", "mlp")]
        assert adopted or rows, f"{os.path.basename(path)}: neither adopted nor carried by a tuning row"


def test_a_trial_over_several_training_seeds_scores_their_mean_per_run(tmp_path, monkeypatch):
    """With train_seeds=2, trial n trains seeds seed + n and seed + n + 1000, and each validation run's value is
    the mean over the two models (seed k = 0 is the one-seed study's)."""
    from clustergym.runner.evaluation import evaluate
    from clustergym.learning import tuning

    seeds_seen, real_train = [], tuning.train

    def spy(config, out, **kw):
        seeds_seen.append(config.seed)
        return real_train(config, out, **kw)

    monkeypatch.setattr(tuning, "train", spy)
    one = tune(TuneConfig(P4, **{**TINY, "trials": 1}), str(tmp_path / "one"), progress=False)
    two = tune(TuneConfig(P4, **{**TINY, "trials": 1, "train_seeds": 2}), str(tmp_path / "two"), progress=False)
    assert seeds_seen == [0, 0, 1000] and two["train_seeds"] == 2
    params = two["trials"][0]["params"]
    assert params == one["trials"][0]["params"]
    # the second model by hand: the same values at seed 1000, scored on the study's runs
    real_train(TrainConfig(P4, "ppo", TINY["timesteps"], env_kwargs={"horizon": TINY["horizon"]}, seed=1000,
                           n_envs=TINY["n_envs"], hyperparams=params), str(tmp_path / "m"), progress=False)
    res = evaluate(P4, [f"sb3:{tmp_path / 'm'}"], seeds=[0], horizon=TINY["horizon"], instances=list(TINY["instances"]),
                   progress=False, score=False)
    study = optuna.load_study(study_name=two["study"], storage=f"sqlite:///{tmp_path / 'two' / 'study.db'}")
    second = normalised_value({(r.instance, r.seed): float(r.value_total) for r in res.runs},
                              *tuning.stored_values(study))
    for key, v in two["trials"][0]["per_run"].items():  # the objective is linear in the value: mean of the two
        assert abs(v - (one["trials"][0]["per_run"][key] + second[tuple(json.loads(key))]) / 2) < 1e-9
    assert two["trials"][0]["timesteps_trained"] == 2 * one["trials"][0]["timesteps_trained"]
    with pytest.raises(ValueError, match="train_seeds"):
        tune(TuneConfig(P4, **{**TINY, "train_seeds": 0}), str(tmp_path / "bad"), progress=False)
