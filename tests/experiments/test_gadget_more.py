"""GADGET's Fig. 4 with the Philly trace's arrivals (clustergym.experiments.extra.gadget_more), on a
tiny grid: the arrivals follow the shipped trace preset (no file outside the package), the window
keeps every job visible, and the rows have the form of reproduce gadget's."""

import json

import numpy as np
import pytest

from clustergym.core import stats
from clustergym.envs.ringallreduce.scenario import make_ring_scenario
from clustergym.experiments.extra import gadget_more as gm

INSTANCES = [0, 1]
H = 16  # the fewest slots where GADGET and FIFO differ at 12 jobs/slot (the growth check is not vacuous)
GRID = {"iterations": [4.0, 12.0]}


@pytest.fixture(scope="module")
def trace():
    return gm.trace_sweep(GRID, H, INSTANCES, 1, False)


def test_the_trace_fixes_the_arrival_slots_and_the_instance_the_rest():
    a, b = (make_ring_scenario("philly", seed=s, arrival_rate=4.0) for s in (0, 1))
    np.testing.assert_array_equal(a.truth.trace_slot, b.truth.trace_slot)  # the trace's pattern on every instance
    assert not np.array_equal(a.problem.topology.gpus, b.problem.topology.gpus) or \
        not np.array_equal(a.problem.topology.rack_of, b.problem.topology.rack_of)
    # a higher mean rate packs the same submit times into fewer slots: more jobs in the horizon
    assert gm.trace_jobs(12.0, H) > gm.trace_jobs(4.0, H) > 0


def test_every_trace_job_of_the_horizon_arrives_and_none_waits(trace):
    for (mode, rate), res in trace.items():
        for a in gm.AGENTS:
            assert max(res.per_instance(a, "mean_waiting_jobs").values()) == 0.0
    # the env's arrivals are the trace's: count the distinct jobs a do-nothing run sees
    from clustergym.envs.ringallreduce.env import RingAllReduceEnv

    env = RingAllReduceEnv(horizon=H, scenario="philly", scenario_seed=0, arrival_rate=4.0,
                           max_jobs=gm.trace_window(4.0, H))
    obs, info = env.reset(seed=0)
    seen = set()
    for _ in range(H):
        w = info["window"]
        seen |= set(w["id"][w["present"]].tolist())
        obs, r, term, trunc, info = env.step(np.zeros(env.action_space.shape, dtype=np.int64))
    assert len(seen) == gm.trace_jobs(4.0, H - 1) or len(seen) == gm.trace_jobs(4.0, H)


def test_rows_claim_gadget_above_each_baseline_and_a_growing_gain(trace, tmp_path):
    rows = gm.trace_rows(trace, H)
    above = [r for r in rows if "GADGET >" in r["claim"]]
    grow = [r for r in rows if "grows" in r["claim"]]
    assert len(above) == len(gm.BASELINES) * len(GRID["iterations"]) and len(grow) == len(gm.BASELINES)
    for r in rows:
        assert stats.verdict(r["comparison"], r["predicted"]) in stats.VERDICTS
        assert set(r["comparison"].per_instance) == set(INSTANCES)
    # the growth row is the paired difference of the two gains, per instance
    g = {rate: gm._gain(trace["iterations", rate], ref="fifo").per_instance for rate in GRID["iterations"]}
    fifo_grow = next(r for r in grow if "FIFO" in r["claim"])
    assert any(abs(g[12.0][i] - g[4.0][i]) > 0 for i in INSTANCES)
    assert fifo_grow["comparison"].per_instance == pytest.approx({i: g[12.0][i] - g[4.0][i] for i in INSTANCES})
    more = {"quick": False, "tiny": True, "instances": INSTANCES, "horizon": H, "trace": trace, "poisson": trace,
            "wall": 0.0}
    text = gm.section(more)
    assert "Philly" in text and "trace − Poisson" in text
    doc = json.loads(open(gm.write(more, str(tmp_path / "m"))).read())
    assert doc["arrivals"] == "philly" and len(doc["claims"]) == len(rows)


def test_quick_mode_lists_it_as_full_mode_only():
    more = gm.run({"cfg": {"instances": INSTANCES, "horizon": H, "fig4": GRID}}, quick=True, workers=1,
                  progress=False)
    assert "trace" not in more and "Full mode only" in gm.section(more)


def test_figs56_embedded_ratio_of_each_gadget_reading_comes_from_its_own_runs():
    """Figs. 5-6 report the embedded ratio per reading: Algorithm 2 as written leaves rings partly embedded on a
    bandwidth-short cluster where the repair variant embeds them whole, so the two rows must differ."""
    from clustergym.experiments import gadget as G
    from clustergym.runner.evaluation import evaluate

    res = evaluate(G.ENV_ID, list(G.GADGETS), [0], 60, env_kwargs={"arrival_rate": 2.0, "max_jobs": 200,
                                                                    "bw_scale": 0.25}, progress=False, score=False)
    emb = G.embedded_ratios(res, "bw_scale", 0.25)
    for g in G.GADGETS:
        assert emb[g, "bw_scale", 0.25] == res.per_instance(g, "mean_embedded_ratio")
    assert emb["gadget", "bw_scale", 0.25][0] < emb[G.REPAIR, "bw_scale", 0.25][0] == 1.0
