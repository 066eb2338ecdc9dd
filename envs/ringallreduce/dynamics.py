"""Greedy ring placement: the heuristic the paper's baselines use (gadget.md §VI.2).

"We place workers based on the simple heuristic that greedily allocates workers to servers where a
cycle can be attained." Our reading, for one job of kappa workers and ring bandwidth b:

1. **One server** (no network, Fig. 2(a)): the server with the fewest free GPUs that still holds
   kappa (best fit; ties: lowest index).
2. **One rack**: among servers with a free GPU whose uplink has b free in both directions, per
   rack in descending free GPUs (ties: index); the rack that needs the fewest servers (ties: lowest
   rack); its servers are filled in that order, the last one partly.
3. **Across racks**: the same over the servers of racks whose uplink also has b free both ways.
4. Otherwise the job is not placed this slot (0 workers).

Bandwidth is committed with the cheapest-ring accounting of :mod:`topology` (b on each used
server uplink when the job spans servers, b on each used rack uplink when it spans racks), so a
placement returned here is always feasible (eqs. 2–9). Jobs are placed one after another in the
caller's order against the remaining capacity. Compiled with numba (one call per slot).

The rest of this module is the per-slot core that the single env (``env.py``) and the native vector
env (``vector.py``) share:

* :func:`arrival_block` — the jobs arriving in ``BLOCK`` slots, drawn from the instance's job-stream
  generators (:func:`job_generators`, seeded by the instance, not by the episode's reset seed);
* :func:`size_slot_batch` — one slot of ``action_mode="ring_size"`` for N envs in one compiled call
  (the single env calls it with N = 1): the requested sizes checked against the window (eq. 6) and
  capped at min(N_i, budget left) (eqs. 2, 11), placed by the greedy placement above in window order,
  then each job's ring and the per-link loads (``topology.ring_stats_into``);
* :func:`settle` — the bookkeeping after a slot: attained service z_i and last workers of the visible
  jobs, then the jobs whose budget is used up leave (order kept); :func:`settle_batch` runs it for N
  envs and admits each env's arrivals of the next slot;
* :func:`size_infeasible_message` — the ``infeasible="raise"`` message of a ring-size step;
* :func:`check_placement` — one slot of ``action_mode="placement"`` (the single env only): the requested
  workers per job and server checked against eqs. 6, 2/11, 4 and 19 in that order and, under
  ``infeasible="repair"``, repaired phase by phase (see its docstring).

The utility gain of a slot is not computed here: both envs evaluate ``scenario.sigmoid_utility`` with
numpy on the executed workers, so every env computes the same floating-point values.
"""

from __future__ import annotations

import numba
import numpy as np

from clustergym.core.scenario import child_generators
from clustergym.envs.ringallreduce.scenario import draw_jobs
from clustergym.envs.ringallreduce.topology import ring_stats_into

__all__ = ["place_jobs", "place_one", "BLOCK", "JOB_FIELDS", "arrival_block", "job_generators", "size_slot_batch",
           "settle",
           "settle_batch", "size_infeasible_message", "SIZE_OK", "SIZE_EMPTY_ROW", "SIZE_OVER_CAP",
           "SIZE_NOT_PLACED", "check_placement", "PLACE_OK", "PLACE_EMPTY_ROW", "PLACE_OVER_CAP", "PLACE_OVER_GPUS",
           "PLACE_OVER_LINK"]

BLOCK = 256  # slots of arrivals drawn at once (same jobs as drawing slot by slot)
# columns of an active-job matrix (float64; integer-valued where the name says so): the job's id, arrival
# slot, N_i, budget (worker-slots), ζ_i, b_i, λ1..λ3, attained worker-slots z_i, workers in the last slot
JOB_FIELDS = ("id", "arrival", "workers", "budget", "zeta", "bw", "lam1", "lam2", "lam3", "z", "last")
_ID, _ARRIVAL, _WORKERS, _BUDGET, _BW, _Z, _LAST = 0, 1, 2, 3, 5, 9, 10
# status of a ring-size step (size_slot_batch) under infeasible="raise"
SIZE_OK, SIZE_EMPTY_ROW, SIZE_OVER_CAP, SIZE_NOT_PLACED = 0, 1, 2, 3
# status of a placement step (check_placement) under infeasible="raise"
PLACE_OK, PLACE_EMPTY_ROW, PLACE_OVER_CAP, PLACE_OVER_GPUS, PLACE_OVER_LINK = 0, 1, 2, 3, 4

