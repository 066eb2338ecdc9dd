"""The exact Euclidean projection onto Y (eqs. 3–4, 11–13) against a QP solver (HiGHS)."""

import highspy
import numpy as np
import pytest

from clustergym.envs.multiserver.allocation_scenario import make_allocation_scenario
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
