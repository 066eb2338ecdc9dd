"""Agent options are typed: a bool is true/false only, ints reject floats, unknown options are errors."""

from __future__ import annotations

import pickle

import pytest

from clustergym.core.agent import _load, _load_builtins, _option_params, make
from clustergym.cli.main import main
from clustergym.core.family import _AGENTS


def _bool_options():
    _load_builtins()
    out = []
    for name, fams in sorted(_AGENTS.items()):
        for family, entry in sorted(fams.items()):
            for key, p in _option_params(_load(entry)).items():
                if isinstance(p.default, bool):
                    try:  # an inherited option the subclass fixes (opm-noest's estimate) is not an option
                        make(name, family=family, **{key: p.default})
                    except ValueError:
                        continue
                    out.append((name, family, key, p.default))
    return out


BOOLS = _bool_options()


def test_there_are_boolean_options_to_check():
    names = {(n, k) for n, _, k, _ in BOOLS}
    assert {("esdp", "only_active"), ("hauf", "skip_unfit"), ("gadget", "work_conserving")} <= names


@pytest.mark.parametrize("name,family,key,default", BOOLS)
def test_every_boolean_option_parses_false_and_true_and_rejects_the_rest(name, family, key, default):
    base = make(name, family=family)
    for text, value in [("False", False), ("false", False), ("true", True), ("TRUE", True)]:
        agent = make(f"{name}[{key}={text}]", family=family)
        assert getattr(agent, key, value) is value or getattr(agent, key) == value
        if value == default:  # the same agent as the default one
            assert pickle.dumps(vars(agent)) == pickle.dumps(vars(base))
    for text in ("maybe", "no", "off", "0", "1", "yes"):
        with pytest.raises(ValueError, match=f"{name}.*{key}"):
            make(f"{name}[{key}={text}]", family=family)


def test_esdp_only_active_false_equals_default_run_exactly():
    from clustergym.runner.evaluation import evaluate

    res = evaluate("clustergym/MultiServerChannel-v0", ["esdp", "esdp[only_active=False]", "esdp[only_active=true]"],
                   seeds=[0], horizon=60, progress=False, score=False)
    default, false, true = (r.total_reward for r in res.runs)
    assert false == default
    assert true != default


def test_bad_option_is_one_line_exit_2(tmp_path, capsys):
    rc = main(["run", "clustergym/MultiServerChannel-v0", "--agents", "esdp[only_active=maybe]", "--horizon", "5",
               "--no-progress", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "only_active" in err[0] and "esdp" in err[0]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("spec,word", [("esdp[alpha=abc]", "alpha"), ("gadget[u_b=2.5]", "u_b"),
                                       ("esdp[nope=1]", "nope"), ("gadget[rounds=true]", "rounds")])
def test_typed_options(spec, word):
    family = {"esdp": "multiserver-channel", "gadget": "ringallreduce"}[spec.split("[")[0]]
    with pytest.raises(ValueError, match=word):
        make(spec, family=family)


@pytest.mark.parametrize("spec", ["ogasched[decay=2]", "ogasched[decay=0]", "ogasched[eta0=-1]"])
def test_ogasched_step_parameters_are_range_checked(spec):
    with pytest.raises(ValueError, match="decay|eta0"):
        make(spec, family="multiserver-allocation")
