"""P4 on the paper's machines and the bound a score needs."""

import numpy as np
import pytest

from clustergym.envs.approxjobs.scenario import make_approx_scenario

ENV = "clustergym/ApproxJobs-v0"
SMALL = dict(num_machines=16, max_jobs=5, arrival_rate=0.05, life_min=10, life_max=60)


def test_paper_scale_uses_identical_machines():
    sc = make_approx_scenario("paper", seed=0, scale="paper", horizon=50)
    tr, pb = sc.truth, sc.problem
    assert sc.params["speed_low"] == 1.0 and pb.num_machines == 1000
    assert np.all(tr.speed == 1.0)  # one rate law for every machine (§VI)
    assert np.allclose(tr.mean_rate, tr.mean_rate[0]) and np.allclose(pb.price, pb.price[0])
    assert pb.price[0] == pytest.approx(2 * tr.mean_rate[0])  # p = 2θ (§VI)


def test_speed_factors_are_a_named_option():
    sc = make_approx_scenario("paper", seed=0, scale="paper", horizon=50, speed_low=0.3)
    s = sc.truth.speed
    assert s.min() >= 0.3 and s.max() <= 1.0 and s.std() > 0.1  # machines differ
    assert make_approx_scenario("paper", seed=0).params["speed_low"] == 0.3  # the small default scale keeps them


def test_evaluate_scores_p4_without_oracle_kwarg():
    """A score is asked for: the runner turns the env's bound on (score_env_kwargs); no oracle=true needed."""
    from clustergym.runner.evaluation import evaluate

    res = evaluate(ENV, ["fair", "random"], seeds=[0, 1], horizon=200, env_kwargs=SMALL, progress=False)
    for r in res.runs:
        assert r.bound_total is not None and r.score is not None
    assert all(r.score == 0.0 for r in res.runs if r.agent == "random")
    # the user's own choice wins: oracle=False gives no bound and so no score
    res = evaluate(ENV, ["fair", "random"], seeds=[0], horizon=200, env_kwargs=dict(SMALL, oracle=False), progress=False)
    assert all(r.score is None for r in res.runs)
    # no score asked for: no bound computed
    res = evaluate(ENV, ["fair"], seeds=[0], horizon=200, env_kwargs=SMALL, progress=False, score=False)
    assert all(r.bound_total is None for r in res.runs)


def test_cli_run_reports_a_p4_score(tmp_path, capsys):
    from clustergym.cli.main import main

    assert main(["run", ENV, "--agents", "fair,random", "--seeds", "0-1", "--horizon", "200", "--no-progress",
                 "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("fair "))
    score = row.split()[-3]  # ... score regret decision-ms
    assert score != "-" and 0.0 < float(score) <= 1.5


def test_demand_counts_the_machines_the_active_jobs_budgets_pay_for():
    from clustergym.envs.approxjobs.scenario import demand

    sc = make_approx_scenario("paper", seed=3, horizon=120, **SMALL)
    jobs, pb = sc.truth.jobs, sc.problem
    q = jobs.budget / (jobs.deadline - jobs.arrival)
    brute = [sum(q[j] for j in range(len(jobs)) if jobs.arrival[j] < t <= jobs.deadline[j]) for t in range(1, 121)]
    assert len(jobs) > 3
    assert demand(sc) == pytest.approx(np.mean(brute) / pb.price.mean())
    assert demand(sc, skip=60) == pytest.approx(np.mean(brute[60:]) / pb.price.mean())
    with pytest.raises(ValueError, match="skip"):
        demand(sc, skip=120)


def test_paper_scale_load_is_calibrated_to_heavy_load_with_machines_scarce():
    """§VI: heavy load = the trace, light = half of its jobs, "better matchings when the cluster resource is
    enough" at light load: the calibrated paper scale asks for more than M machines with all jobs and at most M
    with half (HEAVY_DEMAND_BAND), on every job list; 0.15 stays as scale="paper-0.15", below M."""
    from clustergym.envs.approxjobs.scenario import HEAVY_DEMAND_BAND, PAPER_SCALE, SCALES, demand

    assert PAPER_SCALE["arrival_rate"] == 0.25 and HEAVY_DEMAND_BAND == (1.0, 2.0)
    assert SCALES["paper-0.15"] == {**PAPER_SCALE, "arrival_rate": 0.15}
    lo, hi = HEAVY_DEMAND_BAND
    heavy, light, earlier = ([demand(make_approx_scenario("paper", seed=i, scale=s, horizon=900, load=ld), skip=300)
                              / 1000 for i in range(4)] for s, ld in (("paper", 1.0), ("paper", 0.5), ("paper-0.15", 1.0)))
    assert all(lo < d <= hi for d in heavy) and all(d <= lo for d in light)
    assert 1.3 <= np.mean(heavy) <= 1.7  # the documented ≈ 1.46 M, near the band's middle
    assert np.mean(earlier) < lo  # the earlier rate: machines not scarce (≈ 0.88 M)


def test_named_scales_set_the_horizon_and_refuse_unknown_names():
    import gymnasium as gym

    assert gym.make(ENV, scale="paper-0.15").unwrapped.horizon == 50_000
    sc = make_approx_scenario("paper", seed=0, scale="paper-0.15", horizon=50)
    assert sc.params["arrival_rate"] == 0.15 and sc.problem.num_machines == 1000
    with pytest.raises(ValueError, match="scale"):
        make_approx_scenario("paper", seed=0, scale="heavy", horizon=50)
