"""GADGET (gadget.md §V): Algorithm 1 (temporal greedy) with Algorithm 2 (LP-RS-MDE) per slot.

Algorithm 1 keeps no state beyond z_i,t−1 (the attained worker-slots, public in ``info["window"]``):
every slot it solves problem (10) for the active jobs I[t] with Algorithm 2. Per slot:

1. **Bounds q_i (§V.C (i)).** The continuous relaxation of (10) over constraints (2), (4) and (11)
   bounds a job's workers by q_i = min(N_i, budget left, Σ_s C_s); Q_i = {1..q_i}.
2. **Ring sizes (Alg. 2 line 3; the rule before Lemma 7).** Solve the LP relaxation of problem (12)
   and set κ_i = argmax_{κ ∈ Q_i: χ̄_iκ > 0} π_iκ χ̄_iκ for jobs with ρ̄_i = Σ_κ χ̄_iκ > 0, where
   π_iκ = μ_i(ζ_i(z + κ)) − μ_i(ζ_i z). Identical ring nodes make the relaxation's node mappings
   interchangeable and its fractional flows free (eq. 15 holds with zero flow when every node is
   spread alike), so the relaxation reduces exactly to: max Σ π_iκ χ_iκ s.t. Σ_κ χ_iκ ≤ 1,
   Σ_iκ κ χ_iκ ≤ Σ_s C_s (eqs. 13, 14, 16, 18). We solve that LP (HiGHS).
3. **Embedding LP (Alg. 2 line 4) and decomposition (line 6).** Rost–Schmid's augmented LP for
   cactus request graphs is, after decomposition, a convex combination of valid mappings whose
   loads equal the LP's loads. In a two-level tree a mapping of a κ-ring is characterised by its
   worker counts per server, and its loads follow from the cheapest-ring accounting (``topology``):
   GPUs y_s on every server, b_i each way on used server uplinks if it spans servers, on used rack
   uplinks if it spans racks. So we write the embedding LP directly over mappings (the
   "mapping/probability pairs" M_i = {(φ_i^k, ω_i^k)} are then its variables, no flow
   decomposition needed): max Σ_i π_iκi Σ_k φ_i^k s.t. Σ_k φ_i^k ≤ 1 (eq. 13), GPU per server
   (eqs. 16, 18) and bandwidth per link direction (eqs. 17, 19). The candidate mappings per job are
   every single-server embedding, and per rack and across racks the embeddings that take, from
   each possible starting position, consecutive servers in descending GPU order (a restricted set:
   the full set of mappings is exponential; see docs/gadget.md).
4. **Randomized rounding (lines 7–9).** Each try picks ω_i^k with probability φ_i^k (none with
   probability 1 − Σ_k φ_i^k) for every job independently; a try is kept if it respects every
   capacity and beats the best so far (ties of the weighted value: the larger true Σ π); stop
   after ``u_b`` tries or once a try reaches ``alpha`` times the LP value (Alg. 2 line 7's
   (α, β=1, γ=1)-approximation test: a real cluster admits no violation). Default ``alpha=1``
   ("u_b tries keeping the best": stop early only at the LP value); ``alpha=1/3`` is Theorem 8's
   guarantee as the stopping test, an option.

**Repair of a violating try (our choice; the paper has none).** The paper's rounding has no
repair step: Theorem 8 (and Theorem 10) allow capacity overruns by factors β^r, γ with probability
at most |V_s|^−4 per node / |E_s|^−4 per link, which our env (and a real cluster) cannot execute.
``rounding_repair=False`` (default: Algorithm 2 as written) discards a violating try (only
capacity-respecting tries are kept, the closest reading of line 7 with β = γ = 1).
``rounding_repair=True`` (an option, beyond Algorithm 2: docs/gadget.md reports it beside) keeps it after
:func:`repair_overfill`: while some resource (GPUs of a server, eq. 18; a server or rack uplink
direction, eq. 19) is overfilled, remove, **among the jobs whose drawn mapping uses an overfilled
resource**, the one with the smallest increment π_iκi (ties, e.g. in the last lexicographic round
whose weights are floored to one value, by the true log π_iκi; exact ties by the newest). A job
that uses no overfilled resource is never removed. Then ``reoffer`` gives the removed jobs,
largest true π first, the capacity left (:func:`reoffer_support`):

* ``"support"``: the first mapping of the job's own M_i (φ_i^k > 0, decreasing φ) that fits. The
  result is one mapping of M_i or none per job, an outcome line 8 itself can draw: **Algorithm 2
  allows this re-offer**.
* ``"candidates"`` (default): M_i first, then any other candidate embedding of the same κ_i-ring
  (φ = 0). Line 8 never draws a φ = 0 mapping, so **this goes beyond Algorithm 2's output set**;
  it only adds jobs on capacity the rounding left unused, so the value can only rise and every
  capacity holds. Without it, the fractional φ of the embedding LP makes independent draws
  collide; with ``"support"`` a removed job often finds no fitting mapping in its small M_i and
  visible jobs get nothing even on an uncontended cluster (measured: embedded ratio < 1 at 12–24%
  GPU use; ``tests/agents/test_ring_repair.py`` fails with ``"none"``; docs/gadget.md, "Repair").
* ``"none"``: removed jobs stay out.

**Work conservation.** μ_i is increasing, so the exact optimum of problem (10) never leaves a GPU
idle that a visible job could use: leaving such GPUs idle is an approximation error of
Algorithm 2 (it can happen because the ring sizes of line 3 come from an LP that sees only the
total GPU count, and the rounding may find no embedding of them), not a property of problem (10).
Option ``work_conserving=True`` (off by default) places every visible job that still has no
workers after Algorithm 2 with the greedy ring placement on the leftover capacity, largest
increment first, at the largest size ≤ min(N_i, budget left) that fits. With the default repair
it changes little: +0.1–0.2% total utility at 12 jobs/slot, identical at 8 jobs/slot and in the
worker_slots runs measured (docs/gadget.md, "Work conservation").

In ``ring_size`` action mode the agent outputs the ring sizes of its embedding (the env places them
with its own greedy placement).
"""

