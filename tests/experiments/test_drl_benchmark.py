"""``clustergym drl``: the quick benchmark trains on the instance pool, scores
checkpoints and final models on held-out instances through the runner, writes the table, and resumes."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from clustergym.cli.main import main  # noqa: E402
from clustergym.experiments import drl, drl_plan  # noqa: E402

QUICK_LEARNERS = [lr.name for lr in drl.plan_for("p4", quick=True).learners]
MAIN = [lr.name for lr in drl_plan.PLAN["p4"].main_rows()]
ABLATIONS = [n for n in QUICK_LEARNERS if n not in MAIN]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("drl") / "bench"
    lines: list[str] = []
    summ = drl.run_benchmark(str(out), quick=True, workers=1, progress=False, log=lines.append)
    return out, summ, lines


def test_quick_benchmark_trains_evaluates_held_out_and_writes_the_table(quick_run):
    out, summ, _ = quick_run
    env = summ["envs"]["p4"]
    rows = {r["learner"]: r for r in env["rows"]}
    # the main rows of P4, then the paper policy, the best baseline and random; the ablation rows in their table
    assert [r["learner"] for r in env["rows"] if r["learned"]] == MAIN and ABLATIONS
    assert "opm" in rows and "random" in rows and sum(not r["learned"] for r in env["rows"]) == 3
    for name in MAIN:
        r = rows[name]
        assert len(r["per_seed_score"]) == 2  # --quick: 2 training seeds
        assert r["n_instances"] == 5 and r["budget"] >= 1024
        for ref in ("vs_paper", "vs_best_baseline", "vs_random"):
            c = r[ref]
            assert c["wins"] + c["losses"] + c["ties"] == 5 and c["low"] <= c["mean"] <= c["high"]
    table = (out / "table.md").read_text()
    for name in [*QUICK_LEARNERS, "opm", "random"]:
        assert f"| {name} |" in table or f"| *{name}* |" in table
    assert [r["learner"] for r in env["ablation"]] == ABLATIONS
    assert "held-out instances 0, 1, 2, 3, 4" in table and (out / "drl_p4_curves.png").stat().st_size > 0
    # the final models were scored by the runner on instances outside their training pool
    res = json.loads((out / "p4" / "eval" / "results.json").read_text())
    sb3 = [r for r in res["runs"] if r["agent"].startswith("sb3:")]
    assert len(sb3) == len(QUICK_LEARNERS) * 2 * 5
    assert {r["instance"] for r in sb3} == {0, 1, 2, 3, 4} and not any(r["trained_on"] for r in sb3)
    # the table's statistic is the runner's paired comparison of the learner's per-instance means (over its
    # training seeds and the evaluation seeds) with the reference's, recomputed here from results.json
    from clustergym.core.stats import paired_comparison

    def per_instance(agents):
        vals: dict = {}
        for r in res["runs"]:
            if r["agent"] in agents:
                vals.setdefault(r["instance"], []).append(r["total_reward"])
        return {k: sum(v) / len(v) for k, v in vals.items()}

    def cells(name):
        return {r["agent"] for r in sb3 if f"/{name}/seed" in r["agent"]}

    for name in MAIN:
        for ref, agent in (("vs_random", "random"), ("vs_paper", "opm")):
            c = paired_comparison(per_instance(cells(name)), per_instance({agent}))
            assert rows[name][ref]["mean"] == pytest.approx(c.mean) and rows[name][ref]["wins"] == c.wins
    # each main row against every non-learned agent of the held-out runs, recomputed the same way
    agents = {r["agent"] for r in res["runs"] if not r["agent"].startswith("sb3:")}
    assert {"opm", "random", rows_best(env)} <= agents
    for name in MAIN:
        vs = env["vs_every_reference"][name]["vs"]
        assert set(vs) == agents
        for agent in agents:
            c = paired_comparison(per_instance(cells(name)), per_instance({agent}))
            assert vs[agent]["mean"] == pytest.approx(c.mean) and vs[agent]["losses"] == c.losses
        assert env["vs_every_reference"][name]["above_every"] == all(v["low"] > 0 for v in vs.values())
    assert "above every non-learned agent" in table
    # an ablation row is its paired difference to its base row on the same runs
    plan = {lr.name: lr for lr in drl_plan.PLAN["p4"].learners}
    for r in env["ablation"]:
        assert r["base"] == plan[r["learner"]].base and r["ablation"] == plan[r["learner"]].ablation
        c = paired_comparison(per_instance(cells(r["learner"])), per_instance(cells(r["base"])))
        assert r["vs_base"]["mean"] == pytest.approx(c.mean) and r["vs_base"]["wins"] == c.wins
        assert r["vs_base"]["reading"] == ("higher" if c.low > 0 else "lower" if c.high < 0 else
                                           "no difference resolved")
    # the main rows again at the env's default horizon (here the quick one), beside the same references
    dh = env["default_horizon"]
    assert dh["horizon"] == drl_plan.QUICK["default_horizon"]
    dres = json.loads((out / "p4" / f"eval-h{dh['horizon']}" / "results.json").read_text())
    assert dres["horizon"] == dh["horizon"]
    assert {r["learner"] for r in dh["rows"]} == {*MAIN, "opm", rows_best(env), "random"}
    assert f"default horizon, {dh['horizon']} slots" in table
    # learning curves: a point before training and one at the end, per training seed, on validation instances
    budget = {lr.name: lr.config(True)["budget"] for lr in drl.plan_for("p4", quick=True).learners}
    for name in QUICK_LEARNERS:
        for s in (0, 1):
            curve = json.loads((out / "p4" / name / f"seed{s}" / "curve.json").read_text())
            steps = [p["steps"] for p in curve["points"]]
            assert steps == [0, budget[name]]
            assert set(curve["points"][0]["per_instance"]) == {str(k) for k in drl_plan.PLAN["p4"].curve_instances}
            assert curve["points"][1]["wall_s"] > curve["points"][0]["wall_s"]


def rows_best(env):
    best = next(r["learner"] for r in env["rows"] if not r["learned"] and r["learner"] not in ("opm", "random"))
    assert not best.startswith("sb3:")  # an ablation row's model is a learner, never "the best baseline"
    return best


def test_quick_benchmark_resumes_without_retraining(quick_run):
    out, summ, _ = quick_run
    done = out / "p4" / "ppo" / "seed0" / "done.json"
    before = done.read_text()
    lines: list[str] = []
    again = drl.run_benchmark(str(out), quick=True, workers=1, progress=False, learners=["ppo"], log=lines.append)
    assert "0 to train" in lines[0] and done.read_text() == before
    # nothing changed: every agent's evaluation runs come from the cache
    assert reuse_counts(lines, "eval") == [(n, n) for n, _ in reuse_counts(lines, "eval")] != []
    # the same models give the same evaluation (deterministic policies, same seeds)
    a = {r["learner"]: r["mean_total_reward"] for r in summ["envs"]["p4"]["rows"]}
    b = {r["learner"]: r["mean_total_reward"] for r in again["envs"]["p4"]["rows"]}
    assert b["ppo"] == a["ppo"] and b["opm"] == a["opm"]
    # a changed cell configuration is trained again; a half-trained cell left by a kill is swept
    stale = out / "p4" / "ppo" / "seed7.tmp-12345"
    stale.mkdir()
    lines.clear()
    drl.run_benchmark(str(out), quick=True, workers=1, progress=False, learners=["ppo"], seeds=[0, 2], log=lines.append)
    assert "1 to train" in lines[0] and not stale.exists() and (out / "p4" / "ppo" / "seed2" / "done.json").exists()
    # the new cell (seed 2) is evaluated; every other agent's runs are reused
    assert [(k + 1, n) for k, n in reuse_counts(lines, "eval")] == [(n, n) for _, n in reuse_counts(lines, "eval")] != []


def reuse_counts(lines, folder):
    """(reused, agents) of the benchmark's "runs reused" lines for ``<env>/<folder>``."""
    out = []
    for ln in lines:
        if "runs reused from" in ln and ln.endswith(os.path.join(folder, "runs_cache.json")):
            k, n = ln.split("drl: ")[1].split(" agents")[0].split(" of ")
            out.append((int(k), int(n)))
    return out


