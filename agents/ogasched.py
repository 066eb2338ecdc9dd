"""OGASched: online gradient ascent for multi-server jobs (ogasched.md §3, Algorithm 1).

Per slot t (Algorithm 1, lines 3–32):
  observe x(t); play y(t); ∇q(x(t), y(t)) by eq. 9 (k* of eq. 10 per port);
  y(t+1) = Π_Y(y(t) + η_t ∇q) (eq. 11) with the exact Euclidean projection of
  ``clustergym.envs.multiserver.projection`` (eqs. 12–13 solved for all (r, k) at once);
  η_{t+1} = η_t · decay (Table 1: η_0 = 25, decay 0.9999).

Table 1's step in the paper's units (``eta_units``). §4: "the initial learning rate and the decay are
used to tune the learning rate at each time t around the value (26)". The paper names no unit for
a_l^k and c_r^k. Counting allocations in units 1/s of the problem's unit (z = s·y) leaves the problem
and its rewards unchanged but multiplies diam(Y) by s and divides ‖∇q‖ by s, so eq. 26's step grows by
s² while Table 1's η_0 stays a number: Algorithm 1 in z with step η is Algorithm 1 in y with η / s².
In device units eq. 26's median step at Table 1's T = 2000 is 0.40 (η_0 / eq. 26 = 63, instances 0–4;
docs/ogasched.md), so η_0 = 25 is the step §4 says it tunes around when s² = 25 / 0.40 ≈ 64, s = 8:
one device counted as 8 units. ``eta_units="eighth-device"`` (default) reads η_0 in those units
(the step applied to y is η_t / 64); ``eta_units="problem"`` is the earlier reading (η_t applied to
y as is, 64× eq. 26's step in device units).
"""

from __future__ import annotations

import numpy as np

from clustergym.core.agent import BaseAgent
from clustergym.core.scenario import check_choice, check_int, check_real
from clustergym.envs.multiserver.allocation.scenario import utility_derivative
from clustergym.envs.multiserver.projection import AllocationLayout, SegmentSum

__all__ = ["OGASched", "proportional_share"]


def proportional_share(problem, active: np.ndarray | None = None) -> np.ndarray:
    """y_(l,r)^k = min(a_l^k, c_r^k a_l^k / Σ_{l'∈L_r} a_l'^k): every port's share of every server.

    Feasible (eqs. 3–4); the paper's "well designed initial solution" (§4.1) is not specified; we use
    this proportional share. With ``active`` ((L,) bool), only the active ports take a
    share and the sum runs over the active ports of L_r (the authors' code's initial solution,
    ``Y.init_value``).
    """
    pb = problem
    a = pb.edge_demand  # (E, K)
    if active is not None:
        a = a * np.asarray(active, dtype=bool)[pb.edge_port][:, None]
    tot = np.zeros((pb.num_servers, pb.num_device_types))
    np.add.at(tot, pb.edge_server, a)  # once per reset, not per step
    denom = tot[pb.edge_server]
    share = np.divide(pb.capacity[pb.edge_server] * a, denom, out=np.zeros_like(a, dtype=float), where=denom > 0)
    return np.minimum(a, share)


