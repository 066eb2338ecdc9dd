"""The authors' readings of DRF and BINPACKING / SPREADING beside ours (baselines/multiserver_allocation.py),
and the P2 settings named after their source (scenario.py)."""

import numpy as np
import pytest

from clustergym.core.agent import make
from clustergym.core.scenario import freeze
from clustergym.envs.multiserver.allocation.scenario import AllocationProblem, make_allocation_scenario

BOTH = {"arrivals": np.array([1, 1])}


def _two_ports(cap0: float) -> AllocationProblem:
    """Port 0 reaches servers 0 and 1, port 1 only server 1; one type; a = (2, 2), c = (cap0, 2).
    Channels (edges ordered by (port, server)): e0 = (0, 0), e1 = (0, 1), e2 = (1, 1)."""
    return AllocationProblem(
        num_ports=2, num_servers=2, num_device_types=1, edge_port=freeze(np.array([0, 0, 1])),
        edge_server=freeze(np.array([0, 1, 1])), demand=freeze(np.array([[2.0], [2.0]])),
        capacity=freeze(np.array([[cap0], [2.0]])), alpha=freeze(np.ones((2, 1))),
        utility=freeze(np.zeros((2, 1), int)), beta=freeze(np.array([0.5])), device_names=("CPU",))


def _act(name: str, pb, obs=BOTH) -> np.ndarray:
    ag = make(name, family="multiserver-allocation")
    ag.reset(pb, seed=0)
    return np.asarray(ag.act(obs, {}))[:, 0]


def test_drf_readings_differ_on_the_port_total():
    pb = _two_ports(2.0)
    # DRF order: s_0 = 2/(2+2) = 0.5 < s_1 = 2/2 = 1, so port 0 is served first.
    # Ours: eq. 3 caps each channel at a_0 = 2, so port 0 fills both servers and port 1 gets nothing.
    assert _act("drf", pb) == pytest.approx([2.0, 2.0, 0.0])
    # The authors': port 0's total is capped at a_0 = 2 (server 0 first), server 1 is left to port 1.
    y = _act("drf[total_cap=true]", pb)
    assert y == pytest.approx([2.0, 0.0, 2.0])
    assert y[:2].sum() <= 2.0 and y[2] <= 2.0
    # idle port 0: port 1 takes server 1 in both readings
    idle = {"arrivals": np.array([0, 1])}
    assert _act("drf", pb, idle) == pytest.approx([0, 0, 2.0]) and _act("drf[total_cap=true]", pb, idle) == pytest.approx([0, 0, 2.0])


def test_binpacking_and_spreading_single_node_readings():
    pb = _two_ports(4.0)
    # Ours: per node, first fit in score order; on node 1 ports 0 and 1 tie (both fill it), port 0 wins by index.
    assert _act("binpacking", pb) == pytest.approx([2.0, 2.0, 0.0])
    # Single node, BINPACKING: port 0 goes to the node it fills most (node 1: 2/2 vs node 0: 2/4);
    # port 1 then fits nowhere.
    assert _act("binpacking[single_node=true]", pb) == pytest.approx([0.0, 2.0, 0.0])
    # Single node, SPREADING: port 0 to the least-filled node (node 0), port 1 to node 1.
    assert _act("spreading[single_node=true]", pb) == pytest.approx([2.0, 0.0, 2.0])
    for name in ("binpacking[single_node=true]", "spreading[single_node=true]"):
        y = _act(name, pb)
        assert ((y[:2] > 0).sum() <= 1)  # one node per request


def test_reading_options_are_checked():
    with pytest.raises(ValueError, match="total_cap"):
        make("drf[total_cap=3]", family="multiserver-allocation")
    with pytest.raises(ValueError, match="single_node"):
        make("spreading[single_node=maybe]", family="multiserver-allocation")


def test_authors_readings_stay_feasible_on_the_paper_settings():
    import gymnasium as gym

    import clustergym  # noqa: F401
    from clustergym.runner.episode import run_episode

    for setting in ("paper", "authors-code"):
        for name in ("drf[total_cap=true]", "binpacking[single_node=true]", "spreading[single_node=true]"):
            env = gym.make("clustergym/MultiServerAllocation-v0", oracle=False, horizon=30, setting=setting).unwrapped
            ep = run_episode(env, make(name, family=env.family), 0)
            assert ep.metrics.sums["repaired"] == 0  # inside Y every slot
            if name.startswith("drf"):  # the port total of every type stays <= a_l^k on real slots
                ag, pb = make(name, family=env.family), env.problem
                ag.reset(pb, seed=0)
                obs, _ = env.reset(seed=1)
                for _ in range(5):
                    y = np.asarray(ag.act(obs, {}))
                    tot = np.zeros((pb.num_ports, pb.num_device_types))
                    np.add.at(tot, pb.edge_port, y)
                    assert np.all(tot <= pb.demand + 1e-9)
                    obs, *_ = env.step(y)


# -- settings --------------------------------------------------------------------------------------

def test_settings_are_named_after_their_source():
    paper = make_allocation_scenario("paper", seed=0)
    assert paper.params["setting"] == "paper" and paper.params["units"] == "device"  # the default
    assert (paper.params["beta_low"], paper.params["beta_high"], paper.params["contention"]) == (0.3, 0.5, 10.0)
    code = make_allocation_scenario("paper", seed=0, setting="authors-code")
    p = code.params
    assert (p["units"], p["beta_low"], p["beta_high"], p["contention"], p["reciprocal"]) == ("code", 0.01, 0.1, 4.0, "code")
    assert np.all((code.problem.beta >= 0.01) & (code.problem.beta <= 0.1))
    # the authors' reciprocal 1/(3α) − 1/(y + 3α) is eq. 27's with α -> 3α on the reciprocal entries only
    mix = make_allocation_scenario("paper", seed=0, setting="table1-in-code-units")
    rec = code.problem.utility == 2
    assert np.array_equal(code.problem.utility, mix.problem.utility)
    assert np.allclose(code.problem.alpha[rec], 3 * mix.problem.alpha[rec])
    assert np.array_equal(code.problem.alpha[~rec], mix.problem.alpha[~rec])
    # authors' contention 0.4 = our 4: demands are 0.4× those of the mixture (same draws)
    assert np.allclose(code.problem.demand, 0.4 * mix.problem.demand)
    # an explicit parameter overrides the setting's entry
    assert make_allocation_scenario("paper", seed=0, setting="authors-code", beta_high=0.2).params["beta_high"] == 0.2


def test_old_units_name_gives_the_new_name():
    with pytest.raises(ValueError, match="setting='table1-in-code-units'"):
        make_allocation_scenario("paper", seed=0, units="paper-code")
    with pytest.raises(ValueError, match="setting='x' is invalid"):
        make_allocation_scenario("paper", seed=0, setting="x")