def test_drl_cli_bad_input_is_one_line(tmp_path, capsys):
    assert main(["drl", "--quick", "--envs", "p9", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "p9" in err[0] and "p1, p2, p3, p3s, p4" in err[0]
    assert main(["drl", "--quick", "--learners", "dqn", "--out", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dqn" in err[0]


PRETRAINED = {"clustergym/MultiServerChannel-v0": "esdp", "clustergym/MultiServerAllocation-v0": "ogasched",
              "clustergym/RingAllReduce-v0": "gadget", "clustergym/ApproxJobs-v0": "opm"}


@pytest.mark.parametrize("env_id", sorted(PRETRAINED))
def test_pretrained_model_runs_beside_the_paper_policy(env_id, tmp_path):
    """At a short horizon: ``sb3:pretrained/<env>`` is shipped for every env and runs on held-out
    instances from the installed package, through the no-pickle loader."""
    from clustergym.learning.sb3_agent import pretrained_models, resolve_model_path

    name = env_id.split("/")[1]
    assert name in pretrained_models()
    path = resolve_model_path(f"pretrained/{name}")
    meta = json.loads(open(os.path.join(os.path.dirname(path), "clustergym.json")).read())
    assert meta["pretrained"]["training_seed"] == 0 and not set(range(5)) & set(meta["instances"])
    assert os.path.getsize(path) < 3e6  # shipped small: weights and an empty optimizer state
    out = tmp_path / "cmp"
    assert main(["run", env_id, "--agents", f"sb3:pretrained/{name},{PRETRAINED[env_id]},random", "--instances",
                 "0-4", "--horizon", "20", "--out", str(out), "--no-plots", "--no-progress"]) == 0
    res = json.loads((out / "results.json").read_text())
    runs = [r for r in res["runs"] if r["agent"] == f"sb3:pretrained/{name}"]
    assert len(runs) == 5 and not any(r["trained_on"] for r in runs)


@pytest.mark.parametrize("env_id", sorted(PRETRAINED))
def test_pretrained_model_fits_100_consecutive_instances_of_the_default_generator(env_id):
    """Outside every pool (instances 2000-2099 of the env's default scenario): the runner's check before any run
    passes for all 100 (the per-entity P1 model by growing its padding), and the model runs on the largest."""
    from clustergym.core.agent import make
    from clustergym.runner.evaluation import evaluate
    from clustergym.core.family import env_family, family_spec
    from clustergym.learning.instances import instance_problems

    name = env_id.split("/")[1]
    spec = f"sb3:pretrained/{name}"
    block = list(range(2000, 2100))
    kw = make(spec).eval_env_kwargs(spec, env_id, {}, block)  # raises if one instance does not fit
    fam = family_spec(env_family(env_id))
    sizes = {k: sum(fam.instance_sizes(pb).values()) for k, pb in instance_problems(env_id, {}, block)}
    largest = max(block, key=lambda k: (sizes[k], -k))
    for n, v in kw.items():
        if n in fam.pad_kwargs:
            assert v >= max(fam.instance_sizes(pb)[n] for _, pb in instance_problems(env_id, {}, block))
    res = evaluate(env_id, [spec], [0], 5, instances=[largest], progress=False, score=False)
    assert res.runs[0].steps == 5 and np.isfinite(res.runs[0].total_reward)


# every shipped model: (its name under pretrained/, the env, the env kwargs it was trained with)
SHIPPED = [(k.split("/")[1], k, {}) for k in sorted(PRETRAINED)] + [
    ("RingAllReduce-v0-gpu-short", "clustergym/RingAllReduce-v0", {"scenario": "gpu-short"})]


@pytest.mark.parametrize("name,env_id,env_kwargs", SHIPPED, ids=[s[0] for s in SHIPPED])
def test_pretrained_model_runs_on_100_consecutive_unseen_instances(name, env_id, env_kwargs):
    """Instances 2000-2099 (no pool, validation or held-out set holds them), short runs at seed 0 through the
    runner, beside random on the same runs: every run of the model ends with a finite total, and over the 100
    instances its mean total is above random's. P4 runs 80 slots: its jobs' values come at their deadlines, so at
    30 slots most runs total 0 for every policy (a P4 run may also end earlier, when its last job has left)."""
    from clustergym.learning.sb3_agent import pretrained_models
    from clustergym.runner.evaluation import evaluate

    assert name in pretrained_models()
    horizon = 80 if env_id.endswith("ApproxJobs-v0") else 30
    spec, block = f"sb3:pretrained/{name}", list(range(2000, 2100))
    res = evaluate(env_id, [spec, "random"], [0], horizon, env_kwargs=env_kwargs, instances=block, progress=False,
                   score=False)
    by = {a: {r.instance: r for r in res.runs if r.agent == a} for a in (spec, "random")}
    assert sorted(by[spec]) == sorted(by["random"]) == block
    model = np.array([by[spec][k].total_reward for k in block])
    rand = np.array([by["random"][k].total_reward for k in block])
    assert all(0 < by[spec][k].steps <= horizon for k in block) and np.isfinite(model).all()
    assert sum(by[spec][k].steps == horizon for k in block) >= 90
    assert model.mean() > rand.mean(), (model.mean(), rand.mean())


def test_the_gpu_short_model_refuses_another_scenario(tmp_path, capsys):
    """The scenario's own model acts only on its scenario: elsewhere the run stops before it starts, with one line."""
    assert main(["run", "clustergym/RingAllReduce-v0", "--agents", "sb3:pretrained/RingAllReduce-v0-gpu-short,random",
                 "--instances", "0", "--horizon", "5", "--no-plots", "--no-progress", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trained on another scenario: scenario='gpu-short'" in err[0]
    assert not (tmp_path / "x").exists()


def test_pretrained_names_resolve_and_unknown_ones_are_one_line(tmp_path, capsys):
    from clustergym.learning.sb3_agent import resolve_model_path

    a = resolve_model_path("pretrained/ApproxJobs-v0")
    assert resolve_model_path("pretrained/p4") == a == resolve_model_path("pretrained/clustergym/ApproxJobs-v0")
    assert resolve_model_path("pretrained/ApproxJobs") == a == resolve_model_path("pretrained/ApproxJobs-v0/model.zip")
    assert main(["run", "clustergym/ApproxJobs-v0", "--agents", "sb3:pretrained/Nope-v0,random", "--out",
                 str(tmp_path / "x"), "--horizon", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pretrained/Nope-v0" in err[0] and "pretrained/ApproxJobs-v0" in err[0]


def test_p3_action_mode_is_an_action_kwarg_with_the_same_dynamics(tmp_path):
    """P3's ``action_mode`` is a ``FamilySpec.action_kwargs``: ring sizes placed by the env's greedy ring
    placement give the same runs as the placements greedy and random make themselves, and a model trained in
    ring_size mode acts in that mode beside agents that keep the placement action."""
    import clustergym

    p3 = "clustergym/RingAllReduce-v0"
    place = clustergym.evaluate(p3, ["greedy", "random"], [0, 1, 2], 40, workers=1, progress=False, score=False)
    ring = clustergym.evaluate(p3, ["greedy", "random"], [0, 1, 2], 40, env_kwargs={"action_mode": "ring_size"},
                               workers=1, progress=False, score=False)
    assert [r.total_reward for r in place.runs] == [r.total_reward for r in ring.runs]
    run = tmp_path / "rs"
    assert main(["train", p3, "--algo", "ppo", "--set", 'action_mode="ring_size"', "--instances", "10-11",
                 "--timesteps", "64", "--horizon", "16", "--n-envs", "2", "--hp", "n_steps=32", "--hp",
                 "batch_size=32", "--hp", "n_epochs=1", "--no-progress", "--out", str(run)]) == 0
    model = f"sb3:{run}/model.zip"
    mixed = clustergym.evaluate(p3, [model, "gadget"], [0, 1], 16, workers=1, progress=False, score=False)
    alone = clustergym.evaluate(p3, [model], [0, 1], 16, env_kwargs={"action_mode": "ring_size"}, workers=1,
                                progress=False, score=False)
    assert [r.total_reward for r in mixed.runs if r.agent == model] == [r.total_reward for r in alone.runs]
    # the paper policy kept its placement action (GADGET's decisions in ring_size mode are ring sizes)
    gad = clustergym.evaluate(p3, ["gadget"], [0, 1], 16, workers=1, progress=False, score=False)
    assert [r.total_reward for r in mixed.runs if r.agent == "gadget"] == [r.total_reward for r in gad.runs]



def test_evaluation_cache_fingerprint_covers_the_run_code_and_not_the_reports():
    """The non-learned agents' cached runs are keyed by the sources that can change a run: the envs, agents and
    baselines and the core; a change to the benchmark's report modules must not re-run the paper policies."""
    from clustergym.runner.runstore import fingerprint_files

    files = fingerprint_files()
    base = {os.path.basename(p) for p in files}
    assert {"evaluation.py", "scenario.py", "pipeline.py", "sb3_agent.py", "entity.py"} <= base  # runner, core, sb3 agent
    assert any(os.sep + "envs" + os.sep in p for p in files) and any(os.sep + "agents" + os.sep in p for p in files)
    import clustergym

    pkg = os.path.dirname(os.path.realpath(clustergym.__file__))
    left_out = [os.path.join(pkg, *f.split("/")) for f in ("experiments/drl.py", "experiments/drl_report.py",
                                                          "cli/main.py", "core/viewer.py", "bench/rates.py",
                                                          "learning/training.py",
                                                          "learning/pools.py")]
    assert all(os.path.exists(f) for f in left_out) and not set(left_out) & set(files)


def test_no_evaluation_run_imports_a_training_only_module():
    """The fingerprint leaves out the training-only learning modules because no run imports them: the paper
    policies, the baselines, random and trained models (the MLP and the per-entity network) run without them."""
    from clustergym.runner.runstore import TRAINING_ONLY

    code = textwrap.dedent("""
        import sys
        from clustergym.runner.evaluation import evaluate
        for env, agents in [("clustergym/ApproxJobs-v0", ["random", "opm", "fair", "sb3:pretrained/ApproxJobs-v0"]),
                            ("clustergym/MultiServerChannel-v0", ["esdp", "lcf", "sb3:pretrained/MultiServerChannel-v0"]),
                            ("clustergym/RingAllReduce-v0", ["gadget", "sb3:pretrained/RingAllReduce-v0"]),
                            ("clustergym/MultiServerAllocation-v0",
                             ["ogasched", "sb3:pretrained/MultiServerAllocation-v0"])]:
            evaluate(env, agents, [0], 3, progress=False, instances=[3])
        print(" ".join(sorted(m for m in sys.modules if m.startswith("clustergym.learning"))))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "clustergym.learning.sb3_agent" in out and "clustergym.learning.entity" in out  # the trained models ran
    training_only = {"clustergym.learning." + os.path.basename(f)[:-3] for f in TRAINING_ONLY}
    assert not training_only & set(out), training_only & set(out)


# The best non-learned policy of each env at its default horizon, by the benchmark's tables and the shipped models'
# evaluation on instances 2000-2014 (docs/drl.md, "Pretrained models"): ESDP on P1 (LCF is far below it at 2,000
# slots), DRF on P2, greedy on P3 (level with GADGET with repair; Algorithm 2 as written, the default `gadget`,
# is below both), Fair on P4.
BEST_NON_LEARNED = {"clustergym/MultiServerChannel-v0": "esdp", "clustergym/MultiServerAllocation-v0": "drf",
                    "clustergym/RingAllReduce-v0": "greedy", "clustergym/ApproxJobs-v0": "fair"}
BELOW_BEST: dict[str, str] = {}  # env id -> why its model is below (an expected failure); none is, today


@pytest.mark.parametrize("env_id", [pytest.param(e, marks=pytest.mark.xfail(strict=True, reason=BELOW_BEST[e]))
                                    if e in BELOW_BEST else e for e in sorted(BEST_NON_LEARNED)])
def test_pretrained_model_is_at_or_above_the_best_non_learned_policy_at_the_default_horizon(env_id):
    """Instances 2000-2004 (outside every pool, the validation and the held-out sets) at dynamics seed 0 and the
    env's default horizon: the shipped model is above random in total, and its paired 95% interval against the
    best non-learned policy reaches 0 or above ("at or above", as the benchmark's verdicts read it)."""
    from clustergym.runner.episode import make_env
    from clustergym.runner.evaluation import evaluate
    from clustergym.core.stats import paired_comparison

    spec = f"sb3:pretrained/{env_id.split('/')[1]}"
    best = BEST_NON_LEARNED[env_id]
    env = make_env(env_id)
    horizon = int(env.unwrapped.horizon)  # the env's default: 2,000 slots on P1, P2, P4; 200 on P3
    env.close()
    res = evaluate(env_id, [spec, best, "random"], [0], horizon, instances=list(range(2000, 2005)),
                   progress=False, score=False, workers=1)
    totals = {a: {r.instance: r.value_total for r in res.runs if r.agent == a} for a in (spec, best, "random")}
    assert not any(r.trained_on for r in res.runs if r.agent == spec)
    assert sum(totals[spec].values()) > sum(totals["random"].values()), totals
    comp = paired_comparison(totals[spec], totals[best])
    assert comp.n == 5
    assert comp.high >= 0.0, f"{spec} vs {best}: {comp.mean:+.2f}% [{comp.low:+.2f}, {comp.high:+.2f}]"


def test_the_default_horizon_table_names_the_rows_trained_on_other_episodes():
    from clustergym.experiments.drl import _trained_at

    p4 = drl_plan.PLAN["p4"]
    assert _trained_at(p4, {"ppo", "ppo-entity-1m"}, 200) == "the models trained at 200"
    text = _trained_at(p4, {"ppo", "ppo-entity-1m", "ppo-entity-1m-h2000"}, 200)
    assert text == "the models trained at 200 (ppo-entity-1m-h2000 at 2000)"
