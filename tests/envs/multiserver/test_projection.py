"""The exact Euclidean projection onto Y (eqs. 3–4, 11–13) against a QP solver (HiGHS)."""

import highspy
import numpy as np
import pytest

from clustergym.envs.multiserver.allocation.scenario import make_allocation_scenario
from clustergym.envs.multiserver.projection import AllocationLayout, project_groups


def qp_reference(z: np.ndarray, u: np.ndarray, c: np.ndarray) -> np.ndarray:
    """min Σ ½(y − z)² s.t. 0 <= y <= u, Σ_row y <= c: one separable QP for all rows (HiGHS)."""
    G, D = z.shape
    n = G * D
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for opt in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
        h.setOptionValue(opt, 1e-10)
    h.setOptionValue("qp_regularization_value", 0.0)  # the default 1e-7 regularisation shifts y by ~1e-6
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, G
    lp.col_cost_ = (-z.ravel()).tolist()
    lp.col_lower_ = [0.0] * n
    lp.col_upper_ = u.ravel().tolist()
    lp.row_lower_ = [-highspy.kHighsInf] * G
    lp.row_upper_ = c.tolist()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = list(range(n + 1))
    lp.a_matrix_.index_ = np.repeat(np.arange(G), D).tolist()
    lp.a_matrix_.value_ = [1.0] * n
    h.passModel(lp)
    h.passHessian(n, n, 1, np.arange(n + 1, dtype=np.int32), np.arange(n, dtype=np.int32), np.ones(n))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return np.array(h.getSolution().col_value).reshape(G, D)


def random_groups(rng, G, D, kind):
    u = rng.uniform(0, 5, (G, D)) * (rng.random((G, D)) < 0.85)  # some zero caps
    z = rng.normal(1.0, 4.0, (G, D))
    if kind == "mixed":
        c = rng.uniform(0, 15, G)
    elif kind == "non_binding":  # Σ clip(z, 0, u) <= c: the projection is the box clip
        c = np.clip(z, 0, u).sum(axis=1) + rng.uniform(0, 3, G)
    elif kind == "all_binding":  # every cap wants more than fits
        z = u + rng.uniform(0.5, 5, (G, D))
        c = rng.uniform(0, 0.9, G) * u.sum(axis=1)
    elif kind == "zero_capacity":
        c = np.zeros(G)
    elif kind == "ties":  # repeated values and caps: breakpoints coincide
        z = np.round(rng.normal(2, 2, (G, D)))
        u = np.round(rng.uniform(0, 4, (G, D)))
        c = np.round(rng.uniform(0, 8, G))
    return z, u, c


@pytest.mark.parametrize("kind", ["mixed", "non_binding", "all_binding", "zero_capacity", "ties"])
def test_projection_equals_qp_on_random_instances(kind):
    rng = np.random.default_rng(["mixed", "non_binding", "all_binding", "zero_capacity", "ties"].index(kind))
    for D in (1, 2, 3, 7):
        z, u, c = random_groups(rng, 300, D, kind)  # 4 × 300 = 1,200 instances per kind
        y = project_groups(z, u, c)
        ref = qp_reference(z, u, c)
        assert np.abs(y - ref).max() <= 1e-6
        assert np.all(y >= 0) and np.all(y <= u + 1e-12) and np.all(y.sum(axis=1) <= c + 1e-9)
        if kind == "non_binding":
            assert np.array_equal(y, np.clip(z, 0, u))
        if kind == "all_binding":
            assert np.allclose(y.sum(axis=1), c, atol=1e-9)
        if kind == "zero_capacity":
            assert np.all(y == 0)


def test_projection_kkt_eq13_on_a_hand_example():
    # z = (3, 1, 0.5), u = (2, 2, 2), c = 2: τ solves clip(3−τ,0,2) + clip(1−τ,0,2) + clip(0.5−τ,0,2) = 2.
    # With τ in [1, 2): port 0 is free (3−τ), others 0 -> 3 − τ = 2 -> τ = 1 -> y = (2, 0, 0)? (3−1 = 2 hits
    # its cap exactly.) The KKT set B³ = {0}, eq. 13: ρ/2 = z_0 − c = 1.
    y = project_groups(np.array([[3.0, 1.0, 0.5]]), np.full((1, 3), 2.0), np.array([2.0]))
    assert np.allclose(y, [[2.0, 0.0, 0.0]])
    # Two free ports: z = (3, 2.5), u = 5, c = 3 -> τ = 1.25, y = (1.75, 1.25).
    y = project_groups(np.array([[3.0, 2.5]]), np.full((1, 2), 5.0), np.array([3.0]))
    assert np.allclose(y, [[1.75, 1.25]])