_EPS = 1e-9


@numba.njit(cache=True, nogil=True)
def _place_one(k, b, free_gpu, free_srv, free_rack, rack_of, num_racks, row):  # pragma: no cover - compiled
    S = free_gpu.shape[0]
    for s in range(S):
        row[s] = 0
    if k <= 0:
        return True
    # 1. one server, best fit
    best = -1
    for s in range(S):
        if free_gpu[s] >= k and (best < 0 or free_gpu[s] < free_gpu[best]):
            best = s
    if best >= 0:
        row[best] = k
        free_gpu[best] -= k
        return True
    # servers usable by a multi-server ring: a free GPU and b free both ways on the uplink
    elig = np.zeros(S, dtype=np.bool_)
    for s in range(S):
        elig[s] = free_gpu[s] >= 1 and free_srv[s, 0] + _EPS >= b and free_srv[s, 1] + _EPS >= b
    idx = np.flatnonzero(elig)
    if idx.size == 0:
        return False
    order = idx[np.argsort(-free_gpu[idx], kind="mergesort")]  # descending free, ties by index
    # 2. one rack: fewest servers needed
    best_r, best_n = -1, S + 1
    for r in range(num_racks):
        tot, n = 0, 0
        for s in order:
            if rack_of[s] == r:
                tot += free_gpu[s]
                n += 1
                if tot >= k:
                    break
        if tot >= k and n < best_n:
            best_r, best_n = r, n
    chosen_rack = best_r
    if best_r < 0:
        # 3. across racks whose uplink has b free both ways
        tot = 0
        for s in order:
            r = rack_of[s]
            if free_rack[r, 0] + _EPS >= b and free_rack[r, 1] + _EPS >= b:
                tot += free_gpu[s]
        if tot < k:
            return False
    left = k
    for s in order:
        if left == 0:
            break
        r = rack_of[s]
        if chosen_rack >= 0:
            if r != chosen_rack:
                continue
        elif not (free_rack[r, 0] + _EPS >= b and free_rack[r, 1] + _EPS >= b):
            continue
        take = min(left, free_gpu[s])
        row[s] = take
        left -= take
    # commit GPUs and the ring's bandwidth (b each way on every used server uplink; on every used
    # rack uplink when the ring spans racks)
    used_rack = np.zeros(num_racks, dtype=np.bool_)
    for s in range(S):
        if row[s] > 0:
            free_gpu[s] -= row[s]
            free_srv[s, 0] -= b
            free_srv[s, 1] -= b
            used_rack[rack_of[s]] = True
    if chosen_rack < 0:
        for r in range(num_racks):
            if used_rack[r]:
                free_rack[r, 0] -= b
                free_rack[r, 1] -= b
    return True


@numba.njit(cache=True, nogil=True)
def _place_jobs(order, kappa, b, free_gpu, free_srv, free_rack, rack_of, num_racks, y):  # pragma: no cover
    placed = np.zeros(kappa.shape[0], dtype=np.bool_)
    for j in order:
        placed[j] = _place_one(kappa[j], b[j], free_gpu, free_srv, free_rack, rack_of, num_racks, y[j])
    return placed


def place_jobs(order, kappa, b, free_gpu, free_srv, free_rack, rack_of, num_racks: int):
    """Place jobs ``order`` (indices into ``kappa``/``b``) one by one; returns (y (J, S), placed (J,)).

    ``free_gpu`` (S,) int, ``free_srv`` (S, 2) and ``free_rack`` (R, 2) Gbps are updated in place.
    A job whose kappa workers cannot form a feasible ring gets no workers (``placed`` False).
    """
    kappa = np.asarray(kappa, dtype=np.int64)
    y = np.zeros((kappa.shape[0], free_gpu.shape[0]), dtype=np.int64)
    placed = _place_jobs(np.asarray(order, dtype=np.int64), kappa, np.asarray(b, dtype=np.float64),
                         free_gpu, free_srv, free_rack, rack_of, int(num_racks), y)
    return y, placed


