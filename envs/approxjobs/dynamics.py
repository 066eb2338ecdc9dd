"""The ApproxJobs envs' slot step, with the array kernels it shares with the agents (opm.md §III–V; they
live in :mod:`clustergym.envs.approxjobs.kernels` and are re-exported here).

The slot step (:class:`SlotState`, compiled :func:`slot_step_batch`) is the one simulator core of the
single env (N = 1) and the native vector env (N sub-envs): the deal of "job" mode, the budget check
and repair (eq. 4, Algorithm 1 lines 7–12), the work and utility gains (eqs. 1–2), the per-machine
statistics (``stats.record_slot``) and the window / queue bookkeeping, for every env in one call. Sums
are taken in the order numpy takes them (``np.bincount``'s running sums, ``np.cumsum``, and numpy's
pairwise ``sum`` through ``channel.dynamics.numpy_sum``), so the step returns what the numpy code it
replaced returned; f_j(X) = v_j X^β_j uses the C library's ``pow`` (numpy's vectorised ``np.power`` may
differ from it in the last bit).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from clustergym.envs.approxjobs.kernels import TOL as _TOL
from clustergym.envs.approxjobs.kernels import (budget_prefix, confidence_radius, deal_kernel, deal_machines,
                                                project_capped_simplex, round_rows, ucb_rates)
from clustergym.envs.approxjobs.learner_stats import MachineStats, record_slot
from clustergym.envs.multiserver.channel.dynamics import numpy_sum

__all__ = ["project_capped_simplex", "round_rows", "budget_prefix", "deal_machines", "deal_kernel",
           "confidence_radius", "ucb_rates", "JOB_FEATURES", "JOB_LEVELS", "RATE_BLOCK", "SlotState", "SlotResult",
           "admit", "slot_step_batch", "infeasible_message"]

JOB_FEATURES = ("job_id", "arrival", "deadline", "budget", "spent", "value", "beta", "work")  # observation rows
JOB_LEVELS = 10  # S: "job" mode levels; level s caps a job at round(s·M/S) machines
RATE_BLOCK = 256  # slots of service rates drawn at once (fixed: the realisation depends on it)
_BUDGET, _SPENT, _WORK = 3, 4, 7  # columns of JOB_FEATURES


# -- the envs' slot step ------------------------------------------------------------------------------
# One env's arrays (rows of SlotState's (N, ...) arrays): ``jobs`` (5, n) float64 job table (rows arrival a_j,
# deadline d_j, budget B_j, value v_j, β_j; job ids are column indices, sorted by arrival); per job ``spent``,
# ``work`` (X_j), ``util`` (f_j(X_j)) float64 and ``left`` bool; the FIFO ``queue`` of job ids; ``ctr`` = [next job
# to arrive, queue length]; per window slot ``slot_job`` (-1 = empty), ``slot_rem`` (B_j − spent_j, -1 = empty),
# ``slot_deadline`` (d_j, inf = empty), ``feat`` (J, 8) the observation rows and ``live`` (J,) bool (occupied
# and B_j − spent_j >= the cheapest price: the slots "job" mode deals to and its mask allows).

@numba.njit(cache=True, nogil=True)
def admit(t, jobs, n_jobs, min_price, spent, work, left, slot_job, slot_rem, slot_deadline, feat, live, queue,
          ctr):  # pragma: no cover - compiled
    """Before slot s = t+1, for one env: arrivals with a_j <= t join the queue; the jobs past their deadline
    or unable to pay the cheapest price leave their window slot; queued jobs past their deadline leave; the
    free window slots (ascending) take the queue's first jobs (FIFO); then the live slots."""
    s = t + 1
    J = slot_job.shape[0]
    nxt, q = ctr[0], ctr[1]
    while nxt < n_jobs and jobs[0, nxt] <= t:
        queue[q] = nxt
        q += 1
        nxt += 1
    for k in range(J):
        if slot_deadline[k] < s or (slot_rem[k] < min_price and slot_job[k] >= 0):
            left[slot_job[k]] = True
            slot_job[k] = -1
            slot_rem[k] = -1.0
            slot_deadline[k] = np.inf
            feat[k, :] = 0.0
    if q > 0:
        w = 0
        for r in range(q):  # expired while waiting
            j = queue[r]
            if jobs[1, j] >= s:
                queue[w] = j
                w += 1
            else:
                left[j] = True
        q = w
        r = 0
        for k in range(J):
            if r >= q:
                break
            if slot_job[k] < 0:
                j = queue[r]
                r += 1
                slot_job[k] = j
                slot_rem[k] = jobs[2, j] - spent[j]
                slot_deadline[k] = jobs[1, j]
                feat[k, 0] = j
                feat[k, 1] = jobs[0, j]
                feat[k, 2] = jobs[1, j]
                feat[k, 3] = jobs[2, j]
                feat[k, 4] = spent[j]
                feat[k, 5] = jobs[3, j]
                feat[k, 6] = jobs[4, j]
                feat[k, 7] = work[j]
        for a in range(r, q):
            queue[a - r] = queue[a]
        q -= r
    ctr[0], ctr[1] = nxt, q
    for k in range(J):  # from the public rows, as an agent reads them (baselines.approxjobs.Fair)
        live[k] = slot_job[k] >= 0 and feat[k, _BUDGET] - feat[k, _SPENT] >= min_price - _TOL


