"""Native vector env for P2, MultiServerAllocation-v0 (OGASched paper, ogasched.md §2): N envs as arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector.utils import batch_space

from clustergym.core import Scenario
from clustergym.envs.multiserver.allocation.dynamics import ARRIVAL_BLOCK
from clustergym.envs.multiserver.allocation.env import MultiServerAllocationEnv
from clustergym.vector_env import ClusterVectorEnv, with_masks

__all__ = ["MultiServerAllocationVectorEnv"]


class MultiServerAllocationVectorEnv(ClusterVectorEnv):
    """N independent copies of :class:`MultiServerAllocationEnv` (same scenario), stepped as arrays.

    ## Description
    The model, rewards and infeasibility rules are those of the single env (eqs. 1–7 and 27, see
    :class:`~clustergym.envs.multiserver.allocation.env.MultiServerAllocationEnv`), computed by the
    same object: the single env's :class:`~clustergym.envs.multiserver.allocation.dynamics.AllocationDynamics`
    (``env.dynamics``), whose ``step_batch`` runs the per-env kernel ``slot_step`` that the single env
    runs (the check of eqs. 3–4 and eq. 5 with eq. 7, fused) for every sub-env in one parallel numba
    kernel (``prange`` over chunks of 16 sub-envs, scratch per chunk), reading float32 or float64
    actions as given (no conversion pass), with the same plan (``AllocationDynamics.plan``, static
    entry lists): utilities only for ports with a job and entries that are not structurally zero
    (a = 0 or c_r^k = 0; non-zero values there are checked and, if within the tolerance, counted).
    Arrivals come from each sub-env's own child generator in blocks of 256 slots
    (``AllocationDynamics.draw_arrivals``, as in the single env), so sub-env i seeded with s_i
    replays a single env reset with ``seed=s_i`` (``clustergym.vector_env``). Create it with ``gym.make_vec("clustergym/MultiServerAllocation-v0",
    num_envs=N, vectorization_mode="vector_entry_point", **kwargs)``.

    ## Action Space
    ``Box(0, a, shape=(N, |E|, K), float32)`` (``single_action_space`` = the single env's box); row i
    is sub-env i's allocation in device units. float64 actions are accepted as well.

    ## Observation Space
    | key        | shape     | dtype   | meaning                                          |
    |------------|-----------|---------|--------------------------------------------------|
    | arrivals   | (N, L)    | int8    | x_l(t) of every sub-env                           |
    | t          | (N, 1)    | float32 | slots elapsed in each sub-env's episode          |

    ## Rewards
    (N,) float64: q(x(t), y(t)) of eq. 5 per sub-env (0 for a sub-env being autoreset).

    ## Infeasible actions
    As the single env, per row: ``"repair"`` replaces an allocation outside Y (beyond 1e-6 device
    units) by its exact Euclidean projection Π_Y, computed inside ``step_batch`` by the compiled
    kernel the single env uses (``projection.project_into``), in parallel over sub-envs;
    ``"raise"``: ValueError naming the sub-env, then the constraint (eq. 3 or eq. 4). Shape other than (N, |E|, K), NaN/inf: ValueError naming the first offending sub-env.

    ## Info
    Arrays with a leading N axis, each with a ``_key`` mask (Gymnasium's vector layout): ``t`` (N,)
    int64; ``feedback``: ``allocation`` (N, |E|, K) the executed y — the action array itself (no
    copy, its dtype) when no sub-env needed repair, else a float64 copy with the repaired rows
    projected — and ``port_reward`` (N, L) x_l q_l; ``metrics``: ``expected_reward``, ``gain``,
    ``overhead``, ``utilisation`` (N,) float64 and ``repaired`` (N,) int64. With ``oracle=True``, at
    the slot where a sub-env truncates: ``episode_best_static``, ``episode_best_static_upper``,
    ``episode_regret`` (N,), set (mask True) only for the sub-envs that truncate; the hindsight
    optimum is an LP solved per sub-env (a fraction of a second each). ``feedback``/``metrics`` are
    absent (mask False) for sub-envs being autoreset.

    ## Starting State / Episode End
    Each sub-env truncates after ``horizon`` slots and autoresets at the next step
    (``AutoresetMode.NEXT_STEP``).

    ## Arguments
    ``num_envs`` (N, default 1) and the single env's arguments: ``scenario``, ``scenario_seed``,
    ``horizon``, ``oracle`` (default True, as the single env), ``infeasible``, scenario parameters.
    ``render_mode`` must be None.

    ## Version History
    * v0: initial version.
    """

    family = "multiserver-allocation"
    metrics_spec = MultiServerAllocationEnv.metrics_spec  # the single env's declaration (clustergym/metrics.py)
    _rng_names = ("arrivals",)

    def __init__(self, num_envs: int = 1, scenario: str | Scenario = "paper", *, scenario_seed: int = 0,
                 horizon: int = 2000, oracle: bool = True, infeasible: str = "repair",
                 render_mode: str | None = None, **params: Any):
        super().__init__(num_envs, horizon=horizon, infeasible=infeasible, oracle=oracle, render_mode=render_mode)
        # The single env builds and validates the scenario and spaces; its dynamics object (arrivals,
        # eqs. 3–5, the error messages) is the one this env steps for every sub-env.
        s = MultiServerAllocationEnv(scenario, scenario_seed=scenario_seed, horizon=horizon, oracle=False,
                                     infeasible=infeasible, **params)
        self.scenario = s.scenario
        self.problem = pb = s.problem
        self.dynamics = s.dynamics
        N, self._E, self._L, self._K = self.num_envs, pb.num_edges, pb.num_ports, pb.num_device_types
        self.single_action_space = s.action_space
        self.single_observation_space = s.observation_space
        self.action_space = batch_space(self.single_action_space, N)
        self.observation_space = batch_space(self.single_observation_space, N)
        self._space_desc = self.dynamics.space_desc
        self._repair_buf = np.empty((N, self._E, self._K))  # (N, E, K) float64, see step()
        self._arr_block = np.zeros((N, ARRIVAL_BLOCK, self._L), dtype=bool)  # (N, B, L) arrivals of the block
        self._pos = np.zeros(N, dtype=np.int64)  # (N,) current slot's index in the block
        self._counts = np.zeros((N, self._L))  # (N, L) n_l = Σ_t x_l(t) (the hindsight optimum's input)
        self._total = np.zeros(N)  # (N,) Σ_t q(x(t), y(t))
        self._arrivals = np.zeros((N, self._L), dtype=bool)  # (N, L)
        self._rows = np.arange(N)

    # -- per sub-env episode state ------------------------------------------------------------
    def _refill(self, i: int) -> None:
        self._arr_block[i] = self.dynamics.draw_arrivals(self._rngs[i]["arrivals"])  # eq. 1
        self._pos[i] = 0

    def _start_episode(self, i: int) -> None:
        self._counts[i] = 0.0
        self._total[i] = 0.0
        self._refill(i)
        self._arrivals[i] = self._arr_block[i, 0]

    def _observations(self) -> dict:
        return {"arrivals": self._arrivals.astype(np.int8), "t": self._t.astype(np.float32)[:, None]}

    def _reset_info(self, mask: np.ndarray) -> dict:
        return with_masks({"t": self._t.copy()}, mask)

    # -- stepping ----------------------------------------------------------------------------
    def _as_actions(self, actions: Any) -> np.ndarray:
        shape = (self.num_envs, self._E, self._K)
        if isinstance(actions, np.ndarray) and actions.dtype in (np.float32, np.float64) and actions.shape == shape:
            return np.ascontiguousarray(actions)  # no copy for a C-contiguous float32/float64 batch
        try:
            raw = np.asarray(actions)
        except Exception:  # noqa: BLE001 - ragged lists and exotic objects
            raise ValueError(f"actions cannot be read as numbers, expected {self._space_desc} per sub-env") from None
        if raw.dtype.kind not in "biuf":  # like the single env: no complex, strings, datetimes or objects
            raise ValueError(f"actions have dtype {raw.dtype}, expected real numbers ({self._space_desc} per sub-env)")
        y = raw.astype(np.float64, copy=False)
        if y.shape != shape:
            raise ValueError(f"actions have shape {y.shape}, expected {shape} (one row per sub-env, each "
                             f"{self._space_desc})")
        return np.ascontiguousarray(y)

    def step(self, actions: Any):
        self._require_reset()
        y = self._as_actions(actions)
        N = self.num_envs
        stepping = ~self._autoreset  # (N,) sub-envs that step (the others reset now)
        repair = self.infeasible == "repair"
        out = self._repair_buf  # (N, E, K) receives the repaired rows; handed out (and replaced) only if used
        res = self.dynamics.step_batch(y, self._arrivals, stepping, repair, out)  # eqs. 3–5, Π_Y, per sub-env
        nonfinite, bad_box, bad_cap, port_reward = res.nonfinite, res.bad_box, res.bad_cap, res.port_reward
        if nonfinite.any():
            raise ValueError(f"sub-env {int(np.argmax(nonfinite > 0))}: action contains NaN or inf, "
                             f"expected {self._space_desc}")
        repaired = np.where(stepping, bad_box + bad_cap, 0)  # (N,) violated constraints
        allocation = y
        if repaired.any():
            bad = np.flatnonzero(repaired)
            if not repair:  # "raise"
                i = int(bad[0])
                raise ValueError(f"sub-env {i}: " + self.dynamics.infeasible_message(y[i], self._arrivals[i]))
            # The kernel projected the repaired rows into ``out`` (eqs. 11–13) and evaluated eq. 5 there.
            allocation = out
            self._repair_buf = np.empty_like(out)  # the caller keeps ``allocation``: never write into it again
            kept = repaired == 0
            if kept.any():
                allocation[kept] = y[kept]
        # The state changes only from here on.
        reward = port_reward.sum(axis=1)  # (N,) eq. 5 (rows of the autoresetting sub-envs are 0)
        metrics = {"expected_reward": reward.copy(), "gain": res.gain, "overhead": res.overhead,
                   "repaired": repaired, "utilisation": res.utilisation}
        np.add(self._counts, self._arrivals, out=self._counts, where=stepping[:, None])
        self._total += reward
        self._t += stepping
        truncated = stepping & (self._t >= self.horizon)
        terminated = np.zeros(N, dtype=bool)
        if self.oracle and truncated.any():
            from clustergym.envs.multiserver.allocation.oracle import best_static_allocation

            best, upper, regret = np.zeros(N), np.zeros(N), np.zeros(N)
            for i in np.flatnonzero(truncated):
                opt = best_static_allocation(self.problem, self._counts[i])
                best[i], upper[i], regret[i] = opt.value, opt.upper_bound, opt.value - self._total[i]  # eq. 6
            episode = with_masks({"episode_best_static": best, "episode_best_static_upper": upper,
                                  "episode_regret": regret}, truncated)
        else:
            episode = {}
        self._pos += stepping
        for i in np.flatnonzero(self._pos >= ARRIVAL_BLOCK):
            self._refill(int(i))
        self._autoreset_envs()  # NEXT_STEP: sub-envs that ended at the last step start over now
        self._arrivals = self._arr_block[self._rows, self._pos]
        self._autoreset = truncated | terminated
        info = with_masks({"t": self._t.copy()}, np.ones(N, dtype=bool))
        info.update(with_masks({"feedback": {"allocation": allocation, "port_reward": port_reward},
                                "metrics": metrics}, stepping))
        info["metrics"].update(episode)
        return self._observations(), reward, terminated, truncated, info
