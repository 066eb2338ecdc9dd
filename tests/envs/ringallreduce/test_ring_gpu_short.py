"""P3's ``"gpu-short"`` scenario: the paper's on 10 servers. Its instance is the paper scenario's with
``num_servers=10``; on it the GPUs bind, so GADGET falls below the window bound where on the paper's cluster it
reaches it."""

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401  (registers the envs)
from clustergym.envs.ringallreduce.oracle import run_upper_bound
from clustergym.envs.ringallreduce.scenario import GPU_SHORT_SERVERS, RING_SCENARIOS, make_ring_scenario
from clustergym.runner.evaluation import evaluate

ENV = "clustergym/RingAllReduce-v0"


@pytest.mark.parametrize("seed", [0, 1, 7, 900])
def test_the_preset_is_the_paper_scenario_on_ten_servers(seed):
    a = make_ring_scenario("gpu-short", seed=seed)
    b = make_ring_scenario("paper", seed=seed, num_servers=10)
    assert a.name == "gpu-short" and a.problem.num_servers == GPU_SHORT_SERVERS == 10
    ta, tb = a.problem.topology, b.problem.topology
    for f in ("rack_of", "gpus", "server_bw", "rack_bw"):
        np.testing.assert_array_equal(getattr(ta, f), getattr(tb, f))
    assert a.truth.job_seed == b.truth.job_seed and a.truth.arrival_rate == b.truth.arrival_rate == 2.0
    assert a.params == b.params and a.problem.workers_max == b.problem.workers_max
    # the other parameters still apply, as on the paper scenario
    c = make_ring_scenario("gpu-short", seed=seed, arrival_rate=3.0)
    assert c.truth.arrival_rate == 3.0 and c.problem.num_servers == 10


def test_the_env_runs_it_by_name_and_steps_the_same_jobs_as_the_paper_on_ten_servers():
    assert "gpu-short" in RING_SCENARIOS
    envs = [gym.make(ENV, scenario="gpu-short", scenario_seed=3, horizon=15, action_mode="ring_size"),
            gym.make(ENV, scenario_seed=3, horizon=15, action_mode="ring_size", num_servers=10)]
    outs = [[], []]
    for i, env in enumerate(envs):
        obs, info = env.reset(seed=0)
        for _ in range(15):
            obs, r, _, _, info = env.step(np.full(32, 5))  # every job asks for 5 workers: the GPUs run short
            outs[i].append((r, obs["jobs"].copy(), info["metrics"]["gpu_util"]))
    assert envs[0].unwrapped.problem.num_servers == 10
    for (ra, ja, ga), (rb, jb, gb) in zip(*outs):
        assert ra == rb and ga == gb
        np.testing.assert_array_equal(ja, jb)
    assert max(g for _, _, g in outs[0]) == 1.0  # all GPUs in use in some slot


def test_num_servers_is_fixed_by_the_preset():
    with pytest.raises(ValueError, match="num_servers cannot be set for scenario 'gpu-short'"):
        make_ring_scenario("gpu-short", num_servers=50)
    with pytest.raises(ValueError, match="num_servers"):
        gym.make(ENV, scenario="gpu-short", num_servers=20)


def _gaps(scenario: str, instances, horizon: int) -> dict:
    """Per instance: (GADGET's total / the window bound, mean GPU utilisation)."""
    res = evaluate(ENV, ["gadget[rounding_repair=true]"], [0], horizon, env_kwargs={"scenario": scenario},
                   instances=instances, workers=1, progress=False, score=False)
    out = {}
    for r in res.runs:
        truth = gym.make(ENV, scenario=scenario, scenario_seed=r.instance).unwrapped.scenario.truth
        out[r.instance] = (r.total_reward / run_upper_bound(truth, horizon, 32), r.metrics["mean_gpu_util"])
    return out


def test_gadget_is_at_the_window_bound_on_the_paper_cluster_and_below_it_on_the_short_one():
    """The same job streams (each instance's): on 50 servers GADGET (with repair, the option that reaches the bound
    on the paper's cluster) gives every visible job its cap, on 10 the GPUs stop it on some instance."""
    inst = [900, 901, 902]
    paper, short = _gaps("paper", inst, 60), _gaps("gpu-short", inst, 60)
    for k in inst:
        assert paper[k][0] == pytest.approx(1.0, rel=1e-12)
        assert short[k][0] <= 1.0 + 1e-12 and short[k][1] > paper[k][1]
    assert min(short[k][0] for k in inst) < 1.0 - 1e-2
