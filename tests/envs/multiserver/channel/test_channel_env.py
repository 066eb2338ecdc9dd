"""P1 MultiServerChannel: scenario, constraints, oracle, common random numbers, bad input."""

import gymnasium as gym
import numpy as np
import pytest

from clustergym.core.agent import list_agents, make, public_info
from clustergym.envs.multiserver.channel.scenario import make_channel_scenario
from clustergym.envs.multiserver.channel.oracle import brute_force_knapsack, knapsack_max

ID = "clustergym/MultiServerChannel-v0"


def test_paper_defaults_match_table3():
    sc = make_channel_scenario("paper", seed=0)
    pb, tr = sc.problem, sc.truth
    assert (pb.num_ports, pb.num_servers, pb.num_device_types) == (8, 40, 3)
    assert np.all(tr.rho == 0.9)
    assert pb.demand.min() >= 1 and pb.demand.max() <= 2
    assert all(len(e) >= 1 for e in pb.port_edges)  # every port keeps a channel
    # capacity_ratio 0.25: c_k = ceil(0.25 Σ_e a_k^e)
    assert np.array_equal(pb.capacity, np.ceil(0.25 * pb.demand.sum(axis=0)).astype(int))
    assert np.all((tr.mean_utility >= 0.05 - 1e-12) & (tr.mean_utility <= 0.95 + 1e-12))


def test_kwargs_override_scenario():
    env = gym.make(ID, num_servers=12, num_ports=3, capacity_ratio=0.5, rho=0.3)
    pb = env.unwrapped.problem
    assert (pb.num_ports, pb.num_servers) == (3, 12)
    assert np.all(env.unwrapped.scenario.truth.rho == 0.3)


@pytest.mark.parametrize("kw, name", [
    (dict(rho=1.5), r"rho=1\.5 is invalid: expected a number in \[0, 1\]"),
    (dict(num_ports=0), r"num_ports=0 is invalid: expected an integer in \[1, 10000\]"),
    (dict(channel_prob=0.0), r"channel_prob=0\.0 is invalid"),
    (dict(capacity_ratio=2), r"capacity_ratio=2 is invalid"),
    (dict(demand_max=0), r"demand_max=0 is invalid"),
    (dict(bogus=1), r"unexpected keyword argument 'bogus'"),
    (dict(scenario="nope"), r"scenario='nope' is invalid"),
])
def test_invalid_parameters_raise_naming_parameter(kw, name):
    with pytest.raises(ValueError, match=name):
        gym.make(ID, **kw)


def _realised_utilities(seed: int, blocks: int = 200) -> tuple:
    """(truth, Z̃ of ``blocks`` x 256 slots drawn by the env's own kernel) on instance ``seed``."""
    env = gym.make(ID, horizon=5, scenario_seed=seed).unwrapped
    env.reset(seed=0)
    env._rngs["utilities"] = np.random.default_rng(seed)
    z = np.concatenate([(env._refill(), env._z_block)[1] for _ in range(blocks)])  # (blocks·256, E)
    return env.scenario.truth, z


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_utility_law_has_exact_mean_and_the_intended_std(seed):
    """Noise law (channel_scenario "Noise law", esdp.md §4): Beta with mean ṽ_e exactly and std
    σ_e = min(s_e, √(0.95 ṽ_e(1−ṽ_e))), s_e the paper's μ_e/2 through the normalising map."""
    tr, z = _realised_utilities(seed)
    v, s, sig = tr.mean_utility, tr.intended_std, tr.noise_std
    n = z.shape[0]  # 51,200 slots
    assert np.all((z >= 0) & (z <= 1))
    # The law's parameters: mean a/(a+b) = ṽ exactly, variance ṽ(1−ṽ)/(a+b+1) = σ².
    a, b = tr.beta_a, tr.beta_b
    np.testing.assert_allclose(a / (a + b), v, rtol=0, atol=1e-15)
    np.testing.assert_allclose(v * (1 - v) / (a + b + 1), sig**2, rtol=1e-12)
    np.testing.assert_allclose(sig, np.minimum(s, np.sqrt(0.95 * v * (1 - v))), rtol=1e-12)
    # Realised mean within 5 standard errors of ṽ, per channel.
    assert np.all(np.abs(z.mean(axis=0) - v) < 5 * sig / np.sqrt(n))
    # Realised std within 3% of σ_e, per channel (std error of a sample std here <= 0.6%).
    real = z.std(axis=0, ddof=1)
    np.testing.assert_allclose(real, sig, rtol=0.03)
    # The intended std is reached wherever [0, 1] allows it: on most channels, and the median
    # channel's realised std is the intended one (the old triangular law gave 58–63%).
    at = sig >= s * (1 - 1e-12)
    assert at.mean() >= 0.7  # 94%, 76%, 71% of the channels on instances 0, 1, 2
    assert np.median(real / s) > 0.97