def place_one(k, b, free_gpu, free_srv, free_rack, rack_of, num_racks: int):
    """One job; returns (y (S,), placed). Capacities are updated in place on success."""
    y, placed = place_jobs(np.array([0]), np.array([k]), np.array([b]), free_gpu, free_srv, free_rack, rack_of,
                           num_racks)
    return y[0], bool(placed[0])


# -- the per-slot core shared by the single and the vector env ------------------------------------------
def job_generators(truth) -> dict:
    """The generators of an instance's job stream, ``{"arrivals": ..., "jobs": ...}``, from its
    ``truth.job_seed`` (scenario module: the jobs are part of the instance). Each episode starts them anew,
    so every episode of an instance, whatever its reset seed, meets the same jobs."""
    return child_generators(np.random.default_rng(int(truth.job_seed)), ("arrivals", "jobs"))


def arrival_block(rngs: dict, truth, t0: int, next_id: int) -> np.ndarray:
    """(n, len(JOB_FIELDS)) float64: the jobs arriving in slots [t0, t0 + BLOCK), sorted by arrival, ids from
    ``next_id``; drawn from the instance's generators (:func:`job_generators`) ``rngs["arrivals"]`` (Poisson counts) and
    ``rngs["jobs"]`` (attributes, ``scenario.draw_jobs``), or the trace's arrivals in that window."""
    if truth.trace_slot is None:
        counts = rngs["arrivals"].poisson(truth.arrival_rate, size=BLOCK)
        arrival = np.repeat(np.arange(t0, t0 + BLOCK), counts)
        jobs = draw_jobs(rngs["jobs"], arrival, truth.params)
    else:
        lo, hi = np.searchsorted(truth.trace_slot, [t0, t0 + BLOCK])
        sl = slice(int(lo), int(hi))
        opt = lambda a: None if a is None else a[sl]  # noqa: E731
        jobs = draw_jobs(rngs["jobs"], truth.trace_slot[sl], truth.params, workers=opt(truth.trace_workers),
                         budget_iters=opt(truth.trace_budget_iters), zeta=opt(truth.trace_zeta),
                         lam3=opt(truth.trace_lambda3))
    n = jobs.arrival.shape[0]
    ids = np.arange(next_id, next_id + n)
    return np.column_stack([ids, jobs.arrival, jobs.workers, jobs.budget, jobs.zeta, jobs.bw, jobs.lam1,
                            jobs.lam2, jobs.lam3, np.zeros(n), np.zeros(n)]).astype(np.float64)


@numba.njit(cache=True, nogil=True)
def _size_slot(kappa, W, n, strict, gpus, srv_cap, rack_cap, num_racks, rack_of, ring_seq, k, y, w, rings,
               srv_load, rack_load, used):  # pragma: no cover - compiled
    """One env's ring-size slot; returns (status, window row, repaired). ``W`` (>= J, F): the window in its
    first n rows (zeros below); ``k`` (J,) scratch for the executed sizes."""
    J = kappa.shape[0]
    S = gpus.shape[0]
    status, where, repaired = SIZE_OK, -1, 0
    for j in range(J):
        cap = 0
        if j < n:  # eqs. 2 and 11: at most min(N_i, budget left) workers this slot
            cap = int(min(W[j, _WORKERS], W[j, _BUDGET] - W[j, _Z]))
        kj = kappa[j]
        if j >= n and kj > 0 and status == SIZE_OK:  # eq. 6: no workers for an empty window row
            status, where = SIZE_EMPTY_ROW, j
        k[j] = min(kj, cap)
    if strict and status == SIZE_OK:
        for j in range(J):
            if kappa[j] > k[j]:
                status, where = SIZE_OVER_CAP, j
                break
    if strict and status != SIZE_OK:
        return status, where, 0
    free_gpu = gpus.copy()
    free_srv = srv_cap.copy()
    free_rack = rack_cap[:num_racks].copy()
    for j in range(J):
        placed = _place_one(k[j], W[j, _BW], free_gpu, free_srv, free_rack, rack_of, num_racks, y[j])
        failed = k[j] > 0 and not placed
        if failed and status == SIZE_OK:
            status, where = SIZE_NOT_PLACED, j
        if failed or k[j] != kappa[j]:
            repaired += 1
    if strict and status != SIZE_OK:
        return status, where, 0
    for s in range(S):
        used[s] = 0
    for j in range(J):
        tot = 0
        for s in range(S):
            tot += y[j, s]
            used[s] += y[j, s]
        w[j] = tot
    ring_stats_into(y, W[:J, _BW], ring_seq, rack_of, num_racks, rings, srv_load, rack_load)
    return SIZE_OK, -1, repaired