@numba.njit(cache=True, nogil=True)
def _plan(action, job_mode, repair, order, price, level_cap, slot_job, slot_rem, feat, live,
          act):  # pragma: no cover - compiled
    """One env's machine action ``act`` (M,) for the slot, without changing any state: "job" mode deals the
    machines to the live slots under the levels' caps (:func:`deal_kernel`); then tasks for empty window
    slots are dropped and each job keeps the affordable prefix of its tasks (``budget_prefix``: window slots
    ascending, machine order inside, one running sum), both counted in ``dropped``. Returns (status, where,
    dropped): status 0, or with ``repair`` False the first violation: 1 = machine ``where`` is given an empty
    window slot, 2 = window slot ``where`` (1-based) is over its budget."""
    M = price.shape[0]
    J = slot_job.shape[0]
    if job_mode:
        rem = np.empty(J)
        cap = np.empty(J, np.int64)
        sel = np.empty(J, np.int64)
        n = 0
        for k in range(J):
            cap[k] = level_cap[action[k]]
            rem[k] = feat[k, _BUDGET] - feat[k, _SPENT] if slot_job[k] >= 0 else -1.0
            if live[k] and cap[k] > 0:
                sel[n] = k
                n += 1
        act[:] = 0
        deal_kernel(order, price, rem, sel[:n], cap, act)
    else:
        for i in range(M):
            act[i] = action[i]
    dropped = 0
    for i in range(M):  # tasks for an empty window slot
        if act[i] > 0 and slot_rem[act[i] - 1] < 0:
            if not repair:
                return 1, i, 0
            act[i] = 0
            dropped += 1
    per = np.zeros(J)  # price per window slot (np.bincount: a running sum in machine order)
    ntask = 0
    for i in range(M):
        if act[i] > 0:
            per[act[i] - 1] += price[i]
            ntask += 1
    over = False
    for k in range(J):
        if per[k] > max(slot_rem[k], 0.0) + _TOL:
            over = True
    if not over:
        return 0, -1, dropped
    start = np.zeros(J + 1, np.int64)  # tasks grouped by window slot (stable: machine order inside)
    for i in range(M):
        if act[i] > 0:
            start[act[i]] += 1
    for k in range(J):
        start[k + 1] += start[k]
    fill = start.copy()
    tasks = np.empty(ntask, np.int64)
    for i in range(M):
        if act[i] > 0:
            tasks[fill[act[i] - 1]] = i
            fill[act[i] - 1] += 1
    bad = np.zeros(M, np.bool_)
    g = 0.0
    for k in range(J):
        base = g
        for a in range(start[k], start[k + 1]):
            i = tasks[a]
            g += price[i]
            if not g - base <= slot_rem[k] + _TOL:
                bad[i] = True
    for i in range(M):
        if bad[i]:
            if not repair:
                return 2, act[i], 0
            act[i] = 0
            dropped += 1
    return 0, -1, dropped