def test_deterministic_channel_yields_its_mean():
    from clustergym.envs.multiserver.channel.scenario import channel_truth

    tr = channel_truth(np.ones(1), np.array([0.3, 0.0, 0.6]), np.array([0.0, 0.2, 0.1]))
    assert tr.beta_a[0] == 0 and tr.beta_a[1] == 0 and tr.beta_a[2] > 0
    from clustergym.envs.multiserver.channel.dynamics import draw_block
    from clustergym.core.scenario import child_generators

    _, z = draw_block(child_generators(np.random.default_rng(0), ("arrivals", "utilities")), tr, 64)
    assert np.all(z[:, 0] == 0.3) and np.all(z[:, 1] == 0.0) and z[:, 2].std() > 0.05


def test_realised_utilities_average_to_hidden_mean():
    env = gym.make(ID, horizon=3000, oracle=False).unwrapped
    env.reset(seed=1)
    zs = []
    for _ in range(3000):
        zs.append(env._z.copy())
        env.step(np.zeros(env.action_space.shape, dtype=np.int8))
    np.testing.assert_allclose(np.mean(zs, axis=0), env.scenario.truth.mean_utility, atol=0.02)


def test_oracle_equals_brute_force_on_random_instances():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n, K = int(rng.integers(1, 12)), int(rng.integers(1, 4))
        v = rng.random(n)
        w = rng.integers(1, 4, size=(n, K))
        c = rng.integers(0, 9, size=K)
        best, x = knapsack_max(v, w, c)
        assert best == pytest.approx(brute_force_knapsack(v, w, c), abs=1e-12)
        assert np.all(w[x].sum(axis=0) <= c)
        assert v[x].sum() == pytest.approx(best)


def test_toy_scenario_known_optimum():
    env = gym.make(ID, scenario="toy", horizon=10, oracle=True).unwrapped
    env.reset(seed=0)
    best, x = knapsack_max(env.scenario.truth.mean_utility, env.problem.demand, env.problem.capacity)
    assert best == pytest.approx(1.5) and x.tolist() == [False, True, True, True]
    _, _, _, _, info = env.step(np.array([0, 1, 1, 1]))
    assert info["metrics"]["oracle_reward"] == pytest.approx(1.5)
    assert info["metrics"]["regret"] == pytest.approx(0.0, abs=1e-12)
    _, _, _, _, info = env.step(np.array([1, 1, 0, 0]))  # value-greedy choice
    assert info["metrics"]["regret"] == pytest.approx(0.05)


def test_oracle_dominates_every_feasible_action_and_regret_nonnegative():
    env = gym.make(ID, horizon=400, oracle=True).unwrapped
    obs, info = env.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(400):
        a = (rng.random(env.action_space.shape) < 0.3).astype(np.int8)
        obs, r, _, _, info = env.step(a)
        m = info["metrics"]
        assert m["oracle_reward"] >= m["expected_reward"] - 1e-9
        assert m["regret"] >= -1e-9
        assert np.all(m["used"] <= env.problem.capacity)


@pytest.mark.parametrize("agent", list_agents(ID))  # every registered P1 agent (esdp, hauf, lcf, lwtf, random, ...)
def test_agents_regret_never_negative_and_actions_feasible(agent):
    env = gym.make(ID, horizon=150, num_servers=16, infeasible="raise", oracle=True)  # raise: agents must be feasible
    ag = make(agent, env_id=ID)
    obs, info = env.reset(seed=4)
    ag.reset(env.unwrapped.problem, seed=4)
    for _ in range(150):
        a = ag.act(obs, public_info(info))
        nxt, r, term, trunc, info = env.step(a)
        assert info["metrics"]["regret"] >= -1e-9
        assert info["metrics"]["repaired"] == 0
        ag.update(obs, a, r, nxt, public_info(info))
        obs = nxt


def _arrivals_and_utilities(agent, seed, steps=300):
    env = gym.make(ID, horizon=steps).unwrapped
    ag = make(agent, env_id=ID)
    obs, info = env.reset(seed=seed)
    ag.reset(env.problem, seed=seed)
    arr, zs = [], []
    for _ in range(steps):
        arr.append(obs["arrivals"].copy())
        zs.append(env._z.copy())
        a = ag.act(obs, public_info(info))
        nxt, r, term, trunc, info = env.step(a)
        ag.update(obs, a, r, nxt, public_info(info))
        obs = nxt
    return np.array(arr), np.array(zs)


def test_common_random_numbers_across_agents():
    a1, z1 = _arrivals_and_utilities("hauf", seed=11)
    a2, z2 = _arrivals_and_utilities("random", seed=11)
    assert np.array_equal(a1, a2) and np.array_equal(z1, z2)
    a3, _ = _arrivals_and_utilities("random", seed=12)
    assert not np.array_equal(a1, a3)