@numba.njit(cache=True, nogil=True)
def size_slot_batch(kappa, jobs, n_vis, stepping, strict, gpus, srv_cap, rack_cap, num_racks, rack_of, ring_seq,
                    y, w, rings, load, used, repaired, status, where):  # pragma: no cover - compiled
    """One ring-size slot of N envs (``action_mode="ring_size"``, module docstring). Env i (``stepping[i]``)
    reads its requested sizes ``kappa[i]`` (J,), its window ``jobs[i, :J]`` (the J oldest active jobs, zero rows
    beyond ``n_vis[i]``; columns ``JOB_FIELDS``) and its instance (``gpus[i]`` (S,), ``srv_cap[i]`` (S, 2),
    ``rack_cap[i]`` (R_max, 2) of which the first ``num_racks[i]`` rows are real, ``rack_of[i]``,
    ``ring_seq[i]``), and writes the executed workers ``y[i]`` (J, S), ``w[i]`` (J,), the rings ``rings[i]``
    (J, S), the per-link loads ``load[i]`` (S + R_max,: server uplinks, then rack uplinks, 0 beyond the
    instance's racks; the same both directions), the GPUs used ``used[i]`` (S,), ``repaired[i]`` and, under
    ``strict`` (infeasible="raise"), ``status[i]`` / ``where[i]`` (the first violation, else SIZE_OK / -1).
    Envs that do not step get zero rows. Nothing else is written: a step that raises changes no state."""
    N, J = kappa.shape
    S = gpus.shape[1]
    k = np.empty(J, dtype=np.int64)
    for i in range(N):
        status[i], where[i], repaired[i] = SIZE_OK, -1, 0
        if not stepping[i]:
            y[i] = 0
            w[i] = 0
            rings[i] = -1
            load[i] = 0.0
            used[i] = 0
            continue
        R = num_racks[i]
        st, wh, rep = _size_slot(kappa[i], jobs[i], n_vis[i], strict, gpus[i], srv_cap[i], rack_cap[i], R,
                                 rack_of[i], ring_seq[i], k, y[i], w[i], rings[i], load[i, :S], load[i, S:S + R],
                                 used[i])
        status[i], where[i], repaired[i] = st, wh, rep
        for li in range(S + R, load.shape[1]):
            load[i, li] = 0.0


@numba.njit(cache=True, nogil=True)
def settle(A, count, n, w):  # pragma: no cover - compiled
    """The bookkeeping of one env after a slot, in place on its active jobs ``A[:count]`` (arrival order):
    the n visible jobs add their workers ``w`` (J,) to z_i and record them as the last slot's, then the jobs
    whose budget is used up leave (only visible jobs progress), the others keep their order; the vacated rows
    are zeroed. Returns the new count."""
    for j in range(n):
        A[j, _Z] += w[j]
        A[j, _LAST] = w[j]
    m = 0
    for r in range(count):
        if r < n and A[r, _Z] >= A[r, _BUDGET]:
            continue
        if m != r:
            A[m, :] = A[r, :]
        m += 1
    for r in range(m, count):
        A[r, :] = 0.0
    return m


@numba.njit(cache=True, nogil=True)
def settle_batch(jobs, count, n_vis, w, stepping, block, lo, hi, max_jobs):  # pragma: no cover - compiled
    """:func:`settle` for every env that steps, then its arrivals of the next slot (``block[i, lo[i]:hi[i]]``)
    join the end of its active jobs (``jobs[i]`` must have room: the caller grows it); updates ``count`` and
    ``n_vis`` = min(max_jobs, count) in place."""
    N = jobs.shape[0]
    for i in range(N):
        if not stepping[i]:
            continue
        c = settle(jobs[i], count[i], n_vis[i], w[i])
        for r in range(lo[i], hi[i]):
            jobs[i, c, :] = block[i, r, :]
            c += 1
        count[i] = c
        n_vis[i] = min(max_jobs, c)


