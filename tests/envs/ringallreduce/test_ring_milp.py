"""P3 per-slot optimum: the MILP of problem (10) equals brute force; GADGET reaches >= 50% of it and its
placements fit rings that share a server uplink."""

import itertools

import numpy as np
import pytest

from clustergym.agents.gadget import gadget_slot, log_increments
from clustergym.envs.ringallreduce.oracle import ring_increments, solve_slot
from clustergym.envs.ringallreduce.topology import Topology, placement_loads
from clustergym.envs.ringallreduce.slots import random_ring_slot as _instance


def _feasible(y, topo, bw):
    if (y.sum(axis=0) > topo.gpus).any():
        return False
    srv, rack = placement_loads(y, bw, topo.rack_of, topo.num_racks)
    return bool((srv <= topo.server_bw[:, 0] + 1e-9).all() and (rack <= topo.rack_bw[:, 0] + 1e-9).all())


def _brute_force(topo, jobs):
    """Best Σ π over all ring-size vectors that admit a feasible placement (exhaustive search)."""
    S, n = topo.num_servers, jobs["cap"].shape[0]
    pi = ring_increments(jobs["cap"], jobs["zeta"], jobs["z"], jobs["lam1"], jobs["lam2"], jobs["lam3"])
    vecs = {}  # κ -> all y rows with that many workers, y_s <= C_s
    for y in itertools.product(*[range(int(c) + 1) for c in topo.gpus]):
        k = sum(y)
        if 0 < k <= int(jobs["cap"].max()):
            vecs.setdefault(k, []).append(np.array(y))
    best = 0.0
    kappas = sorted(itertools.product(*[range(int(c) + 1) for c in jobs["cap"]]),
                    key=lambda ks: -sum(pi[j, k] for j, k in enumerate(ks)))
    for ks in kappas:
        val = sum(pi[j, k] for j, k in enumerate(ks))
        if val <= best + 1e-12:
            break

        def dfs(j, y):
            if j == n:
                return True
            for row in ([np.zeros(S, dtype=int)] if ks[j] == 0 else vecs.get(ks[j], [])):
                y[j] = row
                if _feasible(y[:j + 1], topo, jobs["bw"][:j + 1]) and dfs(j + 1, y):
                    return True
            y[j] = 0
            return False

        if dfs(0, np.zeros((n, S), dtype=int)):
            return val
    return best


@pytest.mark.parametrize("seed", range(8))
def test_milp_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    S, n = (6, 4) if seed % 2 == 0 else (8, 3)
    if seed == 7:
        S, n = 8, 4
    topo, jobs = _instance(rng, S, n, cap_max=3 if n < 4 else 2)
    opt, y = solve_slot(topo, jobs["cap"], jobs["zeta"], jobs["z"], jobs["lam1"], jobs["lam2"], jobs["lam3"], jobs["bw"])
    bf = _brute_force(topo, jobs)
    assert opt == pytest.approx(bf, rel=1e-7, abs=1e-9)
    # the MILP's own placement is feasible and achieves its value
    assert _feasible(y, topo, jobs["bw"]) and (y.sum(axis=1) <= jobs["cap"]).all()
    pi = ring_increments(jobs["cap"], jobs["zeta"], jobs["z"], jobs["lam1"], jobs["lam2"], jobs["lam3"])
    assert sum(pi[j, y[j].sum()] for j in range(n)) == pytest.approx(opt)


def test_milp_respects_ring_bandwidth_when_it_binds():
    # two servers with 1 GPU each in different racks; a 2-worker job needs a ring over both racks
    topo = Topology(rack_of=np.array([0, 1]), gpus=np.array([1, 1]), server_bw=np.full((2, 2), 5.0),
                    rack_bw=np.full((2, 2), 1.0))
    args = dict(zeta=[100.0], z=[0.0], lam1=[10.0], lam2=[0.05], lam3=[150.0])
    tight, _ = solve_slot(topo, [2], bw=[2.0], **args)  # rack uplinks carry 2 > 1 Gbps: only one worker fits
    loose, _ = solve_slot(topo, [2], bw=[0.5], **args)
    pi = ring_increments([2], **args)
    assert tight == pytest.approx(pi[0, 1]) and loose == pytest.approx(pi[0, 2])


def test_log_increments_match_increments():
    rng = np.random.default_rng(0)
    n = 300
    cap = rng.integers(1, 6, n)
    args = (rng.integers(50, 500, n), rng.integers(0, 40, n), rng.uniform(1, 100, n), rng.uniform(0, 0.02, n),
            rng.uniform(300, 3000, n))
    a, b = log_increments(cap, *args), ring_increments(cap, *args)
    # where the direct difference has no cancellation, both agree; elsewhere only the log form is accurate
    ok = np.isfinite(b) & (b > 1e-6 * args[2][:, None])
    assert ok.sum() > 300
    np.testing.assert_allclose(np.exp(a[ok]), b[ok], rtol=1e-9, atol=0)
    assert (np.isinf(a) == ~np.isfinite(b) | (np.arange(b.shape[1])[None, :] == 0)).all()