@numba.njit(cache=True, nogil=True)
def _apply(act, price, theta, t, jobs, n_jobs, min_price, spent, work, util, left, slot_job, slot_rem,
           slot_deadline, feat, live, queue, ctr, prev_job, prev_slot, count, total, last_executed, last_work,
           job_m, work_m, cost_m):  # pragma: no cover - compiled
    """One env's slot with the checked machine action ``act``: work r = θ_i^t on every used machine (eq. 1),
    prices paid, utilities f_j(X_j) = v_j X_j^β_j (eq. 2), the feedback per machine, the statistics, the
    migrations (Fig. 3b), then :func:`admit` for the next slot. Returns (reward, price paid, change of Σ_j
    max(0, spent_j − B_j), busy machines, migrations, done: every job has left)."""
    M = price.shape[0]
    J = slot_job.shape[0]
    add = np.zeros(J)  # price paid per window slot
    gain = np.zeros(J)  # work done per window slot
    cost = np.empty(M)  # prices of the used machines, machine order
    busy = 0
    for i in range(M):
        k = act[i]
        if k > 0:
            add[k - 1] += price[i]
            gain[k - 1] += theta[i]
            cost[busy] = price[i]
            busy += 1
            job_m[i] = slot_job[k - 1]
            work_m[i] = theta[i]  # r_j^i(t) = θ_i^t x_j^i(t)
            cost_m[i] = price[i]
        else:
            job_m[i] = -1
            work_m[i] = 0.0
            cost_m[i] = 0.0
    over = np.empty(J)  # per served job: max(add − rem, 0), max(−rem, 0) (eq. 8) and f_j gain
    under = np.empty(J)
    du = np.empty(J)
    n = 0
    for k in range(J):
        if add[k] > 0:
            j = slot_job[k]
            work[j] += gain[k]  # eq. 1
            spent[j] += add[k]
            rem = slot_rem[k]
            slot_rem[k] = rem - add[k]
            over[n] = max(add[k] - rem, 0.0)
            under[n] = max(-rem, 0.0)
            u = jobs[3, j] * work[j] ** jobs[4, j]  # f_j(X) = v_j X^β_j (§VI)
            du[n] = u - util[j]
            util[j] = u
            feat[k, _SPENT] = spent[j]
            feat[k, _WORK] = work[j]
            n += 1
    reward = numpy_sum(du, n)
    fit = numpy_sum(over, n) - numpy_sum(under, n)
    paid = numpy_sum(cost, busy)
    migrations = 0  # machine i ran job j last slot, j still holds that window slot, i no longer runs it there
    for i in range(M):
        ps = prev_slot[i]
        if ps > 0 and act[i] != ps and slot_job[ps - 1] == prev_job[i]:
            migrations += 1
        prev_slot[i] = act[i]
        prev_job[i] = slot_job[act[i] - 1] if act[i] > 0 else -1
    record_slot(count, total, last_executed, last_work, act, work_m)
    admit(t + 1, jobs, n_jobs, min_price, spent, work, left, slot_job, slot_rem, slot_deadline, feat, live, queue,
          ctr)
    done = n_jobs > 0 and ctr[0] >= n_jobs and ctr[1] == 0
    for k in range(J):
        if slot_job[k] >= 0:
            done = False
    return reward, paid, fit, busy, migrations, done


