"""A family's data lives in its ``drl_hooks`` module: the parameter pools, ``clustergym tune``, the hyperparameter
files, ``clustergym bench``'s training rows, the docs gallery and the pretrained short names read the family spec,
so replacing one family's hooks (a monkeypatched spec naming another hooks module) changes what they do, and
nothing else holds a table per family."""

from __future__ import annotations

import dataclasses
import os
import sys
import textwrap
import types

import pytest
import yaml

import clustergym  # noqa: F401  (registers the envs)
import clustergym.core.family as family_mod
from clustergym.core.family import env_entry, env_hook, family_specs

P1, P2, P3, P4 = ("clustergym/MultiServerChannel-v0", "clustergym/MultiServerAllocation-v0",
                  "clustergym/RingAllReduce-v0", "clustergym/ApproxJobs-v0")
DROP = object()  # a hook the replaced module does not define


def replace_hooks(monkeypatch, env_id: str, **hooks):
    """Register, for this test, the family of ``env_id`` with a hooks module of its own: the shipped module's
    names, with ``hooks`` set (``DROP``: left out). Returns the new module."""
    spec = env_entry(env_id)[0]
    shipped = spec.hooks()
    name = f"clustergym_test_hooks_{spec.name.replace('-', '_')}"
    mod = types.ModuleType(name)
    mod.__dict__.update({k: v for k, v in vars(shipped).items() if not k.startswith("__")})
    for k, v in hooks.items():
        if v is DROP:
            mod.__dict__.pop(k, None)
        else:
            setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setitem(family_mod._FAMILIES, spec.name, dataclasses.replace(spec, drl_hooks=name))
    return mod


def test_param_settings_draw_the_familys_ranges(monkeypatch):
    from clustergym.learning.pools import param_ranges, param_settings

    shipped = param_settings(P4, 3)
    assert set(shipped[0]) == {"arrival_rate", "beta", "speed_low"}
    replace_hooks(monkeypatch, P4, PARAM_RANGES={"beta": (0.6, 0.6)})
    assert param_ranges(P4) == {"beta": (0.6, 0.6)}
    assert param_settings(P4, 3) == [{"beta": 0.6}] * 3
    replace_hooks(monkeypatch, P4, PARAM_RANGES=DROP)
    with pytest.raises(ValueError, match="no parameter ranges for clustergym/ApproxJobs-v0") as err:
        param_settings(P4, 3)
    assert "families with ranges: multiserver-allocation, multiserver-channel, ringallreduce" in str(err.value)


@pytest.mark.parametrize("env_id, first", [
    (P1, {"rho": 0.810716, "cost_mean": 0.700999, "cost_std": 0.053549, "capacity_ratio": 0.268642}),
    (P2, {"rho": 0.716074, "contention": 14.019985, "density": 2.023661}),
    (P3, {"arrival_rate": 2.053579, "bw_scale": 1.852998}),
    (P4, {"arrival_rate": 0.019353, "beta": 0.6804, "speed_low": 0.207098})])
def test_the_shipped_ranges_draw_the_settings_they_always_drew(env_id, first):
    """The first setting of every family's parameter pool, as drawn since the pools exist: the ranges and their
    order are the family's (a trained model's side-car records its settings)."""
    from clustergym.learning.pools import param_settings

    got = param_settings(env_id, 2)[0]
    assert got == first and list(got) == list(first)


def test_tune_reference_and_validation_runs_follow_the_familys_hooks(monkeypatch):
    from clustergym.learning.tuning import VALIDATION, TuneConfig, default_runs, instance_is_seed, reference_agent

    assert [reference_agent(e) for e in (P1, P2, P3, P4)] == ["lcf", "drf", "greedy", "fair"]
    assert [instance_is_seed(e) for e in (P1, P2, P3, P4)] == [False, False, True, False]
    replace_hooks(monkeypatch, P4, TUNING_REFERENCE="edf", INSTANCE_IS_SEED=True)
    assert TuneConfig(P4).reference_agent() == "edf" and TuneConfig(P4, reference="ops").reference_agent() == "ops"
    assert default_runs(P4) == (None, VALIDATION)
    replace_hooks(monkeypatch, P4, TUNING_REFERENCE=DROP, INSTANCE_IS_SEED=DROP)
    assert reference_agent(P4) is None and default_runs(P4) == (VALIDATION, (0,))
    with pytest.raises(ValueError, match="no default reference baseline"):
        TuneConfig(P4).reference_agent()
    assert reference_agent("CartPole-v1") is None and env_hook("CartPole-v1", "TUNING_REFERENCE") is None


def test_hyperparameters_come_from_the_folder_the_family_names(monkeypatch, tmp_path):
    from clustergym.learning.hyperparams import default_algo, hyperparams_path, load_hyperparams, tuning_dir

    with open(hyperparams_path("ppo")) as f:
        default = yaml.safe_load(f)["default"]
    (tmp_path / "ppo.yml").write_text(f"{P4}:\n  n_steps: 64\n  target_kl: 0.02\n")
    (tmp_path / "defaults.yml").write_text(f"{P4}: a2c\n")
    replace_hooks(monkeypatch, P4, HYPERPARAMS_DIR=str(tmp_path))
    got = load_hyperparams("ppo", P4)
    assert got == {**default, "n_steps": 64, "target_kl": 0.02}
    assert list(got) == [*default, "target_kl"]  # the default's order, the entry's new keys after it
    assert load_hyperparams("a2c", P4) == {}  # the folder has no a2c.yml
    assert default_algo(P4) == "a2c" and tuning_dir(P4) == os.path.join(str(tmp_path), "tuning")
    replace_hooks(monkeypatch, P4, HYPERPARAMS_DIR=DROP)
    assert load_hyperparams("ppo", P4) == {} and default_algo(P4) == "ppo" and tuning_dir(P4) is None