def test_gadget_reaches_half_of_optimum_on_small_instances():
    ratios = []
    for seed in range(30):
        rng = np.random.default_rng(100 + seed)
        S, n = int(rng.integers(3, 13)), int(rng.integers(1, 7))
        topo, jobs = _instance(rng, S, n, cap_max=4, tight=seed % 2 == 0)
        opt, _ = solve_slot(topo, jobs["cap"], jobs["zeta"], jobs["z"], jobs["lam1"], jobs["lam2"], jobs["lam3"],
                            jobs["bw"])
        if opt <= 1e-9:
            continue
        window = dict(present=np.ones(n, bool), cap=jobs["cap"], zeta=jobs["zeta"], attained=jobs["z"],
                      lam1=jobs["lam1"], lam2=jobs["lam2"], lam3=jobs["lam3"], bw=jobs["bw"])
        y = gadget_slot(window, topo, np.random.default_rng(seed))
        assert _feasible(y, topo, jobs["bw"]) and (y.sum(axis=1) <= jobs["cap"]).all()
        pi = ring_increments(jobs["cap"], jobs["zeta"], jobs["z"], jobs["lam1"], jobs["lam2"], jobs["lam3"])
        val = sum(pi[j, y[j].sum()] for j in range(n))
        assert val <= opt + 1e-7  # never above the optimum
        ratios.append(val / opt)
    assert len(ratios) >= 20
    assert np.mean(ratios) >= 0.5, ratios


def test_gadget_fits_rings_that_share_a_server_uplink():
    """Servers of 2-4 GPUs on tight uplinks (1-3 Gbps; rack uplinks unlimited): the rings of several jobs cross
    one server uplink, and GADGET's placement still fits its bandwidth (eqs. 17, 19: the embedding LP's
    uplink rows, which the repair of a rounded try also reads)."""
    for seed in range(160):
        rng = np.random.default_rng(seed)
        S, n, R = int(rng.integers(2, 7)), int(rng.integers(2, 7)), int(rng.integers(1, 3))
        rack_of = np.sort(np.concatenate([np.arange(R), rng.integers(0, R, S - R)]))
        sbw = rng.uniform(1.0, 3.0, S)
        topo = Topology(rack_of=rack_of, gpus=rng.integers(2, 5, S), server_bw=np.repeat(sbw[:, None], 2, 1),
                        rack_bw=np.full((R, 2), 100.0))
        cap = rng.integers(2, 6, n)
        zeta, z = rng.integers(50, 500, n).astype(float), rng.integers(0, 10, n).astype(float)
        window = dict(present=np.ones(n, bool), cap=cap, zeta=zeta, attained=z, lam1=rng.uniform(1, 100, n),
                      lam2=rng.uniform(0.002, 0.05, n), lam3=zeta * (z + rng.uniform(0.5, cap + 0.5)),
                      bw=rng.uniform(0.8, 2.0, n))
        y = gadget_slot(window, topo, np.random.default_rng(seed))
        assert _feasible(y, topo, window["bw"]) and (y.sum(axis=1) <= cap).all(), seed


def test_fig7_slot_ratios_same_slots_and_bounded_by_the_optimum():
    from clustergym.experiments.gadget import FIG7_SMALL
    from clustergym.experiments.gadget_diagnostics import slot_ratios

    r = slot_ratios([0], 8, **FIG7_SMALL)
    n = {a: len(v[0]) for a, v in r.items()}
    assert len(set(n.values())) == 1 and n["gadget"] >= 3  # every agent scored on the same slots
    for a, v in r.items():
        v = np.asarray(v[0])
        assert (v >= -1e-9).all() and (v <= 1 + 1e-6).all(), (a, v)  # the MILP optimum bounds every decision
    assert np.mean(r["gadget"][0]) >= np.mean(r["random"][0])


def test_lam1_total_bounds_every_agents_total_utility():
    """``lam1_total``: Σλ1 over the jobs that arrive, an upper bound on any agent's total
    utility on the same (instance, seed); a window too small to list every job is an error."""
    from clustergym.experiments.gadget_diagnostics import lam1_total
    from clustergym.runner.evaluation import evaluate

    kw = dict(num_servers=6, arrival_rate=2.0, max_jobs=40, budget_mode="worker_slots", gpu_scale=0.25)
    lam = lam1_total(kw, [0, 1], 12)
    res = evaluate("clustergym/RingAllReduce-v0", ["greedy", "las"], [0, 1], 12, env_kwargs=kw, progress=False,
                   score=False)
    for a in ("greedy", "las"):
        tot = res.per_instance(a)
        assert all(0 < tot[i] <= lam[i] for i in (0, 1))
    with pytest.raises(ValueError, match="max_jobs"):
        lam1_total(dict(kw, max_jobs=2), [0], 12)


def test_milp_solves_a_slot_whose_increments_are_all_below_the_float_scale():
    """Jobs far below λ3 (μ(ζ z) ~ 1e-310): the objective's rescaling must stay finite, and the value and
    the placement are still those of problem (10) (feasible, within each job's cap)."""
    topo = Topology(rack_of=np.array([0, 0, 1]), gpus=np.array([2, 2, 1]), server_bw=np.full((3, 2), 10.0),
                    rack_bw=np.full((2, 2), 10.0))
    cap = np.array([2, 3])
    val, y = solve_slot(topo, cap, zeta=np.array([1.0, 1.0]), z=np.array([0.0, 0.0]), lam1=np.array([1e-310, 1e-310]),
                        lam2=np.array([1.0, 1.0]), lam3=np.array([10.0, 10.0]), bw=np.array([1.0, 1.0]))
    assert np.isfinite(val) and 0.0 <= val < 1e-299
    assert _feasible(y, topo, np.array([1.0, 1.0])) and (y.sum(axis=1) <= cap).all()
