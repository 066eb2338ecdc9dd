"""P2 dynamics (OGASched paper, ogasched.md §2): one object, :class:`AllocationDynamics`, that the
single env, the native vector env and the PettingZoo env all use (STYLE.md, "copied dynamics").

:class:`AllocationDynamics` owns, for one problem:

* the **plan** (:class:`~clustergym.envs.multiserver.allocation.kernels.SlotPlan`, a NamedTuple): the
  static entry lists the fused kernel walks (:func:`build_plan`) and its constants (c + tol, β, the
  utilisation weights);
* the **scratch buffers** of one slot (``sums`` (R, K) = Σ_{l∈L_r} y, per-port gain and per-type sums);
* the **arrival draws**: x_l(t) ~ Bernoulli(ρ_l) (eq. 1) in blocks of :data:`ARRIVAL_BLOCK` slots
  from the caller's generator (:meth:`AllocationDynamics.draw_arrivals`);
* **one slot** (:meth:`AllocationDynamics.step` -> :class:`SlotResult`): the check of eqs. 3–4, the
  repair by the exact Euclidean projection Π_Y (eqs. 11–13) or the ValueError of
  ``infeasible="raise"`` (:meth:`AllocationDynamics.infeasible_message`), and eq. 5 with eq. 7;
  :meth:`AllocationDynamics.step_batch` does the same for N sub-envs in one parallel kernel;
* eq. 5 on whole arrays for any y (:meth:`AllocationDynamics.parts`, what rendering, the reward
  split of the PettingZoo env and the experiments read) and the eq. 27 utilities per entry
  (:meth:`AllocationDynamics.utilities`).

The compiled kernels that do the work (the fused slot kernel :func:`slot_step`, its batched form
:func:`step_batch`, their plan and eq. 5's sums :func:`reward_sums`) are in
:mod:`clustergym.envs.multiserver.allocation.kernels`.

Known remaining copies (kept because removing them changes numbers): :meth:`~AllocationDynamics.parts`
sums in edge/device order (:func:`reward_sums`) rather than through :func:`slot_step`, whose family-grouped
order would move the PettingZoo per-server rewards by up to ~1e-13; and the numpy eq. 27
(``scenario.utility_value``, used by :meth:`~AllocationDynamics.utilities` and the hindsight oracle) is
kept beside the compiled one, because numpy's vectorised log1p and numba's differ in the last bit.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np

from clustergym.core.scenario import MAX_REAL
from clustergym.envs.multiserver.allocation.kernels import build_plan, reward_sums, slot_step, step_batch
from clustergym.envs.multiserver.allocation.scenario import utility_value
from clustergym.envs.multiserver.projection import AllocationLayout

__all__ = ["ARRIVAL_BLOCK", "MAX_ACTION", "TOL", "AllocationDynamics", "BatchResult", "SlotResult", "first_too_large",
           "too_large"]

ARRIVAL_BLOCK = 256  # slots of arrivals drawn at once (same values as drawing slot by slot)
TOL = 1e-6  # feasibility tolerance (device units) on eqs. 3–4 before "repair"/"raise" acts
# The largest |y| "repair" projects (device units): no a_l^k exceeds it (every real parameter is capped there), and
# beyond it the projection's arithmetic (z − τ in float64) loses the allocation to rounding. Larger is a ValueError.
MAX_ACTION = MAX_REAL


def too_large(y: np.ndarray) -> str | None:
    """The ValueError text when an entry of y (E, K) is beyond ±:data:`MAX_ACTION` (vectorised), else None."""
    big = np.abs(y) > MAX_ACTION
    if not big.any():
        return None
    e, k = map(int, np.argwhere(big)[0])
    return (f"action entry y[{e}, {k}] = {float(y[e, k]):.6g} is beyond ±{MAX_ACTION:g} device units (no a_l^k "
            f"is larger): \"repair\" projects only actions within that range")


def first_too_large(y: np.ndarray, rows: np.ndarray) -> tuple[int, str] | None:
    """(row, :func:`too_large` text) of the first of ``rows`` of y (N, E, K) with an entry beyond ±:data:`MAX_ACTION`
    (one vectorised test over those rows), else None."""
    big = (np.abs(y[rows]) > MAX_ACTION).reshape(len(rows), -1).any(axis=1)
    if not big.any():
        return None
    i = int(rows[int(np.argmax(big))])
    return i, cast(str, too_large(y[i]))


class SlotResult(NamedTuple):
    """What one slot of :meth:`AllocationDynamics.step` produced (y after any repair)."""

    allocation: np.ndarray  # (E, K) float, the executed y (the action itself when it was feasible)
    port_reward: np.ndarray  # (L,) x_l q_l of eq. 5
    used: np.ndarray  # (K,) device units allocated to ports with a job
    gain: float  # Σ_l x_l Σ_k Σ_{r∈R_l} f_r^k(y), eq. 5's gain part
    overhead: float  # Σ_l x_l max_k β_k Σ_{r∈R_l} y, eq. 5's overhead part
    utilisation: float  # Σ_k used_k w_k (mean over existing types of used / capacity)
    repaired: int  # violated constraints of the action as sent (entries outside [0, a] + (r, k) over c)


_tuple_new = tuple.__new__


class BatchResult(NamedTuple):
    """What :meth:`AllocationDynamics.step_batch` produced for N sub-envs (leading axis N)."""

    nonfinite: np.ndarray  # (N,) int64, non-finite entries of each action as sent
    bad_box: np.ndarray  # (N,) int64, finite entries outside [0, a] beyond the tolerance (eq. 3)
    bad_cap: np.ndarray  # (N,) int64, (r, k) pairs over capacity (eq. 4)
    port_reward: np.ndarray  # (N, L) x_l q_l of eq. 5
    gain: np.ndarray  # (N,)
    overhead: np.ndarray  # (N,)
    used: np.ndarray  # (N, K)
    utilisation: np.ndarray  # (N,)


class AllocationDynamics:
    """The dynamics of P2 for one problem: arrivals, the check and repair of eqs. 3–4, eq. 5 (eq. 7).

    Built once per env from the public problem and ρ (the only hidden quantity the dynamics read);
    the single env calls :meth:`step` every slot, the vector env :meth:`step_batch`, the PettingZoo
    env :meth:`parts` and :meth:`utilities` for its reward split. Attributes (read-only): ``problem``,
    ``plan`` (:class:`~clustergym.envs.multiserver.allocation.kernels.SlotPlan`), ``layout`` (the projection's
    :class:`AllocationLayout`), ``upper``
    (E, K) a of eq. 3, ``open`` ((E, K) 1/0: a_l^k > 0, or None when all are), ``alpha_e`` and ``code_e`` (E, K) α_r^k and
    the eq. 27 family of each entry,
    ``beta`` (K,), ``sums`` (R, K) Σ_{l∈L_r} y of the last :meth:`step` (scratch), ``space_desc``
    (the action space as error messages quote it).

    Args:
        problem: the public :class:`~clustergym.envs.multiserver.allocation.scenario.AllocationProblem`.
        rho: (L,) hidden arrival probabilities ρ_l of eq. 1 (only :meth:`draw_arrivals` reads them;
            None for a dynamics object that only evaluates allocations).
        tol: feasibility tolerance (device units) of eqs. 3–4.
    """

    def __init__(self, problem, rho: np.ndarray | None = None, tol: float = TOL):
        pb = self.problem = problem
        self.rho = None if rho is None else np.asarray(rho, dtype=np.float64)  # (L,)
        self.tol = tol
        E, L, K = pb.num_edges, pb.num_ports, pb.num_device_types
        self.upper = np.ascontiguousarray(pb.edge_demand, dtype=np.float64)  # (E, K) a of eq. 3
        # (E, K) 1.0 where a_l^k > 0, 0.0 where the port does not request type k (the "channel" action's
        # ignored entries, allocation/actions.py); None when every entry is requested
        self.open = None if (self.upper > 0).all() else (self.upper > 0).astype(np.float64)
        self.layout = AllocationLayout(pb.edge_port, pb.edge_server, self.upper, pb.capacity, pb.num_servers)
        self.edge_port = np.ascontiguousarray(pb.edge_port, dtype=np.int64)  # (E,)
        self.alpha_e = np.ascontiguousarray(pb.alpha[pb.edge_server])  # (E, K) α_r^k of eq. 27
        self.code_e = np.ascontiguousarray(pb.utility[pb.edge_server])  # (E, K) family code of eq. 27
        self.beta = np.asarray(pb.beta, dtype=np.float64)  # (K,)
        codes = np.unique(self.code_e)
        self.single_code = int(codes[0]) if codes.size == 1 else None  # the only family, if there is one
        flat = self.code_e.ravel()  # flat positions of each family, so each entry evaluates only its own f
        self._families = [(int(c), np.flatnonzero(flat == c), self.alpha_e.ravel()[flat == c]) for c in codes]
        cap = np.asarray(pb.capacity, dtype=np.float64)  # (R, K)
        cap_total = cap.sum(axis=0)  # (K,)
        types = cap_total > 0
        util_w = np.where(types, 1.0 / np.where(types, cap_total, 1.0), 0.0) / max(int(types.sum()), 1)
        self.cap_tol = cap + tol  # (R, K) c + tol
        self.plan = build_plan(self.upper, cap, np.ascontiguousarray(pb.edge_server, dtype=np.int64), self.edge_port,
                               self.alpha_e, self.code_e, L, tol, np.ascontiguousarray(self.cap_tol.reshape(-1)),
                               self.beta, util_w)
        self.space_desc = f"Box(0, a, shape=({E}, {K})) in device units"
        self.sums = np.zeros((pb.num_servers, K))  # (R, K) scratch: Σ_{l∈L_r} y of the last check
        self._sums_flat = self.sums.reshape(-1)  # (R·K,) view
        self._gain = np.zeros(L)  # (L,) scratch of eq. 5
        self._per_type = np.zeros((L, K))  # (L, K) scratch of eq. 5
        self._L, self._K = L, K

    # -- arrivals (eq. 1) -----------------------------------------------------------------------
    def draw_arrivals(self, rng: np.random.Generator) -> np.ndarray:
        """(ARRIVAL_BLOCK, L) bool: x_l(t) ~ Bernoulli(ρ_l) for the next block of slots, from ``rng``."""
        if self.rho is None:
            raise ValueError("this dynamics object was built without rho: it cannot draw arrivals")
        return rng.random((ARRIVAL_BLOCK, self.rho.shape[0])) < self.rho[None, :]

    # -- one slot -------------------------------------------------------------------------------
    def _evaluate(self, y: np.ndarray, x: np.ndarray, port_reward: np.ndarray, used: np.ndarray) -> tuple:
        """:func:`slot_step` on y (E, K) C-contiguous: fills ``sums``, ``port_reward`` (L,), ``used`` (K,)."""
        return slot_step(y.reshape(-1), x, *self.plan, self._sums_flat, self._gain, self._per_type, port_reward, used)

    def step(self, y: np.ndarray, x: np.ndarray, infeasible: str = "repair") -> SlotResult:
        """One slot: check y against eqs. 3–4, repair or raise, then eq. 5 (eq. 7) with arrivals x.

        Args:
            y: (E, K) float32 or float64, C-contiguous, the allocation as sent (shape already checked).
            x: (L,) bool, arrivals of the slot.
            infeasible: ``"repair"`` (y outside Y beyond ``tol`` is replaced by Π_Y(y), eqs. 11–13) or
                ``"raise"`` (ValueError naming the constraint, :meth:`infeasible_message`).

        Raises:
            ValueError: y has a NaN or inf entry, an entry beyond ±:data:`MAX_ACTION` under ``"repair"``, or is
                infeasible under ``"raise"``.
        """
        port_reward = np.empty(self._L)
        used = np.empty(self._K)
        nonfinite, bad_box, bad_cap, gain, overhead, util = slot_step(  # = self._evaluate, inlined (per-step path)
            y.reshape(-1), x, *self.plan, self._sums_flat, self._gain, self._per_type, port_reward, used)
        if nonfinite:
            raise ValueError(f"action contains NaN or inf, expected {self.space_desc}")
        repaired = bad_box + bad_cap
        if repaired:
            if infeasible == "raise":
                raise ValueError(self._message(y, bad_box))
            huge = too_large(y) if bad_box else None  # only on this (slow) path: a feasible y is within [0, a]
            if huge:
                raise ValueError(huge)
            y = self.layout.project(y)  # exact Euclidean projection onto Y (eqs. 11–13), compiled
            _, _, _, gain, overhead, util = self._evaluate(y, x, port_reward, used)  # eq. 5 on the repaired y
        # = SlotResult(...), built without the Python-level __new__ of a NamedTuple (~0.1 µs of a ~12 µs step)
        return _tuple_new(SlotResult, (y, port_reward, used, gain, overhead, util, repaired))

    def infeasible_message(self, y: np.ndarray, x: np.ndarray) -> str:
        """The ValueError text of ``infeasible="raise"`` for an infeasible y (E, K) (arrivals x (L,))."""
        y = np.ascontiguousarray(y, dtype=np.float64)
        bad_box = self._evaluate(y, x, np.empty(x.shape[0]), np.empty(self.beta.shape[0]))[1]
        return self._message(y, bad_box)

    def _message(self, y: np.ndarray, bad_box: int) -> str:
        """The first entry outside [0, a] (eq. 3) if any, else the first (r, k) over capacity (eq. 4);
        ``self.sums`` holds the per-server sums of y."""
        pb, sums, tol = self.problem, self.sums, self.tol
        if bad_box:
            e, k = map(int, np.argwhere((y < -tol) | (y > self.upper + tol))[0])
            return (f"infeasible action: y[{e}, {k}] = {y[e, k]:.6g} on channel (port {int(pb.edge_port[e])}, "
                    f"server {int(pb.edge_server[e])}) is outside [0, a] = [0, {self.upper[e, k]:.6g}] (eq. 3)")
        r, k = map(int, np.argwhere(sums > self.cap_tol)[0])
        return (f"infeasible action: server {r} allocates {sums[r, k]:.6g} of device type {k} "
                f"({pb.device_names[k] if k < len(pb.device_names) else k}) > capacity "
                f"{pb.capacity[r, k]:.6g} (excess {sums[r, k] - pb.capacity[r, k]:.6g}, eq. 4)")

    def step_batch(self, y: np.ndarray, x: np.ndarray, stepping: np.ndarray, repair: bool,
                   out: np.ndarray) -> BatchResult:
        """:meth:`step` for N sub-envs in one parallel kernel (:func:`step_batch`); raises nothing.

        Args:
            y: (N, E, K) float32 or float64, C-contiguous; x: (N, L) bool; stepping: (N,) bool, the
                sub-envs that step (the others get zero rewards).
            repair: project the finite infeasible rows of the stepping sub-envs (eqs. 11–13) into
                ``out`` (N, E, K) float64 and evaluate eq. 5 there; other rows of ``out`` are untouched.
        """
        N, L, K = y.shape[0], x.shape[1], self.beta.shape[0]
        counts = np.empty((3, N), dtype=np.int64)
        res = BatchResult(counts[0], counts[1], counts[2], np.empty((N, L)), np.empty(N), np.empty(N),
                          np.empty((N, K)), np.empty(N))
        step_batch(y.reshape(N, -1), x, stepping, *self.plan, repair, out.reshape(N, -1), *self.layout.groups,
                   res.nonfinite, res.bad_box, res.bad_cap, res.port_reward, res.gain, res.overhead, res.used,
                   res.utilisation)
        return res

    # -- eq. 5 and eq. 27 on whole arrays ---------------------------------------------------------
    def utilities(self, y: np.ndarray) -> np.ndarray:
        """(E, K) f_r^k(y_(l,r)^k) of eq. 27."""
        if self.single_code is not None:
            return utility_value(y, self.alpha_e, self.single_code)
        yf = y.reshape(-1)
        out = np.empty(yf.shape[0])
        for code, idx, alpha in self._families:  # at most the four families of eq. 27
            out[idx] = utility_value(yf[idx], alpha, code)
        return out.reshape(y.shape)

    def parts(self, y: np.ndarray, with_sums: bool = False):
        """Per-port gain Σ_k Σ_{r∈R_l} f_r^k(y) and overhead max_k β_k Σ_{r∈R_l} y, both (L,), of eq. 5
        for any y (E, K) (before the factor x_l(t)); with ``with_sums`` also Σ_{r∈R_l} y (L, K)."""
        gain, per_type = reward_sums(y, self.alpha_e, self.code_e, self.edge_port,
                                     self.problem.num_ports)
        overhead = (per_type * self.beta).max(axis=1)  # eq. 5: the dominant weighted overhead
        return (gain, overhead, per_type) if with_sums else (gain, overhead)