class OGASched(BaseAgent):
    """Algorithm 1 of ogasched.md.

    Options:
        eta0: initial learning rate η_0 (Table 1: 25).
        eta_units: the unit η_0 and the decayed η_t are read in (module docstring). "eighth-device"
            (default): one unit of the problem counted as ETA_UNIT_SCALE = 8 units, so the step applied
            to y is η_t / 64 — Table 1's η_0 is then about eq. 26's step, as §4 says it should be.
            "problem": η_t applied to y as is (the earlier reading). Unused with ``lr="eq26"``
            (eq. 26 is the same step in every unit).
        decay: η_{t+1} = decay · η_t (Table 1: 0.9999); in (0, 1.001], so Fig. 4(b)'s 1.0001 (a growing
            step) can be run.
        lr: "decay" (the paper's experiments) or "eq26": η_t = diam(Y) / (||∇q(x(t), y(t))|| √T) with
            diam(Y) bounded by eq. 25 (the theory's step, §3.3).
        horizon: T for ``lr="eq26"``. Default None: T is the env's horizon, read from the public
            problem (``problem.horizon``, set by the env: the episode is truncated after T slots).
            Passing a number overrides it (e.g. to tune for a different T); with neither, reset()
            raises ValueError rather than assume a T.
        play: the play order.
            "algorithm1" (default, faithful to Algorithm 1 and to the regret proof): play y(t),
            chosen at the end of slot t−1 before x(t) is seen (idle ports hold resources), then
            y(t+1) = Π_Y(y(t) + η_t ∇q(x(t), y(t))) (eq. 11).
            "authors" (the authors' public code, ``ogasched/oga/oga.py``): at slot t, with x(t)
            observed, take the gradient ∇q(x(t), y) at the previous *played* allocation y, project
            Π_Y(y + η_t ∇q) (eq. 11), set the channels of idle ports to 0, play that and carry it as
            the next state. Slot 1 plays the proportional share among the active ports (their
            ``Y.init_value``) without a gradient step; η decays after every later slot.
        arrival_aware: False (default, the paper). True (a documented improvement, not in the
            paper, only with play="algorithm1"): since x(t) is observed at the start of the slot
            (Alg. 1 line 3), play Π_Y((y(t) + η_t ∇q(x(t), y(t))) restricted to the ports with a
            job) — only active ports are projected, so they take the capacity idle ports would hold;
            the learner's own state y(t+1) still follows eq. 11 unchanged. It differs from
            play="authors" in two ways: idle ports are removed *before* the projection (so active
            ports receive their capacity) and the state is not the played allocation.

    Where the paper is silent: ties in k* (eq. 10) go to the lowest k; the max of eq. 5 is not
    differentiable at ties and eq. 9 picks that one k* (a subgradient); y(1) is the proportional share.
    """

    name = "ogasched"
    families = ("multiserver-allocation",)

    # Table 1 of ogasched.md: "initial learning rate η_0 25, decay 0.9999".
    TABLE1_ETA0 = 25.0
    TABLE1_DECAY = 0.9999
    MAX_DECAY = 1.001  # Fig. 4(b) compares 0.9999 with 1.0001
    # "tune the learning rate ... around the value (26)" (§4): s = 8, so η_0 = 25 is η_0 / s² ≈ 0.39 per
    # device unit, eq. 26's median step (0.40) in device units (module docstring).
    ETA_UNIT_SCALE = 8.0
    ETA_UNITS = {"eighth-device": ETA_UNIT_SCALE, "problem": 1.0}

    def __init__(self, eta0: float = TABLE1_ETA0, decay: float = TABLE1_DECAY, lr: str = "decay",
                 horizon: int | None = None, play: str = "algorithm1", arrival_aware: bool = False,
                 eta_units: str = "eighth-device"):
        self.eta_units = check_choice("eta_units", eta_units, tuple(self.ETA_UNITS))
        self.eta0 = check_real("eta0", eta0, 0.0, None, lo_open=True)
        # η_t = η0·decay^t (Table 1: 0.9999); Fig. 4(b) also runs 1.0001, a step that grows: accepted up to
        # MAX_DECAY (a step that grows by more than e^1 over 1000 slots is no setting of the paper's)
        self.decay = check_real("decay", decay, 0.0, self.MAX_DECAY, lo_open=True)
        self.lr = check_choice("lr", lr, ("decay", "eq26"))
        self.horizon = None if horizon is None else check_int("horizon", horizon, 1, None)
        self.play = check_choice("play", play, ("algorithm1", "authors"))
        if not isinstance(arrival_aware, (bool, np.bool_)):
            raise ValueError(f"arrival_aware={arrival_aware!r} is invalid: expected true or false")
        self.arrival_aware = bool(arrival_aware)
        if self.arrival_aware and self.play == "authors":
            raise ValueError("arrival_aware=true is valid only with play='algorithm1' (play='authors' already "
                             "uses x(t) before playing)")

    def reset(self, problem, *, seed=None) -> None:
        super().reset(problem, seed=seed)
        pb = problem
        self.layout = AllocationLayout(pb.edge_port, pb.edge_server, pb.edge_demand, pb.capacity, pb.num_servers)
        self.alpha_e = np.ascontiguousarray(pb.alpha[pb.edge_server])  # (E, K) α_r^k of eq. 27
        code_e = np.ascontiguousarray(pb.utility[pb.edge_server])  # (E, K) family of eq. 27
        codes = np.unique(code_e)
        self.code_e = int(codes[0]) if codes.size == 1 else code_e  # one int: utility_derivative's fast path
        self.port_sums = SegmentSum(pb.edge_port, pb.num_ports)  # (E, ...) -> (L, ...): Σ_{r∈R_l}
        self.beta = np.asarray(pb.beta, dtype=np.float64)
        self.edge_port = np.asarray(pb.edge_port)
        self.y = proportional_share(pb)  # y(1)
        self.t = 0  # slots played
        self.eta = self.eta0
        a_bar = pb.demand.max(axis=0)  # (K,) ā^k
        self.diam = float(np.sqrt(2.0 * np.sum(a_bar * pb.capacity.sum(axis=0))))  # eq. 25
        self.T = self.horizon if self.horizon is not None else getattr(pb, "horizon", None)
        if self.lr == "eq26" and self.T is None:
            raise ValueError("lr='eq26' needs the horizon T: the problem has none (problem.horizon is None); "
                             "pass horizon=<int >= 1>")

    def gradient(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """∇q(x, y) of eq. 9, shape (E, K)."""
        g = utility_derivative(y, self.alpha_e, self.code_e)  # (f_r^k)'(y_(l,r)^k)
        per_type = self.port_sums(y) * self.beta  # (L, K) β_k Σ_{r∈R_l} y_(l,r)^k
        k_star = np.argmax(per_type, axis=1)  # eq. 10 (first k on ties)
        g = g.copy() if not g.flags.writeable else g
        g[np.arange(g.shape[0]), k_star[self.edge_port]] -= self.beta[k_star[self.edge_port]]  # k = k*
        return g * x[self.edge_port][:, None]  # x_l(t) factor of eq. 9

    def step_size(self, g: np.ndarray) -> float:
        """η_t applied to y: eq. 26 (diam(Y) / (||∇q|| √T)) or Table 1's η_0 · decay^t / s² (``eta_units``)."""
        if self.lr == "eq26":
            assert self.T is not None  # reset() refuses eq26 without a horizon
            norm = float(np.sqrt(np.sum(g * g)))
            return self.diam / (norm * np.sqrt(self.T)) if norm > 0 else 0.0  # eq. 26
        return self.eta / self.ETA_UNITS[self.eta_units] ** 2  # η_t read in units 1/s of the problem's

    def act(self, obs, info):
        x = np.asarray(obs["arrivals"]).astype(bool)
        self.t += 1
        if self.play == "authors":
            if self.t == 1:  # the authors' initial solution: proportional share among active ports
                self.y = proportional_share(self.problem, active=x)
                return self.y
            g = self.gradient(x, self.y)  # ∇q(x(t), y) at the previous played y (eq. 9)
            z = self.y + self.step_size(g) * g
            y = self.layout.project(z)  # eq. 11
            y[~x[self.edge_port]] = 0.0  # the authors zero the channels of idle ports
            self.y = y  # played and carried as the next state
            self.eta *= self.decay
            return y
        y = self.y
        g = self.gradient(x, y)
        z = y + self.step_size(g) * g  # Alg. 1 line 5
        played = y
        if self.arrival_aware:
            played = self.layout.project(z * x[self.edge_port][:, None])
        self.y = self.layout.project(z)  # eq. 11, lines 6–31
        self.eta *= self.decay  # line 32
        return played