@numba.njit(cache=True, nogil=True)
def slot_step_batch(actions, job_mode, repair, stepping, t, order, price, min_price, level_cap, blocks, pos, jobs,
                    n_jobs, spent, work, util, left, queue, ctr, slot_job, slot_rem, slot_deadline, feat, live,
                    prev_job, prev_slot, count, total, last_executed, last_work, act, job_m, work_m, cost_m, status,
                    where, dropped, busy, migrations, done, reward, paid, fit):  # pragma: no cover - compiled
    """One slot of the N envs where ``stepping`` (N,) is True (arrays with a leading N axis; see
    :class:`SlotState`). First every env's machine action is planned (:func:`_plan`, no state change); if
    one is rejected (``repair`` False) nothing changes and False is returned (``status``, ``where``).
    Otherwise every stepping env plays its slot with θ = ``blocks[i, pos[i]]`` (:func:`_apply`) and True is
    returned. Outputs (N, M): ``act`` (the window slot each machine ran, 0 = idle), ``job_m``, ``work_m``,
    ``cost_m``; (N,): ``status``, ``where``, ``dropped``, ``busy``, ``migrations``, ``done``, ``reward``,
    ``paid``, ``fit`` (0 for the envs not stepping)."""
    N = stepping.shape[0]
    ok = True
    for i in range(N):
        status[i], where[i], dropped[i] = 0, -1, 0
        if stepping[i]:
            status[i], where[i], dropped[i] = _plan(actions[i], job_mode, repair, order, price[i], level_cap,
                                                    slot_job[i], slot_rem[i], feat[i], live[i], act[i])
            if status[i] != 0:
                ok = False
    if not ok:
        return False
    for i in range(N):
        if not stepping[i]:
            act[i, :] = 0
            job_m[i, :] = -1
            work_m[i, :] = 0.0
            cost_m[i, :] = 0.0
            busy[i], migrations[i], done[i] = 0, 0, False
            reward[i], paid[i], fit[i] = 0.0, 0.0, 0.0
            continue
        reward[i], paid[i], fit[i], busy[i], migrations[i], done[i] = _apply(
            act[i], price[i], blocks[i, pos[i]], t[i], jobs[i], n_jobs[i], min_price[i], spent[i], work[i], util[i],
            left[i], slot_job[i], slot_rem[i], slot_deadline[i], feat[i], live[i], queue[i], ctr[i], prev_job[i],
            prev_slot[i], count[i], total[i], last_executed[i], last_work[i], job_m[i], work_m[i], cost_m[i])
    return True


class SlotResult(NamedTuple):
    """What one call of :meth:`SlotState.step` returns (arrays with a leading N axis, fresh every call)."""

    ok: bool  # False: a sub-env's action was rejected (infeasible="raise"); nothing changed
    slot: np.ndarray  # (N, M) int64 window slot each machine ran (1-based; 0 = idle); on rejection the action
    job_id: np.ndarray  # (N, M) int64 its job (-1 = idle)
    work: np.ndarray  # (N, M) float64 r_j^i(t) (0 when idle)
    cost: np.ndarray  # (N, M) float64 p_i if it ran, else 0
    status: np.ndarray  # (N,) int64 0, or the rejection (see _plan)
    where: np.ndarray  # (N,) int64 the machine / window slot of the rejection
    dropped: np.ndarray  # (N,) int64 tasks dropped by the repair
    busy: np.ndarray  # (N,) int64 machines that ran
    migrations: np.ndarray  # (N,) int64 (Fig. 3b)
    done: np.ndarray  # (N,) bool every job has left
    reward: np.ndarray  # (N,) float64 Σ_j f_j(X_j(t)) − f_j(X_j(t−1))
    paid: np.ndarray  # (N,) float64 prices paid this slot
    fit: np.ndarray  # (N,) float64 change of Σ_j max(0, spent_j − B_j) (eq. 8)