def test_feedback_holds_executed_channels_and_their_utilities():
    env = gym.make(ID, horizon=10).unwrapped
    obs, info = env.reset(seed=0)
    a = info["action_mask"].astype(np.int8)
    z = env._z.copy()
    _, r, _, _, info = env.step(a)
    ch = np.flatnonzero(info["feedback"]["executed"])
    assert info["feedback"]["executed"].shape == info["feedback"]["utilities"].shape == (env.problem.num_edges,)
    assert np.array_equal(info["feedback"]["utilities"][ch], z[ch])
    assert np.all(info["feedback"]["utilities"][~info["feedback"]["executed"]] == 0.0)
    assert r == pytest.approx(z[ch].sum())


def test_bad_actions_raise_clear_errors_and_change_nothing():
    env = gym.make(ID, horizon=10).unwrapped
    env.reset(seed=0)
    E = env.action_space.n
    t_before = env._t
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(%d,\)" % E):
        env.step(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.full(E, np.nan))
    with pytest.raises(ValueError, match="0 or 1"):
        env.step(np.full(E, 2))
    assert env._t == t_before  # nothing happened


def test_infeasible_raise_names_device_type_and_excess():
    env = gym.make(ID, horizon=10, rho=1.0, infeasible="raise").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"device type \d \((CPU|MEM|GPU)\) uses \d+ > capacity \d+ \(excess \d+"):
        env.step(np.ones(env.action_space.n, dtype=np.int8))
    env2 = gym.make(ID, horizon=10, rho=0.0, infeasible="raise").unwrapped
    env2.reset(seed=0)
    with pytest.raises(ValueError, match=r"port \d+, which has no job"):
        env2.step(np.ones(env2.action_space.n, dtype=np.int8))


def test_infeasible_repair_keeps_longest_fitting_prefix_and_reports_count():
    env = gym.make(ID, horizon=10, rho=1.0).unwrapped
    env.reset(seed=0)
    pb = env.problem
    _, _, _, _, info = env.step(np.ones(pb.num_edges, dtype=np.int8))
    m = info["metrics"]
    ch = np.flatnonzero(info["feedback"]["executed"])
    assert m["repaired"] == pb.num_edges - ch.size > 0
    assert np.array_equal(ch, np.arange(ch.size))  # a prefix in edge order
    assert np.all(pb.demand[ch].sum(axis=0) <= pb.capacity)
    assert np.any(pb.demand[: ch.size + 1].sum(axis=0) > pb.capacity)  # one more would not fit


def test_action_masks_for_maskable_ppo():
    env = gym.make(ID, horizon=10).unwrapped
    _, info = env.reset(seed=0)
    m = env.action_masks().reshape(-1, 2)
    assert np.all(m[:, 0]) and np.array_equal(m[:, 1], info["action_mask"])


def test_public_problem_is_read_only():
    env = gym.make(ID).unwrapped
    with pytest.raises(ValueError):
        env.problem.capacity[0] = 99


def test_truth_rejects_a_std_no_law_on_unit_interval_has():
    from clustergym.envs.multiserver.channel.scenario import ChannelTruth

    v = np.array([0.5, 0.1])
    with pytest.raises(ValueError, match="noise_std is invalid"):
        ChannelTruth(rho=np.ones(1), mean_utility=v, intended_std=v, noise_std=np.array([0.1, 0.35]))  # 0.1225 > 0.09


def test_the_oracle_memo_returns_the_exact_optimum_of_the_inputs():
    """knapsack_value is knapsack_max's value, memoised on the exact bytes of the inputs: equal inputs hit, and an
    input that differs in one value, one demand or the capacity is solved again."""
    from clustergym.envs.multiserver.channel import oracle

    rng = np.random.default_rng(7)
    oracle._MEMO.clear()
    for _ in range(200):
        n, K = int(rng.integers(1, 9)), int(rng.integers(1, 4))
        v, w, c = rng.random(n), rng.integers(0, 4, (n, K)), rng.integers(0, 6, K)
        first = oracle.knapsack_value(v, w, c)
        assert first == oracle.knapsack_max(v, w, c)[0] == oracle.knapsack_value(v.copy(), w.copy(), c.copy())
        assert oracle.knapsack_value(v, w, c + 1) == oracle.knapsack_max(v, w, c + 1)[0]
        v2 = v.copy()
        v2[0] += 1.0
        assert oracle.knapsack_value(v2, w, c) == oracle.knapsack_max(v2, w, c)[0]


def test_the_oracle_of_a_run_is_the_same_with_and_without_the_memo():
    """The per-slot oracle (and so regret) of a run is unchanged when the memo already holds the instance's slots."""
    from clustergym.envs.multiserver.channel import oracle

    def regrets():
        env = gym.make("clustergym/MultiServerChannel-v0", horizon=40, oracle=True, scenario_seed=2)
        env.reset(seed=5)
        out = []
        for _ in range(40):
            _, _, _, _, info = env.step(env.action_space.sample())
            out.append(info["metrics"]["oracle_reward"])
        return out

    oracle._MEMO.clear()
    cold = regrets()
    assert len(oracle._MEMO) > 0
    warm = regrets()
    assert cold == warm