@numba.njit(cache=True, nogil=True)
def check_placement(y0, present, cap, gpus, bw, rack_of, num_racks, link_cap, strict, y,
                    load):  # pragma: no cover - compiled
    """One placement slot: the requested workers ``y0`` (J, S) -> the executed ``y`` (J, S); returns
    (status, where, repaired rows). ``present`` (J,) window rows holding a job, ``cap`` (J,) min(N_i, budget
    left), ``gpus`` (S,), ``bw`` (J,) Gbps, ``link_cap`` (S + R, 2) server then rack uplinks (up, down);
    ``load`` (S + R,) receives the per-link loads of the placement after the eq. 4 phase.

    The phases, each on the result of the one before (``infeasible="repair"``):

    1. eq. 6: a row without a job gets no workers;
    2. eqs. 2, 11: a job keeps its workers server by server in index order up to its cap;
    3. eq. 4: a server keeps workers job by job in window order up to its GPUs;
    4. eq. 19: if a link is over its capacity (either direction, 1e-9 Gbps slack), the rings are admitted
       in window order against the bandwidth left (the smaller direction of each link): a multi-server job
       whose ring needs more than is left on one of its links gets no workers.

    Under ``strict`` (``infeasible="raise"``) nothing is repaired: the first violated phase returns its
    status (``PLACE_*``) and ``where``: the window row (phases 1, 2), the server (3), or 2 * link +
    direction (4), with ``load`` filled for phase 4."""
    J, S = y0.shape
    j = _drop_empty_rows(y0, present, strict, y)  # phase 1 (eq. 6)
    if j >= 0:
        return PLACE_EMPTY_ROW, j, 0
    for j in range(J):  # phase 2 (eqs. 2, 11): the workers on lower-index servers come first
        if _keep_in_order(y[j, :], cap[j], strict):
            return PLACE_OVER_CAP, j, 0
    for s in range(S):  # phase 3 (eq. 4): the workers of earlier window rows come first
        if _keep_in_order(y[:, s], gpus[s], strict):
            return PLACE_OVER_GPUS, s, 0
    on_rack = np.zeros(num_racks, dtype=np.bool_)
    _ring_loads(y, bw, rack_of, num_racks, on_rack, load)  # phase 4 (eq. 19)
    over = -1
    for li in range(S + num_racks):
        for d in range(2):
            if over < 0 and load[li] > link_cap[li, d] + _EPS:
                over = 2 * li + d
    if over >= 0:
        if strict:
            return PLACE_OVER_LINK, over, 0
        _admit_rings(y, bw, rack_of, num_racks, link_cap, on_rack)
    return PLACE_OK, -1, _rows_changed(y, y0)


@numba.njit(cache=True, nogil=True)
def _drop_empty_rows(y0, present, strict, y):  # pragma: no cover - compiled
    """Phase 1 of :func:`check_placement` (eq. 6): ``y`` = ``y0`` without the workers of window rows that hold no
    job. Returns the first such row with workers under ``strict`` (``y`` then written up to it), else -1."""
    J, S = y0.shape
    for j in range(J):
        for s in range(S):
            v = y0[j, s]
            if not present[j] and v > 0:
                if strict:
                    return j
                v = 0
            y[j, s] = v
    return -1


@numba.njit(cache=True, nogil=True)
def _ring_loads(y, bw, rack_of, num_racks, on_rack, load):  # pragma: no cover - compiled
    """The per-link loads of placement ``y`` into ``load`` (S + R,), the same both directions: each job's cheapest
    ring puts b_i on every server uplink it uses when it spans servers, and on every rack uplink it uses when it
    spans racks (``on_rack`` (R,) scratch)."""
    J, S = y.shape
    for li in range(S + num_racks):
        load[li] = 0.0
    for j in range(J):
        if _ring_racks(y[j], rack_of, on_rack) == 0:
            continue
        for s in range(S):
            if y[j, s] > 0:
                load[s] += bw[j]
        if _count(on_rack) > 1:
            for r in range(num_racks):
                if on_rack[r]:
                    load[S + r] += bw[j]