class SlotState:
    """The state of N ApproxJobs envs as arrays with a leading N axis (the single env is N = 1), their
    instances' data, and the slot step :meth:`step` (one call of :func:`slot_step_batch` for all of them).

    Each env runs its own instance (:meth:`load`): prices, the job table (``jobs`` (N, 5, cap), columns past
    its ``n_jobs`` unused) and per-job arrays of capacity ``cap``, doubled when an instance has more jobs.
    Its hidden rates θ come in blocks of RATE_BLOCK slots (``blocks`` (N, RATE_BLOCK, M), the current slot
    ``pos``), set by the caller from the env's own ``service.ServiceProcess``.
    """

    # the per-job arrays, of capacity ``cap`` (set by ``_alloc_jobs``)
    jobs: np.ndarray  # (N, 5, cap) arrival, deadline, budget, value, β per job
    spent: np.ndarray  # (N, cap) paid so far
    work: np.ndarray  # (N, cap) X_j so far
    util: np.ndarray  # (N, cap) f_j(X_j) so far
    left: np.ndarray  # (N, cap) bool: the job has left
    queue: np.ndarray  # (N, cap) int64: the jobs waiting for a window slot

    def __init__(self, num_envs: int, num_machines: int, max_jobs: int, cap: int = 1):
        N, M, J = num_envs, num_machines, max_jobs
        self.N, self.M, self.J = N, M, J
        self.order = np.arange(M)  # (M,) "job" mode: machines dealt in index order
        # level s caps a job at round(s·M/S) machines (integer arithmetic: level S = all M)
        self.level_cap = (np.arange(JOB_LEVELS + 1) * M + JOB_LEVELS // 2) // JOB_LEVELS  # (S+1,)
        self.price = np.zeros((N, M))  # (N, M) p_i
        self.min_price = np.zeros(N)  # (N,) min_i p_i
        self.n_jobs = np.zeros(N, dtype=np.int64)  # (N,) jobs of each env's instance
        self.cap = 0
        self._alloc_jobs(max(int(cap), 1))
        self.slot_job = np.full((N, J), -1, dtype=np.int64)  # (N, J) job id per window slot, -1 = empty
        self.slot_rem = np.full((N, J), -1.0)  # (N, J) remaining budget per window slot, -1 = empty
        self.slot_deadline = np.full((N, J), np.inf)  # (N, J) d_j per window slot, inf = empty
        # (N, J, 8) observation rows, float64 so that agents read budgets exactly (a float32 remaining budget
        # could be off by 1e-3 and overspend)
        self.feat = np.zeros((N, J, len(JOB_FEATURES)))
        self.live = np.zeros((N, J), dtype=bool)  # (N, J) occupied and able to pay the cheapest price
        self.ctr = np.zeros((N, 2), dtype=np.int64)  # (N, 2) next job to arrive, queue length
        self.prev_job = np.full((N, M), -1, dtype=np.int64)  # (N, M) job each machine ran last slot
        self.prev_slot = np.zeros((N, M), dtype=np.int64)  # (N, M) its window slot (0 = idle)
        self.stats = MachineStats(N, M)  # the learner's statistics (learner_stats.py)
        self.blocks = np.zeros((N, RATE_BLOCK, M))  # (N, B, M) θ_i^t of the current block (hidden)
        self.pos = np.zeros(N, dtype=np.int64)  # (N,) current slot's index in the block

    def _alloc_jobs(self, cap: int) -> None:
        """Per-job arrays of capacity ``cap`` (the rows' contents kept)."""
        old, N = self.cap, self.N
        arrays = {"jobs": ((N, 5, cap), np.float64), "spent": ((N, cap), np.float64),
                  "work": ((N, cap), np.float64), "util": ((N, cap), np.float64), "left": ((N, cap), np.bool_),
                  "queue": ((N, cap), np.int64)}
        for name, (shape, dtype) in arrays.items():
            a: np.ndarray = np.zeros(shape, dtype=dtype)
            if old:
                a[..., :old] = getattr(self, name)
            setattr(self, name, a)
        self.cap = cap

    def load(self, i: int, problem, jobs) -> None:
        """Env ``i`` runs the instance of ``problem`` (prices) and ``jobs`` (``scenario.JobList``)."""
        n = len(jobs)
        if n > self.cap:
            self._alloc_jobs(max(n, 2 * self.cap))
        self.price[i] = problem.price
        self.min_price[i] = float(self.price[i].min())
        self.n_jobs[i] = n
        self.jobs[i] = 0.0
        for row, col in enumerate((jobs.arrival, jobs.deadline, jobs.budget, jobs.value, jobs.beta)):
            self.jobs[i, row, :n] = col

    def start(self, i: int, block: np.ndarray) -> None:
        """Env ``i`` starts an episode (t = 0) with the first block of rates ``block`` (RATE_BLOCK, M)."""
        for a in (self.spent, self.work, self.util):
            a[i] = 0.0
        self.left[i] = False
        self.slot_job[i] = -1
        self.slot_rem[i] = -1.0
        self.slot_deadline[i] = np.inf
        self.feat[i] = 0.0
        self.ctr[i] = 0
        self.prev_job[i] = -1
        self.prev_slot[i] = 0
        self.stats.reset(i)
        self.blocks[i] = block
        self.pos[i] = 0
        admit(0, self.jobs[i], self.n_jobs[i], self.min_price[i], self.spent[i], self.work[i], self.left[i],
              self.slot_job[i], self.slot_rem[i], self.slot_deadline[i], self.feat[i], self.live[i], self.queue[i],
              self.ctr[i])

    def step(self, actions: np.ndarray, t: np.ndarray, stepping: np.ndarray, job_mode: bool,
             repair: bool) -> SlotResult:
        """One slot of the envs where ``stepping`` (N,) bool; ``actions`` (N, J) int64 levels ("job" mode) or
        (N, M) int64 machine actions, in range; ``t`` (N,) slots elapsed. The caller advances ``pos`` and ``t``
        and refills ``blocks`` (a step never reads past the block)."""
        N, M = self.N, self.M
        act = np.empty((N, M), dtype=np.int64)
        job_m = np.empty((N, M), dtype=np.int64)
        work_m = np.empty((N, M))
        cost_m = np.empty((N, M))
        ints = np.empty((5, N), dtype=np.int64)  # status, where, dropped, busy, migrations
        done = np.empty(N, dtype=bool)
        floats = np.empty((3, N))  # reward, paid, fit
        st = self.stats
        ok = slot_step_batch(actions, job_mode, repair, stepping, t, self.order, self.price, self.min_price,
                             self.level_cap, self.blocks, self.pos, self.jobs, self.n_jobs, self.spent, self.work,
                             self.util, self.left, self.queue, self.ctr, self.slot_job, self.slot_rem,
                             self.slot_deadline, self.feat, self.live, self.prev_job, self.prev_slot, st.count,
                             st.total, st.last_executed, st.last_work, act, job_m, work_m, cost_m, ints[0], ints[1],
                             ints[2], ints[3], ints[4], done, floats[0], floats[1], floats[2])
        return SlotResult(bool(ok), act, job_m, work_m, cost_m, ints[0], ints[1], ints[2], ints[3], ints[4], done,
                          floats[0], floats[1], floats[2])

    def job_mask(self) -> np.ndarray:
        """(N, J) int8: window slot occupied."""
        return (self.slot_job >= 0).astype(np.int8)

    def action_masks(self, job_mode: bool) -> np.ndarray:
        """(N, J·(S+1)) bool in "job" mode (per window slot [level 0, ..., level S]: every level for a live
        job, level 0 only otherwise), else (N, M·(J+1)) (per machine [idle, slot 1, ..., slot J]: idle always,
        slot k when its job's remaining budget covers p_i)."""
        N = self.N
        if job_mode:
            m = np.empty((N, self.J, JOB_LEVELS + 1), dtype=bool)
            m[:, :, 0] = True
            m[:, :, 1:] = self.live[:, :, None]
            return m.reshape(N, -1)
        m = np.empty((N, self.M, self.J + 1), dtype=bool)
        m[:, :, 0] = True
        np.less_equal(self.price[:, :, None], self.slot_rem[:, None, :] + _TOL, out=m[:, :, 1:])
        return m.reshape(N, -1)


def infeasible_message(status: int, where: int, act: np.ndarray, slot_rem: np.ndarray, slot_job: np.ndarray,
                       price: np.ndarray) -> str:
    """The "raise" message of a rejected machine action ``act`` (M,) of one env (``status``, ``where`` from
    :meth:`SlotState.step`; ``slot_rem``, ``slot_job`` (J,) and ``price`` (M,) its state)."""
    if status == 1:
        return f"infeasible action: machine {where} is given window slot {int(act[where])}, which holds no job"
    k = int(where)
    used = act > 0
    need = float(np.bincount(act[used], weights=price[used], minlength=slot_rem.size + 1)[k])
    rem = float(slot_rem[k - 1])
    return (f"infeasible action: job {int(slot_job[k - 1])} (window slot {k}) would spend {need:.4g} > remaining "
            f"budget {rem:.4g} (excess {need - rem:.4g}, eq. 4)")