def test_layout_projection_on_a_scenario_matches_groupwise_qp():
    pb = make_allocation_scenario("paper", seed=3, num_servers=40).problem
    lay = AllocationLayout(pb.edge_port, pb.edge_server, pb.edge_demand, pb.capacity, pb.num_servers)
    rng = np.random.default_rng(0)
    z = rng.normal(0, 1, (pb.num_edges, pb.num_device_types)) * 3 * pb.edge_demand
    y = lay.project(z)
    R, D = lay.index.shape
    zg = lay.gather(z).transpose(0, 2, 1).reshape(-1, D)
    ref = qp_reference(zg, lay.upper.transpose(0, 2, 1).reshape(-1, D), pb.capacity.reshape(-1))
    refe = ref.reshape(R, pb.num_device_types, D)[lay.edge_server, :, lay.edge_slot]
    assert np.abs(y - refe).max() <= 1e-6
    assert np.all(lay.server_sums(y) <= pb.capacity + 1e-9)
    assert np.all(y <= pb.edge_demand + 1e-12) and np.all(y >= 0)
    # Idempotent on Y.
    assert np.allclose(lay.project(y), y, atol=1e-12)


def qp_reference_grouped(z: np.ndarray, u: np.ndarray, group: np.ndarray, c: np.ndarray) -> np.ndarray:
    """min Σ ½(y − z)² s.t. 0 <= y <= u, Σ_{i: group_i = g} y_i <= c_g (HiGHS), any group sizes."""
    n, G = z.shape[0], c.shape[0]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for opt in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
        h.setOptionValue(opt, 1e-10)
    h.setOptionValue("qp_regularization_value", 0.0)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, G
    lp.col_cost_ = (-z).tolist()
    lp.col_lower_ = [0.0] * n
    lp.col_upper_ = u.tolist()
    lp.row_lower_ = [-highspy.kHighsInf] * G
    lp.row_upper_ = c.tolist()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = list(range(n + 1))
    lp.a_matrix_.index_ = group.tolist()
    lp.a_matrix_.value_ = [1.0] * n
    h.passModel(lp)
    h.passHessian(n, n, 1, np.arange(n + 1, dtype=np.int32), np.arange(n, dtype=np.int32), np.ones(n))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return np.array(h.getSolution().col_value)


def random_layout(rng):
    """A random small P2 instance: servers with 1–6 ports, some zero caps a and capacities c, and a
    point z drawn as a learner would send it (uniform in the box, beyond it, Gaussian, or with ties)."""
    R, K = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    deg = rng.integers(1, 7, R)
    server = rng.permutation(np.repeat(np.arange(R), deg))  # edges in random server order
    E = server.shape[0]
    a = rng.uniform(0, 8, (E, K)) * (rng.random((E, K)) < 0.85)
    c = rng.uniform(0, 10, (R, K)) * (rng.random((R, K)) < 0.85)
    kind = rng.integers(4)
    if kind == 0:  # action_space.sample()
        z = rng.random((E, K)) * a
    elif kind == 1:  # beyond the box on both sides
        z = rng.uniform(-0.5, 1.8, (E, K)) * a
    elif kind == 2:
        z = rng.normal(1.0, 4.0, (E, K))
    else:  # ties: repeated values, caps and capacities, so breakpoints coincide
        z, a, c = np.round(rng.normal(2, 2, (E, K))), np.round(a), np.round(c)
    return server, a, c, z


def test_layout_projection_equals_qp_on_thousands_of_random_instances():
    """3,000 random instances (about 60,000 entries), solved as a few QPs with HiGHS, agree within 1e-6."""
    rng = np.random.default_rng(2026)
    checked = binding = 0
    for batch in range(100):  # small QPs: HiGHS's active-set QP time grows faster than linearly
        zs, us, gs, cs, ys = [], [], [], [], []
        for _ in range(30):
            server, a, c, z = random_layout(rng)
            R, K = c.shape
            lay = AllocationLayout(np.zeros_like(server), server, a, c, R)
            y = lay.project(z)
            # feasible (eqs. 3–4) and the box clip wherever eq. 4 does not bind
            assert np.all(y >= 0) and np.all(y <= a) and np.all(lay.server_sums(y) <= c + 1e-9)
            free = lay.server_sums(np.clip(z, 0, a)) <= c  # (R, K) non-binding groups
            assert np.array_equal(y[free[server]], np.clip(z, 0, a)[free[server]])
            binding += int((~free).sum())
            # float32 input: the same bits as its float64 widening
            z32 = z.astype(np.float32)
            assert np.array_equal(lay.project(z32), lay.project(z32.astype(np.float64)))
            offset = sum(x.shape[0] for x in cs)
            zs.append(z.ravel()), us.append(a.ravel()), ys.append(y.ravel()), cs.append(c.ravel())
            gs.append((offset + server[:, None] * K + np.arange(K)).ravel())
            checked += 1
        ref = qp_reference_grouped(np.concatenate(zs), np.concatenate(us), np.concatenate(gs), np.concatenate(cs))
        assert np.abs(np.concatenate(ys) - ref).max() <= 1e-6
    assert checked == 3000 and binding > 3000  # the search for τ (eq. 13) ran thousands of times


def test_projection_is_idempotent_and_moves_the_least():
    """Π_Y(Π_Y(z)) = Π_Y(z) (to 1e-12), and no random point of Y is closer to z than Π_Y(z)."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        server, a, c, z = random_layout(rng)
        lay = AllocationLayout(np.zeros_like(server), server, a, c, c.shape[0])
        y = lay.project(z)
        assert np.abs(lay.project(y) - y).max() <= 1e-12
        other = lay.project(rng.random(z.shape) * a * 2)  # some other point of Y
        assert np.sum((y - z) ** 2) <= np.sum((other - z) ** 2) + 1e-9
