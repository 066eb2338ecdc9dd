"""P2 environment: MultiServerAllocation-v0 (OGASched paper, ogasched.md §2)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from gymnasium import spaces

from clustergym.core import Scenario, resolve_scenario, child_generators
from clustergym.env import ClusterEnv
from clustergym.metrics import EPISODE, SLOT, Metric
from clustergym.envs.multiserver.allocation.scenario import (
    ALLOCATION_SCENARIOS, make_allocation_scenario, utility_value)
from clustergym.envs.multiserver.allocation import dynamics as _kern
from clustergym.envs.multiserver.projection import AllocationLayout, SegmentSum

__all__ = ["MultiServerAllocationEnv", "RewardModel"]

_BLOCK = 256  # slots of arrivals drawn at once (same values as drawing slot by slot)
_TOL = 1e-6  # feasibility tolerance (device units) on eqs. 3–4 before "repair"/"raise" acts


class RewardModel:
    """Eq. 5 with the nice setup of eq. 7, on whole arrays (shared by the env, agents and tests).

    ``parts(y)`` returns per-port gain Σ_k Σ_{r∈R_l} f_r^k(y_(l,r)^k) and overhead
    max_k β_k Σ_{r∈R_l} y_(l,r)^k, both (L,), for any y (E, K) — before multiplying by x_l(t).
    """

    def __init__(self, problem, backend: str = "auto"):
        pb = problem
        if backend not in ("auto", "numba", "numpy"):
            raise ValueError(f"backend={backend!r} is invalid: expected 'auto', 'numba' or 'numpy'")
        self.use_numba = _kern.HAVE_NUMBA and backend != "numpy"
        self._edge_port = np.ascontiguousarray(pb.edge_port, dtype=np.int64)
        self.problem = pb
        self.alpha_e = np.ascontiguousarray(pb.alpha[pb.edge_server])  # (E, K)
        self.code_e = np.ascontiguousarray(pb.utility[pb.edge_server])  # (E, K)
        self.port_sums = SegmentSum(pb.edge_port, pb.num_ports)  # (E, ...) -> (L, ...): Σ_{r∈R_l}
        self._gain_idx = None
        self.beta = np.asarray(pb.beta, dtype=np.float64)
        codes = np.unique(self.code_e)
        self._single = int(codes[0]) if codes.size == 1 else None
        # Flat positions of each utility family, so each (e, k) evaluates only its own f (eq. 27).
        flat = self.code_e.ravel()
        self._fam = [(int(c), np.flatnonzero(flat == c), self.alpha_e.ravel()[flat == c]) for c in codes]

    def utilities(self, y: np.ndarray) -> np.ndarray:
        """(E, K) f_r^k(y_(l,r)^k) of eq. 27."""
        if self._single is not None:
            return utility_value(y, self.alpha_e, self._single)
        yf = y.reshape(-1)
        out = np.empty(yf.shape[0])
        for code, idx, alpha in self._fam:  # at most the four families of eq. 27
            out[idx] = utility_value(yf[idx], alpha, code)
        return out.reshape(y.shape)

    def parts(self, y: np.ndarray, with_sums: bool = False):
        """Per-port gain and overhead (L,) of eq. 5 (and, if asked, Σ_{r∈R_l} y (L, K))."""
        L, K = self.problem.num_ports, y.shape[1]
        if self.use_numba:
            gain, per_type = _kern.reward_sums(y, self.alpha_e, self.code_e, self._edge_port, L)
            overhead = (per_type * self.beta).max(axis=1)
            return (gain, overhead, per_type) if with_sums else (gain, overhead)
        f = self.utilities(y)  # (E, K)
        if self._gain_idx is None:
            ep = np.asarray(self.problem.edge_port, dtype=np.int64)
            self._gain_idx = np.concatenate([np.repeat(ep * (K + 1), K),  # every f of port l -> column 0
                                             (ep[:, None] * (K + 1) + 1 + np.arange(K)).ravel()])
        both = np.bincount(self._gain_idx, weights=np.concatenate([f.ravel(), y.ravel()]),
                           minlength=L * (K + 1)).reshape(L, K + 1)  # [gain, Σ_{r∈R_l} y^k]
        gain = both[:, 0]
        per_type = both[:, 1:]
        overhead = (per_type * self.beta).max(axis=1)  # eq. 5: the dominant weighted overhead
        if with_sums:
            return gain, overhead, per_type
        return gain, overhead


class MultiServerAllocationEnv(ClusterEnv):
    """Fractional allocation of K device types to multi-server jobs on a bipartite graph.

    ## Description
    The OGASched paper's model (ogasched.md §2). Ports l (job types) connect to servers r through
    channels (l, r) ∈ E. At the start of every slot, port l yields a job with hidden probability ρ_l
    (x_l(t) ∈ {0, 1}, eq. 1) and the arrivals are observed. The scheduler then chooses a fractional
    allocation y_(l,r)^k (eq. 2) with 0 <= y <= a_l^k (eq. 3) and Σ_{l∈L_r} y_(l,r)^k <= c_r^k
    (eq. 4). Only ports with a job earn reward; an allocation to an idle port is feasible but earns
    nothing (Y does not depend on x, as in the paper).

    ## Action Space
    ``Box(0, a, shape=(|E|, K), float32)``: row e is channel (problem.edge_port[e],
    problem.edge_server[e]) (edges ordered by (port, server)); column k a device type; values in
    device units, bounded by a_l^k. (An SB3 wrapper may rescale to [-1, 1].)

    ## Observation Space
    | key        | space                  | meaning                                   |
    |------------|------------------------|-------------------------------------------|
    | arrivals   | MultiBinary(L)         | x_l(t): port l has a job this slot        |
    | t          | Box(0, T, (1,), f32)   | slots elapsed                              |

    ## Rewards
    Eq. 5 with the nice setup of eq. 7: q(x, y) = Σ_l x_l [Σ_k Σ_{r∈R_l} f_r^k(y_(l,r)^k)
    − max_k β_k Σ_{r∈R_l} y_(l,r)^k], utilities of eq. 27 (see ``allocation_scenario``).

    ## Infeasible actions
    ``infeasible="repair"`` (default): an action outside Y (beyond a tolerance of 1e-6 device units)
    is replaced by its exact Euclidean projection Π_Y (the routine OGASched uses, ``projection.py``);
    ``info["metrics"]["repaired"]`` counts the violated constraints (entries outside [0, a] plus
    (r, k) pairs over capacity). ``infeasible="raise"``: ValueError naming the constraint (eq. 3 or
    eq. 4), where, and by how much. Wrong shape, NaN/inf: always ValueError.

    ## Info
    ``feedback`` (what a real scheduler sees): ``allocation`` (the executed y, (E, K)) and
    ``port_reward`` ((L,) x_l q_l). ``metrics`` (evaluation only): ``expected_reward`` (equal to the
    reward: q is deterministic given x and y), ``gain`` and ``overhead`` (the two parts of eq. 5 over
    ports with a job, Fig. 6), ``repaired``, ``utilisation`` (share of all device units allocated to
    ports with a job, averaged over device types that exist). At the last slot, with ``oracle=True``:
    ``episode_best_static`` = Q(y*) for the best static allocation in hindsight
    y* = argmax_{y∈Y} Σ_t q(x(t), y) (``allocation/oracle.py``, relative tolerance 1e-6),
    ``episode_best_static_upper`` (its certified upper bound) and ``episode_regret`` = Q(y*) −
    Σ_t q(x(t), y(t)) (eq. 6 for the realised trajectory).

    ## Starting State / Episode End
    ``reset(seed)`` seeds a child generator for arrivals, so every agent sees the same arrivals for
    the same seed (common random numbers). The episode is truncated after ``horizon`` slots.

    ## Arguments
    ``scenario`` ("paper", "fig2", "large", "toy", "alibaba-v2023" or a Scenario), ``scenario_seed``
    (default 0), ``horizon`` (default 2000; public: ``env.problem.horizon`` carries it, so an agent
    can use T, e.g. OGASched's eq. 26 step), ``oracle`` (default True: the hindsight optimum at
    episode end), ``infeasible``, ``render_mode`` ("ansi" or "rgb_array"), and scenario parameters:
    ``units`` ("paper-code", default, or "device": the device units, see the scenario module),
    ``num_ports``, ``num_servers``, ``num_device_types``, ``rho``, ``contention``, ``density``,
    ``utility``, ``alpha_low``, ``alpha_high``, ``beta_low``, ``beta_high`` (see the scenario module).

    ## Version History
    * v0: initial version. Later in v0: the default device units became ``units="paper-code"``
      (the authors' code's ranges; ``units="device"`` gives the earlier instances bit for bit), and
      ``problem.horizon`` was added.
    """

    family = "multiserver-allocation"
    # info["metrics"] keys and their kind (clustergym/metrics.py); the vector env reuses it.
    metrics_spec = {
        "expected_reward": Metric(SLOT, "q(x(t), y(t)), equal to the reward (eq. 5 with eq. 7)"),
        "gain": Metric(SLOT, "Σ_l x_l Σ_k Σ_r f_r^k(y), the gain part of eq. 5 (Fig. 6)"),
        "overhead": Metric(SLOT, "Σ_l x_l max_k β_k Σ_r y, the overhead part of eq. 5 (Fig. 6)"),
        "repaired": Metric(SLOT, "violated constraints of eqs. 3–4 removed by the projection", total=True),
        "utilisation": Metric(SLOT, "share of device units allocated to ports with a job, mean over types"),
        "episode_best_static": Metric(EPISODE, "Q(y*), the best static allocation in hindsight (eq. 6; oracle=True)"),
        "episode_best_static_upper": Metric(EPISODE, "certified upper bound on Q(y*) (oracle=True)"),
        "episode_regret": Metric(EPISODE, "Q(y*) − Σ_t q(x(t), y(t)) (eq. 6; oracle=True)"),
    }

    def __init__(self, scenario: str | Scenario = "paper", *, scenario_seed: int = 0, horizon: int = 2000,
                 oracle: bool = True, infeasible: str = "repair", render_mode: str | None = None, **params: Any):
        super().__init__(horizon=horizon, infeasible=infeasible, render_mode=render_mode, oracle=oracle)
        self.scenario = resolve_scenario(scenario, params, make_allocation_scenario, ALLOCATION_SCENARIOS, scenario_seed)
        # The horizon T is public (the episode is truncated after T slots): agents read it from the
        # problem (OGASched's eq. 26 step needs T).
        pb = dataclasses.replace(self.scenario.problem, horizon=self.horizon)
        self.problem = pb
        self._truth = self.scenario.truth
        self._E, self._L, self._K = pb.num_edges, pb.num_ports, pb.num_device_types
        self._upper = np.ascontiguousarray(pb.edge_demand, dtype=np.float64)  # (E, K) a of eq. 3
        self.layout = AllocationLayout(pb.edge_port, pb.edge_server, self._upper, pb.capacity, pb.num_servers)
        self.reward_model = RewardModel(pb)
        self._edge_server = np.ascontiguousarray(pb.edge_server, dtype=np.int64)
        cap = np.asarray(pb.capacity, dtype=np.float64)
        self._cap_tol = cap + _TOL
        self._cap_total = cap.sum(axis=0)  # (K,)
        self._types = self._cap_total > 0
        self._util_w = np.where(self._types, 1.0 / np.where(self._types, self._cap_total, 1.0), 0.0) / max(
            int(self._types.sum()), 1)
        self._space_desc = f"Box(0, a, shape=({self._E}, {self._K})) in device units"
        self.action_space = spaces.Box(low=0.0, high=self._upper.astype(np.float32), shape=(self._E, self._K),
                                       dtype=np.float32)
        self.observation_space = spaces.Dict({
            "arrivals": spaces.MultiBinary(self._L),
            "t": spaces.Box(0.0, float(self.horizon), shape=(1,), dtype=np.float32),
        })
        if self.reward_model.use_numba:  # static entry lists of the fused kernel (allocation.dynamics.slot_step)
            rm = self.reward_model
            self._plan = _kern.build_plan(self._upper, cap, self._edge_server, rm._edge_port, rm.alpha_e, rm.code_e,
                                          self._L, _TOL)
            self._kernel_tail = (np.ascontiguousarray(self._cap_tol.reshape(-1)), _TOL, rm.beta, self._util_w)
        self._sums = np.zeros((pb.num_servers, self._K))  # (R, K) scratch of the feasibility check
        self._gain_buf = np.zeros(self._L)  # (L,) scratch of eq. 5
        self._per_type_buf = np.zeros((self._L, self._K))  # (L, K) scratch of eq. 5
        self._t = 0
        self._rngs = None

    # -- randomness ---------------------------------------------------------------------------
    def _refill(self) -> None:
        self._arr_block = self._rngs["arrivals"].random((_BLOCK, self._L)) < self._truth.rho[None, :]
        self._block_start = self._t

    def _slot(self) -> np.ndarray:
        i = self._t - self._block_start
        if i >= _BLOCK:
            self._refill()
            i = 0
        return self._arr_block[i]

    # -- gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._rngs = child_generators(self.np_random, ("arrivals",))
        self._t = 0
        self._counts = np.zeros(self._L)  # n_l = Σ_t x_l(t), all the hindsight optimum needs
        self._total = 0.0
        self._refill()
        self._arrivals = self._slot()
        self._last_y = np.zeros((self._E, self._K))
        return self._obs(), {"t": 0}

    def _obs(self) -> dict:
        return {"arrivals": self._arrivals.astype(np.int8), "t": np.array([self._t], dtype=np.float32)}

    def _check(self, action: Any) -> tuple[np.ndarray, int]:
        """numpy path: validate and (under "repair") project an action; returns (y (E, K) float64, violations)."""
        y = self._as_float_action(action, (self._E, self._K), self._space_desc)
        sums = self.layout.server_sums(y)  # (R, K) left side of eq. 4
        bad_box = int(np.count_nonzero((y < -_TOL) | (y > self._upper + _TOL)))
        bad_cap = int((sums > self._cap_tol).sum())
        if bad_box or bad_cap:
            if self.infeasible == "raise":
                raise ValueError(self._infeasible_message(y, sums, bad_box))
            y = self.layout.project(y)  # exact Euclidean projection onto Y (eqs. 11–13)
        return y, bad_box + bad_cap

    def _fused(self, y: np.ndarray, port_reward: np.ndarray, used: np.ndarray) -> tuple:
        """The fused per-env kernel the vector env also runs (``allocation.dynamics.slot_step``): check of
        eqs. 3–4 and eq. 5 in one pass; fills ``self._sums`` (R, K), ``port_reward`` (L,), ``used`` (K,)."""
        return _kern.slot_step(y.reshape(-1), self._arrivals, *self._plan, *self._kernel_tail,
                               self._sums.reshape(-1), self._gain_buf, self._per_type_buf, port_reward, used)

    def _infeasible_message(self, y: np.ndarray, sums: np.ndarray, bad_box: int) -> str:
        """The ValueError text of ``infeasible="raise"``: the first entry outside [0, a] (eq. 3) if any,
        else the first (r, k) over capacity (eq. 4); ``sums`` (R, K) are the per-server sums of y."""
        pb = self.problem
        if bad_box:
            e, k = map(int, np.argwhere((y < -_TOL) | (y > self._upper + _TOL))[0])
            return (f"infeasible action: y[{e}, {k}] = {y[e, k]:.6g} on channel (port {int(pb.edge_port[e])}, "
                    f"server {int(pb.edge_server[e])}) is outside [0, a] = [0, {self._upper[e, k]:.6g}] (eq. 3)")
        r, k = map(int, np.argwhere(sums > self._cap_tol)[0])
        return (f"infeasible action: server {r} allocates {sums[r, k]:.6g} of device type {k} "
                f"({pb.device_names[k] if k < len(pb.device_names) else k}) > capacity "
                f"{pb.capacity[r, k]:.6g} (excess {sums[r, k] - pb.capacity[r, k]:.6g}, eq. 4)")

    def step(self, action: Any):
        if self._rngs is None:
            raise RuntimeError("call reset() before step()")
        x = self._arrivals
        rm = self.reward_model
        if rm.use_numba:
            if isinstance(action, np.ndarray) and action.dtype == np.float64 and action.shape == (self._E, self._K):
                y = np.ascontiguousarray(action)
            else:
                y = np.ascontiguousarray(self._as_float_action(action, (self._E, self._K), self._space_desc))
            port_reward, used = np.empty(self._L), np.empty(self._K)
            nonfinite, bad_box, bad_cap, gain, overhead, util = self._fused(y, port_reward, used)
            if nonfinite:
                raise ValueError(f"action contains NaN or inf, expected {self._space_desc}")
            repaired = bad_box + bad_cap
            if repaired:
                if self.infeasible == "raise":
                    raise ValueError(self._infeasible_message(y, self._sums, bad_box))
                y = self.layout.project(y)  # exact Euclidean projection onto Y (eqs. 11–13), compiled
                _, _, _, gain, overhead, util = self._fused(y, port_reward, used)  # eq. 5 on the repaired y
            reward = float(port_reward.sum())
        else:
            y, repaired = self._check(action)
            gain_l, over_l, per_type = rm.parts(y, with_sums=True)
            port_reward = np.where(x, gain_l - over_l, 0.0)  # x_l q_l, eq. 5
            reward = float(port_reward.sum())
            gain = float(gain_l[x].sum())
            overhead = float(over_l[x].sum())
            used = per_type[x].sum(axis=0)  # (K,) allocated to ports with a job
            util = float(used @ self._util_w)  # mean over existing types of used / capacity
        metrics = {"expected_reward": reward, "gain": gain, "overhead": overhead, "repaired": repaired,
                   "utilisation": util}
        self._counts += x
        self._total += reward
        self._last_y = y
        self._t += 1
        truncated = self._t >= self.horizon
        if truncated and self.oracle:
            from clustergym.envs.multiserver.allocation.oracle import best_static_allocation

            opt = best_static_allocation(self.problem, self._counts)
            metrics.update(episode_best_static=opt.value, episode_best_static_upper=opt.upper_bound,
                           episode_regret=opt.value - self._total)  # eq. 6
        self._arrivals = self._slot()
        info = {"feedback": {"allocation": y, "port_reward": port_reward}, "metrics": metrics, "t": self._t}
        return self._obs(), reward, False, truncated, info

    # -- rendering ----------------------------------------------------------------------------
    def render(self):
        if self.render_mode is None:
            return None
        from clustergym.envs.multiserver.allocation.render import render_ansi, render_rgb

        if self.render_mode == "ansi":
            return render_ansi(self, self._t, self._arrivals, self._last_y)
        return render_rgb(self, self._t, self._arrivals, self._last_y)
