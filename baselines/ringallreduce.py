"""The GADGET paper's baselines for RingAllReduce (gadget.md §VI.2) and a feasible random agent.

All of them use the greedy ring placement of ``envs/ringallreduce/dynamics.py`` ("greedily
allocates workers to servers where a cycle can be attained") and, as in the paper, a *static*
number of workers per job: "For FIFO and Tiresias, the number of workers is fixed to a number
within [1, 10]". Our reading: each job gets a fixed size w_i drawn once, uniformly in
{``workers_low``..``workers_high``} = {1..10} (from the agent's seeded generator, keyed by job id),
capped each slot at min(N_i, budget left) (eqs. 2, 11). ``workers=k`` fixes w_i = k for every job.
DRF uses the same fixed sizes (the paper calls all three baselines static).

The paper is silent on how a size drawn from [1, 10] meets N_i ∈ [1, 5]; option ``sizes``:
``"capped"`` (default) draws w_i in {lo..hi} and caps it at N_i, so with the paper's ranges ~80% of jobs
run at their full N_i (a fixed size of 5..10 becomes N_i) and a static size differs little from
GADGET's dynamic one; ``"within"`` draws w_i uniformly in {lo..min(hi, N_i)} (N_i is public,
``window["workers"]``), so the draw is never cut by N_i and a static job runs below its N_i as often as
the draw says. Both still cap at the budget left (eq. 11).

Jobs are placed one after another in the policy's order against the capacity left; a job that
cannot be placed at its size waits (later jobs may still use what is left: no head-of-line
blocking).

* ``fifo``: arrival order (Hadoop/Spark FIFO).
* ``drf``: Dominant Resource Fairness (Yarn/Mesos; the paper: "Jobs are scheduled based on their
  dominant resource share"). Default ``share="allocated"``, the usual DRF (Ghodsi et al.): jobs in
  increasing dominant share of the resources *already allocated* to them, i.e. held in the
  previous slot (jobs are preempted and re-placed every slot, so what a job holds when the
  scheduler decides is its last allocation), max(GPUs held / Σ_s C_s, uplink bandwidth held /
  Σ_s B_s), where a ring over m > 1 servers holds b_i on each of its m server uplinks and B_s is
  the server-uplink capacity (one direction); ties (e.g. all jobs that held nothing) by arrival.
  Option ``share="demand"``: the dominant share of the job's fixed *requested* size,
  max(w_i / Σ_s C_s, w_i b_i / Σ_s B_s) (our earlier reading: the paper's sentence does not say
  allocated or requested; with fixed sizes this order never changes while a job runs).
* ``las``: the paper's LAS is Tiresias' (§VI: "Least Attained Service (LAS) in Tiresias [15]"), and
  Tiresias schedules by its *discretised* 2D-LAS (Gu et al., NSDI'19): priority queues separated by
  attained-service thresholds, queues served in order, FIFO (arrival) within a queue. That is the
  default, ``thresholds="tiresias"``: Tiresias' two queues, split at TIRESIAS_THRESHOLDS = 10
  worker-slots of attained service z_i (Tiresias sets its threshold in GPU-time from its own trace;
  neither paper gives one for this model: 10 worker-slots is about one job at full size, 1..10
  workers, for one slot). ``las[thresholds=...]`` (a number or an increasing list, worker-slots)
  sets other queues. ``las[thresholds=continuous]``: the continuous LAS, increasing z_i (ties by
  arrival), which round-robins among jobs as their service grows (the earlier default).
  Tiresias' starvation promotion is not modelled.
* ``drf[rack_links=true]``: the dominant share also counts rack uplinks, a third resource: a ring
  over m > 1 racks holds b_i on each of its m rack uplinks, share b_i m / Σ_r B_r (default: server
  uplinks only, the resources the paper's sentence does not name either way).
* ``greedy`` (a reference policy, not a paper baseline): every visible job at its full size
  min(N_i, budget left), ranked by its full-size utility increment
  π_i = μ_i(ζ_i(z_i + κ)) − μ_i(ζ_i z_i) at κ = that size, descending (ties by arrival), placed in that
  order with the same greedy ring placement; a job that does not fit at full size waits.
* ``srpt`` (a reference policy, not a paper baseline): shortest remaining budget first, the classic SRPT
  with the job's remaining budget B_i − z_i (worker-slots) as its remaining processing time (ties by arrival),
  fixed sizes as above. A job leaves the visible window only when its budget is used up (eq. 11), so on a
  cluster short of GPUs finishing short jobs lets the next arrivals in. ``srpt[row_value=c]``: jobs by
  decreasing (λ1 − μ_i(ζ_i z_i) + c) / (B_i − z_i), the utility still to gain plus a worth c of the window row
  the job frees, per worker-slot it still needs (c → ∞ is SRPT; c = 0 ranks by utility density and never
  frees the rows of jobs past their sigmoid's step).
* ``random``: random order, random size in {0..min(N_i, budget left)}.

In ``placement`` mode they output the placement; in ``ring_size`` mode the sizes of the jobs they
placed (the env then places those in window order with the same heuristic).
"""

