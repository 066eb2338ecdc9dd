"""Smoke tests of the documented commands (README.md, docs/cli.md) on tiny sizes, each checking the file the command
writes, not only its exit code.

Already run end to end elsewhere, with their output files checked (not repeated here):
- ``list``: tests/cli/test_runner_cli.py::test_cli_list (it prints; no file).
- ``run``: tests/cli/test_runner_cli.py::test_cli_run_writes_outputs (results.json's env kwargs and runs);
  this file adds the agents, finite values and curves.csv.
- ``train``: tests/learning/test_drl.py::test_train_then_evaluate_as_sb3_agent (model.zip, clustergym.json,
  evaluations.npz, then the model runs as an sb3: agent).
- ``import-model``: tests/learning/test_safety_drl.py::test_a_plain_sb3_model_evaluates_through_import_model
  (clustergym.json, then the model runs as an sb3: agent with the model's own actions).
- ``reproduce --plan``: tests/runner/test_runstore.py::test_plan_lists_the_runs_and_what_the_store_holds and
  test_saved_costs_estimate_a_plan_elsewhere (the plan writes nothing; --save-costs writes the costs file).
- ``--version``: tests/learning/test_safety_drl.py.
- ``drl``: tests/experiments/test_drl_benchmark.py runs the quick benchmark through ``drl.run_benchmark``;
  this file runs the command itself on one learner and one seed.
- ``tune``: tests/cli/test_tune_cli.py runs the command with a fake objective; this file trains one real trial.
"""

import json
import math

import pytest

from clustergym.cli.main import main

P1 = "clustergym/MultiServerChannel-v0"
P4 = "clustergym/ApproxJobs-v0"

# each bench section and the row labels it must write
SECTIONS = {"esdp": ("P1 env step", "P1 native vector env", "P1 oracle", "ESDP decision", "P1 PPO training"),
            "ogasched": ("P2 env step", "P2 native vector env", "OGASched decision", "Large-scale run", "P2 PPO training"),
            "gadget": ("P3 env step", "GADGET decision", "P3 MILP oracle", "P3 PPO training"),
            "opm": ("P4 env step", "OPM decision", "P4 paper scale", "P4 PPO training"),
            "training": ("PPO training, env-steps/s", "plain SB3 PPO")}


@pytest.mark.parametrize("only", list(SECTIONS))
def test_bench_tiny_writes_every_row_of_the_section(only, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--tiny", "--only", only, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert "tiny mode" in capsys.readouterr().out
    for label in SECTIONS[only]:
        assert any(r["what"].startswith(label) for r in rows), label
    for r in rows:
        assert set(r) == {"what", "measured", "unit", "target", "ok"} and math.isfinite(r["measured"]), r


def test_bench_memory_rows_at_tiny_sizes():
    """The memory section (only in the full table, ``bench`` without --only) at the --tiny counts."""
    from clustergym.bench.rates import tiny_sizes
    from clustergym.bench.throughput import memory_envs, memory_rows

    with tiny_sizes():
        rows = memory_rows(quick=True)
    assert len(rows) == len(memory_envs()) >= 1
    assert all("memory over 2,000 steps" in r.what and math.isfinite(r.measured) for r in rows)


def test_run_results_name_the_agents_with_finite_values(tmp_path):
    out = tmp_path / "run"
    assert main(["run", P1, "--agents", "hauf,random", "--seeds", "0", "--horizon", "5", "--set", "num_servers=4",
                 "--no-score", "--no-plots", "--no-progress", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert {r["agent"] for r in res["runs"]} == {"hauf", "random"}
    assert all(r["steps"] == 5 and math.isfinite(r["total_reward"]) for r in res["runs"])
    assert not res.get("non_finite")
    header = (out / "curves.csv").read_text().splitlines()[0]
    assert "agent" in header


def test_tune_one_real_trial_writes_it_to_tuning_json(tmp_path):
    out = tmp_path / "tune"
    assert main(["tune", P4, "--algo", "ppo", "--trials", "1", "--timesteps", "64", "--train-seeds", "1",
                 "--n-envs", "1", "--horizon", "30", "--instances", "900", "--seeds", "0",
                 "--no-progress", "--out", str(out)]) == 0
    trials = json.loads((out / "tuning.json").read_text())["trials"]
    assert len(trials) == 1 and trials[0]["state"] == "COMPLETE"
    assert trials[0]["params"] and math.isfinite(trials[0]["value"])


def test_drl_command_one_learner_one_seed_writes_the_table(tmp_path):
    out = tmp_path / "drl"
    assert main(["drl", "--quick", "--envs", "p4", "--learners", "ppo", "--seeds", "0", "--workers", "1",
                 "--no-progress", "--out", str(out)]) == 0
    table = (out / "table.md").read_text()
    assert "| ppo |" in table or "| *ppo* |" in table
    res = json.loads((out / "p4" / "eval" / "results.json").read_text())
    runs = [r for r in res["runs"] if r["agent"].startswith("sb3:")]
    assert runs and all(math.isfinite(r["total_reward"]) for r in runs)