@numba.njit(cache=True, nogil=True)
def _admit_rings(y, bw, rack_of, num_racks, link_cap, on_rack):  # pragma: no cover - compiled
    """The repair of phase 4 (eq. 19), in place on ``y``: the rings are admitted in window order against the
    bandwidth left (the smaller direction of each link); a multi-server job whose ring needs more than is left on
    one of its links gets no workers."""
    J, S = y.shape
    free = np.empty(S + num_racks)
    for li in range(S + num_racks):
        free[li] = min(link_cap[li, 0], link_cap[li, 1])
    for j in range(J):
        if _ring_racks(y[j], rack_of, on_rack) == 0:
            continue
        multirack = _count(on_rack) > 1
        fits = True
        for s in range(S):
            if y[j, s] > 0 and free[s] + _EPS < bw[j]:
                fits = False
        for r in range(num_racks):
            if multirack and on_rack[r] and free[S + r] + _EPS < bw[j]:
                fits = False
        if fits:
            for s in range(S):
                if y[j, s] > 0:
                    free[s] -= bw[j]
            for r in range(num_racks):
                if multirack and on_rack[r]:
                    free[S + r] -= bw[j]
        else:
            y[j, :] = 0


@numba.njit(cache=True, nogil=True)
def _rows_changed(y, y0):  # pragma: no cover - compiled
    """The number of rows of ``y`` that differ from ``y0`` (the repaired rows)."""
    J, S = y.shape
    repaired = 0
    for j in range(J):
        for s in range(S):
            if y[j, s] != y0[j, s]:
                repaired += 1
                break
    return repaired


@numba.njit(cache=True, nogil=True)
def _keep_in_order(v, limit, strict):  # pragma: no cover - compiled
    """Keep the entries of ``v`` (a row or column of y, in place) in order up to ``limit`` in total: each is cut
    to what is left of the limit after the ones before it (the original values count). Returns True at the
    first entry that is over (and changes nothing) under ``strict``, else False."""
    before = 0
    for i in range(v.shape[0]):
        x = v[i]
        room = max(limit - before, 0)
        before += x
        if x > room:
            if strict:
                return True
            v[i] = room
    return False


@numba.njit(cache=True, nogil=True)
def _ring_racks(row, rack_of, on_rack):  # pragma: no cover - compiled
    """The racks of a job's ring into ``on_rack``; returns its number of servers, or 0 if it uses fewer than
    two (no ring, no network)."""
    on_rack[:] = False
    m = 0
    for s in range(row.shape[0]):
        if row[s] > 0:
            m += 1
            on_rack[rack_of[s]] = True
    return m if m >= 2 else 0


@numba.njit(cache=True, nogil=True)
def _count(mask):  # pragma: no cover - compiled
    n = 0
    for v in mask:
        n += 1 if v else 0
    return n


def size_infeasible_message(status: int, j: int, asked: int, row: np.ndarray) -> str:
    """The ``infeasible="raise"`` message of a ring-size step whose first violation (``status``, from
    :func:`size_slot_batch`) is at window row j, which asked ``asked`` workers; ``row``: that window row
    (``JOB_FIELDS``)."""
    if status == SIZE_EMPTY_ROW:
        msg = f"window row {j} has no job but gets {asked} workers (eq. 6)"
    elif status == SIZE_OVER_CAP:
        n_i = int(row[_WORKERS])
        cap = int(min(row[_WORKERS], row[_BUDGET] - row[_Z]))
        eq = "N_i = %d (eq. 2)" % n_i if asked > n_i else f"remaining budget {cap} (eq. 11)"
        msg = f"job {int(row[_ID])} (window row {j}) asks {asked} workers > {eq}"
    elif status == SIZE_NOT_PLACED:
        msg = (f"no feasible ring placement for {asked} workers of job {int(row[_ID])} (window row {j}) in the "
               f"GPUs and bandwidth left (eqs. 4, 19)")
    else:
        raise ValueError(f"status={status!r} is not a violation")
    return f"infeasible action: {msg}"