from __future__ import annotations

import numpy as np

from clustergym.core.agent import BaseAgent
from clustergym.envs.ringallreduce.dynamics import place_jobs
from clustergym.envs.ringallreduce.scenario import sigmoid_utility

__all__ = ["FIFO", "DRF", "LAS", "SRPT", "Greedy", "RandomRing"]


class _RingHeuristic(BaseAgent):
    families = ("ringallreduce",)

    def __init__(self, workers: int | None = None, workers_low: int = 1, workers_high: int = 10,
                 sizes: str = "capped"):
        if sizes not in ("capped", "within"):
            raise ValueError(f"sizes={sizes!r} is invalid: expected 'capped' or 'within'")
        self.sizes = sizes
        if workers is not None and int(workers) < 1:
            raise ValueError(f"workers={workers!r} is invalid: expected an integer >= 1 or null")
        if not 1 <= int(workers_low) <= int(workers_high):
            raise ValueError(f"workers_low={workers_low!r}, workers_high={workers_high!r} are invalid: "
                             "expected 1 <= workers_low <= workers_high")
        self.workers = None if workers is None else int(workers)
        self.lo, self.hi = int(workers_low), int(workers_high)

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        self._size: dict[int, int] = {}
        topo = problem.topology
        self._gpus = np.asarray(topo.gpus, dtype=np.int64)
        self._rack_of = np.asarray(topo.rack_of, dtype=np.int64)

    def _fixed(self, ids: np.ndarray, n_max: np.ndarray) -> np.ndarray:
        """(len(ids),) each job's static size w_i, drawn once per job id (``sizes`` reading)."""
        out = np.empty(ids.size, dtype=np.int64)
        for t, (i, n) in enumerate(zip(ids.tolist(), n_max.tolist())):
            if i not in self._size:
                if self.workers is not None:
                    self._size[i] = self.workers
                else:
                    hi = self.hi if self.sizes == "capped" else max(min(self.hi, int(n)), self.lo)
                    self._size[i] = int(self.rng.integers(self.lo, hi + 1))
            out[t] = self._size[i]
        return out

    def _order(self, win: dict, rows: np.ndarray, size: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sizes(self, win: dict, rows: np.ndarray) -> np.ndarray:
        n_max = win["workers"][rows] if "workers" in win else win["cap"][rows]  # N_i (hand-made windows: cap)
        return np.minimum(self._fixed(win["id"][rows], n_max), win["cap"][rows])

    def act(self, obs, info):
        win = info["window"]
        rows = np.flatnonzero(win["present"] & (win["cap"] > 0))
        J = win["present"].shape[0]
        topo = self.problem.topology
        y = np.zeros((J, self._gpus.shape[0]), dtype=np.int64)
        if rows.size:
            size = self._sizes(win, rows)
            order = self._order(win, rows, size)
            yy, placed = place_jobs(order, size, win["bw"][rows], self._gpus.copy(),
                                    np.asarray(topo.server_bw, dtype=np.float64).copy(),
                                    np.asarray(topo.rack_bw, dtype=np.float64).copy(), self._rack_of, topo.num_racks)
            y[rows] = yy
        if self.problem.action_mode == "ring_size":
            return y.sum(axis=1)
        return y.reshape(-1)


class FIFO(_RingHeuristic):
    """First in, first out with a fixed number of workers per job."""

    name = "fifo"

    def _order(self, win, rows, size):
        return np.lexsort((win["id"][rows], win["arrival"][rows]))


class DRF(_RingHeuristic):
    """Dominant resource fairness over GPUs and server-uplink bandwidth, fixed sizes.

    ``share="allocated"`` (default, the usual DRF): order by the dominant share of what each job
    held in the previous slot (from ``info["feedback"]["allocation"]``); ``share="demand"``: by the
    dominant share of its fixed requested size.
    """

    name = "drf"

    def __init__(self, workers: int | None = None, workers_low: int = 1, workers_high: int = 10,
                 share: str = "allocated", rack_links: bool = False, sizes: str = "capped"):
        super().__init__(workers, workers_low, workers_high, sizes)
        if share not in ("allocated", "demand"):
            raise ValueError(f"share={share!r} is invalid: expected 'allocated' or 'demand'")
        self.share = share
        self.rack_links = bool(rack_links)

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        self._held: dict[int, float] = {}  # job id -> dominant share held in the previous slot
        self._bw_of: dict[int, float] = {}  # job id -> b_i (public once the job arrived)
        topo = problem.topology
        self._gpu_total = float(self._gpus.sum())
        self._bw_total = float(np.asarray(topo.server_bw)[:, 0].sum())
        self._rack_total = float(np.asarray(topo.rack_bw)[:, 0].sum())

    def _order(self, win, rows, size):
        ids = win["id"][rows]
        if self.share == "demand":
            share = np.maximum(size / self._gpu_total, size * win["bw"][rows] / self._bw_total)
        else:
            for i, b in zip(ids.tolist(), win["bw"][rows].tolist()):
                self._bw_of[i] = b
            share = np.array([self._held.get(i, 0.0) for i in ids.tolist()])
        return np.lexsort((ids, win["arrival"][rows], share))

    def update(self, obs, action, reward, next_obs, info) -> None:
        if self.share != "allocated":
            return
        fb = info.get("feedback") if isinstance(info, dict) else None
        if fb is None:
            return
        y = np.asarray(fb["allocation"])
        ids = np.asarray(fb["job_ids"])
        gpus = y.sum(axis=1)
        nsrv = (y > 0).sum(axis=1)
        # racks used per job: (J, R) any worker on a server of rack r
        nrack = (np.stack([(y[:, self._rack_of == r] > 0).any(axis=1) for r in range(self.problem.topology.num_racks)],
                          axis=1).sum(axis=1) if y.size else np.zeros(0, dtype=np.int64))
        held = {}
        for j in np.flatnonzero(ids >= 0):
            i = int(ids[j])
            b = self._bw_of.get(i, 0.0)
            bw = b * (nsrv[j] if nsrv[j] > 1 else 0)  # b_i on each used server uplink
            share = max(gpus[j] / self._gpu_total, bw / self._bw_total)
            if self.rack_links:  # b_i on each used rack uplink when the ring spans racks
                share = max(share, b * (nrack[j] if nrack[j] > 1 else 0) / self._rack_total)
            held[i] = share
        self._held = held


class LAS(_RingHeuristic):
    """Tiresias' least attained service (worker-slots so far), fixed sizes.

    ``thresholds="tiresias"`` (default): Tiresias' discretised LAS with two queues split at
    :data:`TIRESIAS_THRESHOLDS` (10 worker-slots) — the LAS the paper cites (§VI, "Least Attained
    Service (LAS) in Tiresias [15]"). ``thresholds=[θ_1, ...]`` (a number or an increasing list,
    worker-slots): queue index q_i = #{k: z_i >= θ_k}, jobs by (q_i, arrival).
    ``thresholds="continuous"`` (or None): continuous LAS, increasing z_i (ties by arrival).
    """

    name = "las"
    TIRESIAS_THRESHOLDS = (10.0,)  # two queues (Tiresias' default count), split at 10 worker-slots

    def __init__(self, workers: int | None = None, workers_low: int = 1, workers_high: int = 10,
                 thresholds="tiresias", sizes: str = "capped"):
        super().__init__(workers, workers_low, workers_high, sizes)
        if isinstance(thresholds, str) and thresholds not in ("tiresias", "continuous"):
            raise ValueError(f"thresholds={thresholds!r} is invalid: expected 'tiresias', 'continuous', a positive "
                             "number or an increasing list of positive numbers (worker-slots)")
        if thresholds == "tiresias":
            thresholds = list(self.TIRESIAS_THRESHOLDS)
        if thresholds is None or thresholds == "continuous":
            self.thresholds = None
        else:
            th = np.atleast_1d(np.asarray(thresholds, dtype=float))
            if th.ndim != 1 or th.size == 0 or not np.all(np.isfinite(th)) or np.any(th <= 0) or np.any(np.diff(th) <= 0):
                raise ValueError(f"thresholds={thresholds!r} is invalid: expected a positive number or an "
                                 "increasing list of positive numbers (worker-slots)")
            self.thresholds = th

    def _order(self, win, rows, size):
        z = win["attained"][rows]
        key = z if self.thresholds is None else np.searchsorted(self.thresholds, z, side="right")
        return np.lexsort((win["id"][rows], win["arrival"][rows], key))


class SRPT(_RingHeuristic):
    """Shortest remaining budget first (B_i − z_i worker-slots, ties by arrival), fixed sizes.

    ``row_value=c`` (a number >= 0): jobs by decreasing (λ1 − μ_i(ζ_i z_i) + c) / (B_i − z_i) instead: the
    utility the job can still gain (the sigmoid of §VI tends to λ1) plus the worth c of the window row it frees
    when its budget is used up, per worker-slot of budget left.
    """

    name = "srpt"

    def __init__(self, workers: int | None = None, workers_low: int = 1, workers_high: int = 10,
                 row_value: float | None = None, sizes: str = "capped"):
        super().__init__(workers, workers_low, workers_high, sizes)
        if row_value is not None and not (np.isfinite(float(row_value)) and float(row_value) >= 0):
            raise ValueError(f"row_value={row_value!r} is invalid: expected a number >= 0 or null")
        self.row_value = None if row_value is None else float(row_value)

    def _order(self, win, rows, size):
        left = np.maximum(win["remaining"][rows].astype(np.float64), 1.0)  # B_i − z_i, >= 1 for a visible job
        if self.row_value is None:
            key = left
        else:
            zeta, z = win["zeta"][rows], win["attained"][rows].astype(np.float64)
            lam = (win["lam1"][rows], win["lam2"][rows], win["lam3"][rows])
            key = -(lam[0] - sigmoid_utility(zeta * z, *lam) + self.row_value) / left
        return np.lexsort((win["id"][rows], win["arrival"][rows], key))


class Greedy(_RingHeuristic):
    """Reference policy: full size min(N_i, budget left), ranked by the full-size increment, descending."""

    name = "greedy"

    def __init__(self):
        super().__init__()

    def _sizes(self, win, rows):
        return win["cap"][rows].astype(np.int64)

    def _order(self, win, rows, size):
        zeta, z = win["zeta"][rows], win["attained"][rows].astype(float)
        lam = (win["lam1"][rows], win["lam2"][rows], win["lam3"][rows])
        pi = sigmoid_utility(zeta * (z + size), *lam) - sigmoid_utility(zeta * z, *lam)  # π_i at κ = full size
        return np.lexsort((win["id"][rows], win["arrival"][rows], -pi))


class RandomRing(_RingHeuristic):
    """Feasible random: random order, random size in {0..min(N_i, budget left)}."""

    name = "random"

    def _sizes(self, win, rows):
        return self.rng.integers(0, win["cap"][rows] + 1)

    def _order(self, win, rows, size):
        return self.rng.permutation(rows.size)