from __future__ import annotations

import numpy as np
import highspy
from scipy.sparse import coo_matrix, csc_matrix

from clustergym.core.agent import BaseAgent
from clustergym.agents.gadget_repair import reoffer_support, repair_overfill
from clustergym.envs.ringallreduce.dynamics import place_one
from clustergym.envs.ringallreduce.topology import placement_loads

__all__ = ["GADGET", "gadget_slot", "log_increments"]

_TOL = 1e-9
_HIGHS: highspy.Highs | None = None  # one solver object per process, reused (not part of agent state)


def _quiet_highs() -> "highspy.Highs":
    """A Highs object with its output off. Its constructor prints a copyright banner on the C-level
    stdout before any option can be set (it appeared in the middle of ``reproduce``), so file
    descriptor 1 points to /dev/null while it runs."""
    import os
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    return h


def lp_max(c: np.ndarray, A, ub: np.ndarray) -> np.ndarray | None:
    """max cᵀx s.t. A x ≤ ub, 0 ≤ x ≤ 1 with HiGHS (highspy); None unless solved to optimality."""
    global _HIGHS
    if _HIGHS is None:
        _HIGHS = _quiet_highs()
    A = csc_matrix(A)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
    lp.col_cost_ = -np.asarray(c, dtype=np.float64)
    lp.col_lower_, lp.col_upper_ = np.zeros(A.shape[1]), np.ones(A.shape[1])
    lp.row_lower_ = np.full(A.shape[0], -highspy.kHighsInf)
    lp.row_upper_ = np.asarray(ub, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    _HIGHS.clearModel()
    _HIGHS.passModel(lp)
    _HIGHS.run()
    if _HIGHS.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return np.asarray(_HIGHS.getSolution().col_value, dtype=np.float64)


def _candidates(k: int, b: float, gpus, rack_of, srv_cap, rack_cap, num_racks: int):
    """Candidate mappings of a k-ring: list of (servers (m,), counts (m,), racks used if multi-rack)."""
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
    for s in np.flatnonzero(gpus >= k):  # one server: no bandwidth (Fig. 2(a))
        out.append((np.array([s]), np.array([k]), None))
    if k < 2:
        return out
    elig = (gpus >= 1) & (srv_cap + _TOL >= b)
    order = np.flatnonzero(elig)
    order = order[np.argsort(-gpus[order], kind="stable")]  # descending GPUs, ties by index

    def windows(seq):
        res = []
        g = gpus[seq]
        for o in range(seq.size):
            c = np.cumsum(g[o:])
            m = int(np.searchsorted(c, k)) + 1
            if m > c.size:
                break
            if m < 2:
                continue  # a single server is covered above
            srv = seq[o:o + m]
            cnt = g[o:o + m].copy()
            cnt[-1] -= c[m - 1] - k
            res.append((srv, cnt))
        return res

    for r in range(num_racks):
        for srv, cnt in windows(order[rack_of[order] == r]):
            out.append((srv, cnt, None))
    ok_rack = rack_cap + _TOL >= b
    cross = order[ok_rack[rack_of[order]]]
    for srv, cnt in windows(cross):
        racks = np.unique(rack_of[srv])
        if racks.size > 1:
            out.append((srv, cnt, racks))
    return out


def log_increments(cap, zeta, z, lam1, lam2, lam3) -> np.ndarray:
    """(n, K+1) log π_iκ, computed stably (π underflows to 0 far below λ3); −inf for κ = 0 or κ > cap_i."""
    cap = np.asarray(cap, dtype=np.int64)
    K = int(cap.max()) if cap.size else 0
    k = np.arange(K + 1)[None, :]
    zeta, z = np.asarray(zeta, float)[:, None], np.asarray(z, float)[:, None]
    l1, l2, l3 = (np.asarray(v, float)[:, None] for v in (lam1, lam2, lam3))
    a0, a1 = l2 * zeta * z - l2 * l3, l2 * zeta * (z + k) - l2 * l3  # λ2 (x − λ3) before / after
    lsig = lambda a: -np.logaddexp(0.0, -a)  # noqa: E731  log σ(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        # σ(a1) − σ(a0) = σ(−a0) − σ(−a1): use the side where the terms are not both ~1
        low = lsig(a1) + np.log(-np.expm1(lsig(a0) - lsig(a1)))
        high = lsig(-a0) + np.log(-np.expm1(lsig(-a1) - lsig(-a0)))
        out = np.log(l1) + np.where(a0 < 0, low, high)
    return np.where((k >= 1) & (k <= cap[:, None]), out, -np.inf)


def gadget_slot(window: dict, topo, rng: np.random.Generator, *, u_b: int = 20, alpha: float = 1.0,
                rounding_repair: bool = True, reoffer: str = "candidates", work_conserving: bool = False,
                rounds: int = 0, cache: dict | None = None, stats: dict | None = None) -> np.ndarray:
    """One slot of Algorithm 2 for the visible jobs; returns y (J, S).

    ``rounds`` = 0 (default: as many as needed) emulates exact arithmetic: far below λ3 the increments π_iκ are ~1e-60 or
    underflow, and an LP solver treats costs below its tolerance (~1e-9 of the largest) as 0, so a
    single LP would leave capacity idle that the exact LP gives to those jobs. We therefore solve
    lexicographically: round 1 runs Algorithm 2 on the jobs whose best increment is within 1e-9 of
    the largest (weights π / max π, from stable log-increments), later rounds on the remaining jobs
    with the capacity left, until every job has been considered or the GPUs are used up (each round
    removes at least one job, so at most n rounds). Once the remaining jobs' bounds q_i fit in the
    GPUs left, the aggregate row of the ring-size LP is slack and its exact solution is κ_i = q_i
    (π strictly increases in κ), so they form one last round (embedding-LP weights floored at
    1e-6 of the round's largest). ``rounds=1`` is the single floating-point pass.
    """
    present, cap = np.asarray(window["present"]), np.asarray(window["cap"], dtype=np.int64)
    J = present.shape[0]
    gpus = np.asarray(topo.gpus, dtype=np.int64)
    S = gpus.shape[0]
    y = np.zeros((J, S), dtype=np.int64)
    jobs = np.flatnonzero(present & (cap > 0))
    if jobs.size == 0:
        return y
    # 1. q_i from the continuous relaxation of (2), (4), (11)
    q = np.minimum(cap[jobs], int(gpus.sum()))
    logpi = log_increments(q, window["zeta"][jobs], window["attained"][jobs], window["lam1"][jobs],
                           window["lam2"][jobs], window["lam3"][jobs])  # (n, K+1)
    free_gpu = gpus.copy()
    free_srv = np.asarray(topo.server_bw).min(axis=1).astype(np.float64)
    free_rack = np.asarray(topo.rack_bw).min(axis=1).astype(np.float64)
    left = np.isfinite(logpi).any(axis=1)
    info = {"lp_value": 0.0, "value": 0.0, "tries": 0, "mappings": 0, "rounds": 0}
    for rnd in range(rounds if rounds > 0 else jobs.size):
        if not left.any() or free_gpu.sum() == 0:
            break
        best = logpi.max(axis=1)
        top = best[left].max()
        merge = rnd > 0 and q[left].sum() <= free_gpu.sum()
        cls = left if merge else left & (best >= top + np.log(1e-9))
        idx = np.flatnonzero(cls)
        w = np.exp(logpi[idx] - top)  # π / max π of the class; 0 where −inf
        if merge:  # every remaining job fits the GPUs left: one last round, weights floored at 1e-6
            w = np.where(np.isfinite(logpi[idx]), np.maximum(w, 1e-6), 0.0)
        w[:, 0] = 0.0
        yy = _alg2(w, q[idx], np.asarray(window["bw"], float)[jobs[idx]], free_gpu, free_srv, free_rack, topo, rng,
                   u_b, alpha, rounding_repair, reoffer, cache if rnd == 0 else None, info, top, logpi[idx],
                   fixed_sizes=merge)
        y[jobs[idx]] = yy
        left[idx] = False
        # capacity left after this round (cheapest-ring accounting)
        srv, rack = placement_loads(yy, np.asarray(window["bw"], float)[jobs[idx]], np.asarray(topo.rack_of),
                                    topo.num_racks)
        free_gpu = free_gpu - yy.sum(axis=0)
        free_srv = np.maximum(free_srv - srv, 0.0)  # a try may use up to 1e-9 more than is left: no drift
        free_rack = np.maximum(free_rack - rack, 0.0)
        info["rounds"] = rnd + 1
    if stats is not None:
        stats.update(info)
    if work_conserving:
        pi_rank = logpi.max(axis=1)
        _fill(y, window, topo, jobs, pi_rank, cap)
    return y


def _alg2(w, q, bw, free_gpu, free_srv, free_rack, topo, rng, u_b, alpha, rounding_repair, reoffer, cache, info,
          scale_log, true_log, fixed_sizes=False):
    """Algorithm 2 lines 3–9 for n jobs with increments w (n, K+1) on the capacity left; returns y (n, S)."""
    n, S = w.shape[0], free_gpu.shape[0]
    y = np.zeros((n, S), dtype=np.int64)
    kappa = _ring_sizes(w, q, float(free_gpu.sum()), fixed_sizes)  # line 3
    sel = np.flatnonzero(kappa > 0)
    if sel.size == 0:
        return y
    # line 4: embedding LP over candidate mappings (= the mapping/probability pairs of line 6)
    cand_all = _candidate_mappings(sel, kappa, bw, free_gpu, free_srv, free_rack, topo, cache)
    m = len(cand_all)
    if m == 0:
        return y
    A2, value, job_of, cap_vec = _embedding_lp(cand_all, sel, kappa, w, bw, free_gpu, free_srv, free_rack,
                                               topo.num_racks)
    phi = lp_max(value, A2, cap_vec)
    phi = np.zeros(m) if phi is None else phi
    lp_value = float(value @ phi)
    # lines 7–9: randomized rounding, u_b tries, keep the best capacity-respecting outcome
    ns = sel.size
    jval = w[sel, kappa[sel]]
    prio = true_log[sel, kappa[sel]]  # true log π_iκi: removal priority and tie-break of tries
    best_key, best_pick, tries = _rounding(phi, job_of, A2[ns:].toarray(), cap_vec[ns:] + 1e-9, jval, prio, rng, u_b,
                                           alpha, lp_value, rounding_repair, reoffer)
    scale = float(np.exp(scale_log))
    info["lp_value"] += lp_value * scale
    info["value"] += best_key[0] * scale
    info["tries"] += tries
    info["mappings"] += m
    if best_pick is not None:
        for t, col in enumerate(best_pick):
            if col >= 0:
                _, srv, cnt, _ = cand_all[col]
                y[sel[t], srv] = cnt
    return y


def _ring_sizes(w, q, G: float, fixed_sizes: bool) -> np.ndarray:
    """Alg. 2 line 3: the LP relaxation of (12) and the LP-based ring selection; κ (n,), 0 for a job with none.

    κ_i = argmax_{κ: χ̄_iκ > 0} π̄_iκ χ̄_iκ (first maximiser) over the LP max Σ π̄_iκ χ_iκ s.t. Σ_κ χ_iκ ≤ 1 and
    Σ_iκ κ χ_iκ ≤ G (the GPUs left), κ ≤ q_i. ``fixed_sizes``: the aggregate row is slack, κ_i = q_i."""
    n, K = w.shape[0], w.shape[1] - 1
    kappa = np.zeros(n, dtype=np.int64)
    ii, kk = np.nonzero((np.arange(1, K + 1)[None, :] <= q[:, None]) & (w[:, 1:] > 0))
    if ii.size == 0:
        return kappa
    kk = kk + 1
    c = -w[ii, kk]
    A = coo_matrix((np.concatenate([np.ones(ii.size), kk.astype(float)]),
                    (np.concatenate([ii, np.full(ii.size, n)]), np.tile(np.arange(ii.size), 2))),
                   shape=(n + 1, ii.size))
    if fixed_sizes:
        chi = (kk == q[ii]).astype(np.float64)  # the aggregate GPU row is slack: the exact LP takes κ = q_i
    else:
        chi = lp_max(-c, A, np.concatenate([np.ones(n), [G]]))
        chi = np.zeros(ii.size) if chi is None else chi
    score = np.where(chi > _TOL, w[ii, kk] * chi, -np.inf)
    best = np.full(n, -np.inf)
    for col in range(ii.size):  # κ_i = argmax_{κ: χ̄ > 0} π̄ χ̄ (first maximiser)
        if score[col] > best[ii[col]]:
            best[ii[col]], kappa[ii[col]] = score[col], kk[col]
    return kappa


def _candidate_mappings(sel, kappa, bw, free_gpu, free_srv, free_rack, topo, cache) -> list:
    """The candidate mappings (job, servers, counts, racks if multi-rack) of the κ_i-ring of every selected job
    (:func:`_candidates`), kept in ``cache`` by ring size and the links that have b_i left."""
    rack_of = np.asarray(topo.rack_of)
    cand_all: list = []
    for a in sel:
        k, b = int(kappa[a]), float(bw[a])
        key = (k, (free_srv + _TOL >= b).tobytes(), (free_rack + _TOL >= b).tobytes())
        cands = None if cache is None else cache.get(key)
        if cands is None:
            cands = _candidates(k, b, free_gpu, rack_of, free_srv, free_rack, topo.num_racks)
            if cache is not None:
                cache[key] = cands
        cand_all.extend((a, srv, cnt, racks) for srv, cnt, racks in cands)
    return cand_all


def _embedding_lp(cand_all, sel, kappa, w, bw, free_gpu, free_srv, free_rack, R: int):
    """The embedding LP of Alg. 2 line 4 over the candidate mappings: (A, value, job_of, cap) of
    max Σ value φ s.t. A φ ≤ cap, rows: one per selected job (eq. 13), then the GPUs per server (eqs. 16, 18), the
    server uplinks and the rack uplinks (eqs. 17, 19); job_of: the selected job (index into ``sel``) of each
    mapping."""
    S, ns, m = free_gpu.shape[0], sel.size, len(cand_all)
    a_index = {int(a): t for t, a in enumerate(sel)}
    rows, colidx, vals = [], [], []
    value = np.empty(m)
    job_of = np.empty(m, dtype=np.int64)
    for col, (a, srv, cnt, racks) in enumerate(cand_all):
        b = float(bw[a])
        value[col] = w[a, kappa[a]]
        job_of[col] = a_index[int(a)]
        rows.append(job_of[col]); colidx.append(col); vals.append(1.0)  # eq. 13
        rows.extend((ns + srv).tolist()); colidx.extend([col] * srv.size); vals.extend(cnt.astype(float).tolist())
        if srv.size > 1:  # eqs. 17, 19 on server uplinks
            rows.extend((ns + S + srv).tolist()); colidx.extend([col] * srv.size); vals.extend([b] * srv.size)
        if racks is not None:  # ... and on rack uplinks
            rows.extend((ns + 2 * S + racks).tolist()); colidx.extend([col] * racks.size); vals.extend([b] * racks.size)
    A2 = coo_matrix((vals, (rows, colidx)), shape=(ns + 2 * S + R, m)).tocsr()
    cap_vec = np.concatenate([np.ones(ns), free_gpu.astype(float), free_srv, free_rack])
    return A2, value, job_of, cap_vec


def _rounding(phi, job_of, dense, limit, jval, prio, rng, u_b, alpha, lp_value, rounding_repair, reoffer):
    """Alg. 2 lines 7–9: u_b tries of the randomized rounding, each drawn (line 8), repaired or discarded if it
    overfills a resource, kept if it beats the best so far; stop early once a try reaches α times the LP value.

    ``dense`` (D, m) loads of each mapping on every resource, ``limit`` (D,) the capacity left (+1e-9), ``jval``
    and ``prio`` (ns,) each job's weight and true log π_iκi. Returns (best (value, log Σ π), best pick (ns,) of
    mapping columns or -1, or None if no try was kept; tries made)."""
    ns = jval.size
    cols_by_job = [np.flatnonzero((job_of == t) & (phi > _TOL)) for t in range(ns)]  # M_i: φ_i^k > 0
    # M_i in decreasing φ (ties: column order) for the re-offer of dropped jobs
    support = [cs[np.argsort(-phi[cs], kind="stable")] for cs in cols_by_job]
    if reoffer == "candidates":  # then every other candidate mapping of the κ_i-ring, in column order
        support = [np.concatenate([sp, np.flatnonzero((job_of == t) & (phi <= _TOL))])
                   for t, sp in enumerate(support)]
    cums = [np.cumsum(phi[cs]) for cs in cols_by_job]
    best_key, best_pick = (0.0, -np.inf), None
    U = rng.random((u_b, ns))
    it = 0
    for it in range(u_b):
        pick = np.full(ns, -1)
        for t in range(ns):  # line 8: ω_i^k with probability φ_i^k, none with 1 − Σ_k φ_i^k
            h = int(np.searchsorted(cums[t], U[it, t], side="right"))
            if h < cols_by_job[t].size:
                pick[t] = cols_by_job[t][h]
        chosen = np.flatnonzero(pick >= 0)
        load = dense[:, pick[chosen]].sum(axis=1)
        if (load > limit).any():
            if not rounding_repair:
                continue
            keep = repair_overfill(dense[:, pick[chosen]], limit, jval[chosen], prio[chosen])
            dropped = chosen[~keep]
            pick[dropped] = -1
            if reoffer != "none" and dropped.size:
                load = dense[:, pick[pick >= 0]].sum(axis=1)
                reoffer_support(pick, dropped, support, dense, load, limit, prio)
        on = pick >= 0
        key = (float(jval[on].sum()), float(np.logaddexp.reduce(prio[on])) if on.any() else -np.inf)
        if key > best_key:
            best_key, best_pick = key, pick.copy()
        if best_pick is not None and best_key[0] >= alpha * lp_value - 1e-12:
            break
    return best_key, best_pick, it + 1


def _fill(y, window, topo, jobs, rank, cap) -> None:
    """Greedy ring placement of the jobs left empty, on the leftover capacity (option)."""
    gpus = np.asarray(topo.gpus, dtype=np.int64)
    rack_of = np.asarray(topo.rack_of)
    bw = np.asarray(window["bw"], dtype=np.float64)
    srv, rack = placement_loads(y, bw, rack_of, topo.num_racks)
    free_gpu = gpus - y.sum(axis=0)
    free_srv = np.asarray(topo.server_bw, dtype=np.float64) - srv[:, None]
    free_rack = np.asarray(topo.rack_bw, dtype=np.float64) - rack[:, None]
    empty = np.array([a for a in range(jobs.size) if y[jobs[a]].sum() == 0], dtype=np.int64)
    if empty.size == 0:
        return
    order = empty[np.argsort(-rank[empty], kind="stable")]  # largest increments first
    rows = jobs[order]
    for a, j in zip(order, rows):  # the largest ring ≤ min(N_i, budget left) that fits what is left
        for k in range(int(cap[j]), 0, -1):
            row, ok = place_one(k, bw[j], free_gpu, free_srv, free_rack, rack_of, topo.num_racks)
            if ok:
                y[j] = row
                break


class GADGET(BaseAgent):
    """GADGET for ``ringallreduce``: see the module docstring for the per-slot steps."""

    name = "gadget"
    families = ("ringallreduce",)

    def __init__(self, u_b: int = 20, alpha: float = 1.0, rounding_repair: bool = False, reoffer: str = "candidates",
                 work_conserving: bool = False, rounds: int = 0):
        if int(rounds) < 0:
            raise ValueError(f"rounds={rounds!r} is invalid: expected an integer >= 0 (0 = as many as needed)")
        self.rounds = int(rounds)
        if int(u_b) < 1:
            raise ValueError(f"u_b={u_b!r} is invalid: expected an integer >= 1")
        if not 0.0 <= float(alpha) <= 1.0:
            raise ValueError(f"alpha={alpha!r} is invalid: expected a number in [0, 1]")
        self.u_b, self.alpha = int(u_b), float(alpha)
        self.rounding_repair, self.work_conserving = bool(rounding_repair), bool(work_conserving)
        if reoffer not in ("none", "support", "candidates"):
            raise ValueError(f"reoffer={reoffer!r} is invalid: expected 'none', 'support' or 'candidates'")
        self.reoffer = reoffer

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        self._cache: dict = {}
        self.last_stats: dict = {}

    def act(self, obs, info):
        y = gadget_slot(info["window"], self.problem.topology, self.rng, u_b=self.u_b, alpha=self.alpha,
                        rounding_repair=self.rounding_repair, reoffer=self.reoffer,
                        work_conserving=self.work_conserving,
                        rounds=self.rounds, cache=self._cache, stats=self.last_stats)
        if self.problem.action_mode == "ring_size":
            return y.sum(axis=1)
        return y.reshape(-1)