def test_a_family_entry_reads_as_the_yaml_merge_it_replaces(tmp_path):
    """``<<: *default`` in one file and the entry in the family's file over the algorithm's ``default`` give the
    same dict, keys in the same order (the side-car records them in that order)."""
    from clustergym.learning.hyperparams import hyperparams_path, load_hyperparams

    checked = 0
    for algo in ("ppo", "a2c", "maskable_ppo", "recurrent_ppo"):
        for spec in family_specs():
            folder = spec.hook("HYPERPARAMS_DIR")
            path = os.path.join(folder, f"{algo}.yml") if folder else ""
            if not os.path.exists(path):
                continue
            with open(path) as f:
                own = yaml.safe_load(f)
            with open(hyperparams_path(algo)) as f:
                text = f.read()
            merged = text + "".join(f"\n{e}:\n  <<: *default\n"
                                    + (textwrap.indent(yaml.safe_dump(entry, sort_keys=False), "  ") if entry else "")
                                    for e, entry in own.items())
            one = tmp_path / f"{spec.name}-{algo}.yml"
            one.write_text(merged)
            for env_id in own:
                want = load_hyperparams(algo, env_id, str(one))
                got = load_hyperparams(algo, env_id)
                assert got == want and list(got) == list(want), (algo, env_id)
                checked += 1
    assert checked >= 14  # every shipped family entry of these algorithms (sac.yml has no default: P2's as is)
    with open(os.path.join(env_hook(P2, "HYPERPARAMS_DIR"), "sac.yml")) as f:
        assert load_hyperparams("sac", P2) == yaml.safe_load(f)[P2]


def test_bench_rows_come_from_the_families_in_registry_order(monkeypatch):
    from clustergym.bench.throughput import memory_envs, plain_envs, throughput_envs

    assert throughput_envs() == (("P1", P1, {}, "auto"), ("P1", P1, {}, "dummy"), ("P2", P2, {}, "auto"),
                                 ("P3", P3, {}, "auto"), ("P4", P4, {}, "auto"))
    assert plain_envs() == (("P3", P3), ("P4", P4)) and memory_envs() == (("P1", P1), ("P2", P2))
    replace_hooks(monkeypatch, P2, BENCH_THROUGHPUT=(({"action_mode": "channel"}, "dummy"),), BENCH_PLAIN=True,
                  BENCH_MEMORY=DROP)
    assert throughput_envs()[2] == ("P2", P2, {"action_mode": "channel"}, "dummy")
    assert plain_envs() == (("P2", P2), ("P3", P3), ("P4", P4)) and memory_envs() == (("P1", P1),)


def test_gallery_and_pretrained_names_read_the_spec(monkeypatch):
    from clustergym.experiments.gallery import papers
    from clustergym.learning.sb3_agent import resolve_model_path

    assert papers()[P4] == ("OPM (P4)", "opm", ["fair", "edf", "ops", "random"], 600, 200)
    replace_hooks(monkeypatch, P4, GALLERY=(("edf",), 50, 10))
    assert papers()[P4] == ("OPM (P4)", "opm", ["edf"], 50, 10)
    replace_hooks(monkeypatch, P4, GALLERY=DROP)
    assert P4 not in papers() and list(papers()) == [P1, P2, P3]
    shipped = resolve_model_path("pretrained/ApproxJobs-v0")
    assert resolve_model_path("pretrained/p4") == shipped
    spec = env_entry(P4)[0]
    monkeypatch.setitem(family_mod._FAMILIES, spec.name, dataclasses.replace(spec, number="P9"))
    assert resolve_model_path("pretrained/p9") == shipped


def test_the_shipped_data_hooks_have_their_documented_types():
    for spec in family_specs():
        hooks = spec.hooks()
        if hooks is None:
            continue
        ranges = getattr(hooks, "PARAM_RANGES", {})
        assert all(isinstance(n, str) and len(r) == 2 and r[0] <= r[1] for n, r in ranges.items()), spec.name
        assert isinstance(getattr(hooks, "TUNING_REFERENCE", ""), str)
        for flag in ("INSTANCE_IS_SEED", "BENCH_PLAIN", "BENCH_MEMORY"):
            assert isinstance(getattr(hooks, flag, False), bool), (spec.name, flag)
        assert all(isinstance(kw, dict) and isinstance(vec, str) for kw, vec in getattr(hooks, "BENCH_THROUGHPUT", ()))
        folder = getattr(hooks, "HYPERPARAMS_DIR", None)
        assert folder is None or os.path.isdir(folder), spec.name
        gallery = getattr(hooks, "GALLERY", None)
        assert gallery is None or (spec.paper_agent and len(gallery) == 3), spec.name
