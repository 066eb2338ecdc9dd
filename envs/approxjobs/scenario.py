"""Scenarios for P4, ApproxJobs (OPM paper, opm.md §III and §VI "Simulation Setup").

Public problem (:class:`ApproxProblem`): machines and their prices p_i, the window size J_max, the
horizon T and the utility exponent β. Jobs are *not* public in advance (the arrival process is
unknown to an online scheduler, §III); each job's a_j, d_j, B_j, v_j, β_j become visible in the
observation when it arrives. Hidden truth (:class:`ApproxTruth`): the job list, the machine speed
factors, the mean rates θ_i and the service-rate law (``service``).

Modelling choices, each a documented reading of §VI:

* **Speed factors (``speed_low``; an extension, not the paper's).** The paper's machines all share
  one rate law (U[0.7,1] in APs, U[0,0.1] in UPs): **identical machines**, which ``scale="paper"``
  uses (speed_low = 1). ``speed_low < 1`` gives machine i a speed factor
  s_i ~ U[speed_low, 1] multiplying its rate, so machines differ in mean θ_i and the UCB estimate
  (eq. 66) has something to learn; the small default scale keeps speed_low = 0.3, and
  ``clustergym reproduce opm`` reports ``scale="paper", speed_low=0.3`` as the extension beside the
  paper's setup. Identical machines price a slot at 2θ ≈ 1.41 each; with speed_low = 0.3 the prices
  average ≈ 0.91, so a budget buys ≈ 1.5× more machine-slots.
* **Prices.** ``price="paper"`` (default): p_i = 2 θ_i, "two times of the mean service rate" (§VI).
  Note this makes the expected cost per unit of work equal on every machine; a scheduler that knew
  the rule could read θ_i off p_i (none of our agents does). ``price="uniform"``: p_i ~
  U[price_low, price_high] independent of θ_i (used by the single-job scenario, where p ∝ θ would
  make every budget-exhausting schedule optimal).
* **Jobs.** B_j = q_j (d_j − a_j) with q_j ~ U[2, 100]; f_j(X) = v_j X^β with v_j ~ U[1, 5] (§VI).
  Job j arrives at the end of slot a_j and may run in slots a_j+1 .. d_j (eq. 2); slots are
  numbered 1..T. Lifetimes d_j − a_j ~ U{life_min .. life_max} (synthetic) or from the trace.
* **Arrivals.** ``arrivals="synthetic"``: Poisson(arrival_rate) jobs per slot. ``arrivals=
  "philly"``: submit times and durations of the Philly trace (``trace_path``, read with
  ``load_philly``) from ``trace_start`` seconds on, in slots of ``slot_seconds``; a uniform random
  subset of expected size ``arrival_rate·T`` keeps the trace's burstiness at our cluster size;
  lifetimes (d_j − a_j) are the job's real run time ceil(duration / slot_seconds) clipped to
  [life_min, life_max]; defaults: trace_start = day 20, slot_seconds = 60.
  The paper used a Google trace (10 h) that we do not have.
* **Load.** ``load`` ∈ (0, 1] keeps each job with that probability (independently, with the
  scenario seed): 1 = heavy (all jobs), 0.5 = light ("we only keep half of the jobs", Fig. 2).
* **Sizes.** Default: M=100 machines, J_max=20 visible jobs, T=2000. ``scale="paper"``: M=1000,
  J_max=100, T=50,000 (§VI), identical machines (speed_low = 1; any parameter given explicitly
  overrides the scale's) and arrival_rate 0.25 jobs/slot (below).
* **Load of the paper scale (calibrated, §VI).** §VI gives no arrival rate; it names the trace's load
  "the heavily-loaded case" and halves it for "the lightly-loaded case where we only keep half of the
  jobs from the original trace", and explains the larger gain there by "OPM can find better
  job-to-machine matchings when the cluster resource is enough" (§VI, Fig. 2). We read this as:
  under heavy load the machines the jobs' budgets pay for exceed M (machines scarce), with half of
  the jobs they do not. The **demand** (:func:`demand`) is the number of machines the active jobs'
  budgets pay for per slot, Σ_{j active} q_j / p̄ (q_j = B_j/(d_j−a_j), p̄ the mean price); in steady
  state its mean is rate·E[d−a]·E[q]/p̄ = rate·160·51/1.394 ≈ 5,850·rate machines (identical
  machines). The band the reading allows is M < demand ≤ 2M (heavy > M, light = half ≤ M,
  :data:`HEAVY_DEMAND_BAND`); arrival_rate 0.25 puts the heavy demand near its middle: ≈ 1.46 M
  (light ≈ 0.73 M), every job list inside the band. The earlier rate 0.15 gives ≈ 0.88 M, below M
  (the machines are *not* scarce and Fair reaches ≈ 0.99 of the bound): kept as the named option
  ``scale="paper-0.15"`` (the paper's sizes at 0.15 jobs/slot).
* ``"single"`` scenario: one job, a=0, d=T, budget B = q·T (default q = 0.4·M), uniform prices:
  the setting of §IV (OPS, Theorem 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustergym.core.scenario import (Scenario, check_known, as_generator, check_choice, check_int, check_memory,
                                      check_real, freeze)
from clustergym.envs.approxjobs.service import ServiceModel, mean_rate

__all__ = ["ApproxProblem", "ApproxTruth", "JobList", "make_approx_scenario", "APPROX_SCENARIOS",
           "PAPER_DEFAULTS", "PAPER_SCALE", "SCALES", "HEAVY_DEMAND_BAND", "demand"]


@dataclass(frozen=True, eq=False)
class ApproxProblem:
    """What a scheduler knows before any job arrives."""

    num_machines: int  # M
    max_jobs: int  # J_max, visible window size
    horizon: int  # T (slots 1..T); Theorem 3's parameters use it
    price: np.ndarray  # (M,) p_i, cost of one slot on machine i
    beta: float  # utility exponent of the scenario (each job also reports its own β_j)
    action_mode: str = "machine"  # set by the env: "machine" or "job" (env.py, Action Space)


@dataclass(frozen=True, eq=False)
class JobList:
    """All jobs of an instance, sorted by arrival (hidden: future arrivals)."""

    arrival: np.ndarray  # (N,) int a_j (job runnable in slots a_j+1..d_j)
    deadline: np.ndarray  # (N,) int d_j
    budget: np.ndarray  # (N,) float B_j
    value: np.ndarray  # (N,) float v_j
    beta: np.ndarray  # (N,) float β_j

    def __len__(self) -> int:
        return int(self.arrival.shape[0])


@dataclass(frozen=True, eq=False)
class ApproxTruth:
    """What only the environment and the metrics know."""

    jobs: JobList
    speed: np.ndarray  # (M,) s_i
    mean_rate: np.ndarray  # (M,) θ_i = E[θ_i^t]
    service: ServiceModel


PAPER_DEFAULTS = dict(
    num_machines=100,  # paper: 1000 (scale="paper")
    max_jobs=20,
    horizon=2000,  # paper: 50,000 (scale="paper")
    beta=0.5,  # §VI: β ∈ [0.5, 1); Table I uses 0.5, 0.6, 0.7
    load=1.0,  # fraction of jobs kept (Fig. 2: light = 0.5)
    arrival_rate=0.015,  # expected jobs per slot (≈ 2.4 concurrent jobs of mean life 160)
    life_min=20,
    life_max=300,
    budget_low=2.0,  # §VI: q_j ~ U[2, 100], B_j = q_j (d_j − a_j)
    budget_high=100.0,
    value_low=1.0,  # §VI: v_j ~ U[1, 5]
    value_high=5.0,
    speed_low=0.3,  # our speed factors s_i ~ U[speed_low, 1] (an extension; scale="paper": 1, identical)
    service="gamma",  # §VI alternating AP/UP; "iid" = Assumption 1
    price="paper",  # §VI: p_i = 2 θ_i; "uniform": U[price_low, price_high]
    price_low=0.2,
    price_high=1.0,
    arrivals="synthetic",  # or "philly"
    trace_path=None,
    trace_start=20 * 86400.0,  # seconds after the first job (the Philly trace is sparse before day 20)
    slot_seconds=60.0,
    scale="default",  # or "paper" (§VI's sizes and load), "paper-0.15" (the same at the earlier rate 0.15)
)

# §VI's setup: 1000 identical machines (one rate law: speed factor 1), J_max = 100, T = 50,000, and the arrival
# rate calibrated to §VI's heavy load (module docstring, "Load of the paper scale").
PAPER_SCALE = dict(num_machines=1000, max_jobs=100, horizon=50_000, arrival_rate=0.25, speed_low=1.0)
# The named scales; "paper-0.15" is the paper scale at the earlier arrival rate 0.15 (demand ≈ 0.88 M, not scarce).
SCALES = {"default": {}, "paper": PAPER_SCALE, "paper-0.15": {**PAPER_SCALE, "arrival_rate": 0.15}}
# §VI's heavy load read as machines scarce with all jobs, not with half of them: M < demand <= 2M (in units of M).
HEAVY_DEMAND_BAND = (1.0, 2.0)

SINGLE_DEFAULTS = dict(num_machines=10, horizon=2000, beta=0.5, budget_rate=None, value=3.0,
                       speed_low=0.3, service="iid", price_low=0.2, price_high=1.0)

APPROX_SCENARIOS = ("paper", "philly", "single")


def _validate(p: dict) -> dict:
    p["num_machines"] = check_int("num_machines", p["num_machines"], 1, 100_000)
    p["max_jobs"] = check_int("max_jobs", p["max_jobs"], 1, 10_000)
    p["horizon"] = check_int("horizon", p["horizon"], 1, None)
    p["beta"] = check_real("beta", p["beta"], 0.0, 1.0, lo_open=True)
    p["load"] = check_real("load", p["load"], 0.0, 1.0, lo_open=True)
    p["arrival_rate"] = check_real("arrival_rate", p["arrival_rate"], 0.0, 1000.0, lo_open=True)
    p["life_min"] = check_int("life_min", p["life_min"], 1, None)
    p["life_max"] = check_int("life_max", p["life_max"], p["life_min"], None)
    p["budget_low"] = check_real("budget_low", p["budget_low"], 0.0, None, lo_open=True)
    p["budget_high"] = check_real("budget_high", p["budget_high"], p["budget_low"], None)
    p["value_low"] = check_real("value_low", p["value_low"], 0.0, None, lo_open=True)
    p["value_high"] = check_real("value_high", p["value_high"], p["value_low"], None)
    p["speed_low"] = check_real("speed_low", p["speed_low"], 0.0, 1.0, lo_open=True)
    p["service"] = check_choice("service", p["service"], ("gamma", "iid"))
    p["price"] = check_choice("price", p["price"], ("paper", "uniform"))
    p["price_low"] = check_real("price_low", p["price_low"], 0.0, None, lo_open=True)
    p["price_high"] = check_real("price_high", p["price_high"], p["price_low"], None)
    p["arrivals"] = check_choice("arrivals", p["arrivals"], ("synthetic", "philly"))
    p["trace_start"] = check_real("trace_start", p["trace_start"], 0.0, None)
    p["slot_seconds"] = check_real("slot_seconds", p["slot_seconds"], 0.0, None, lo_open=True)
    p["scale"] = check_choice("scale", p["scale"], tuple(SCALES))
    if p["arrivals"] == "philly" and not p["trace_path"]:
        raise ValueError("arrivals='philly' needs trace_path=<path to philly.csv> (see envs/traces/philly.py)")
    if p["arrivals"] == "synthetic":  # per slot: the arrival counts and slots (2 int64); per job: about 10 arrays
        check_memory(8.0 * p["horizon"] * (2 + 10 * p["arrival_rate"]), f"horizon={p['horizon']}",
                     f"the synthetic arrivals of {p['horizon']:,} slots at arrival_rate={p['arrival_rate']:g}")
    return p


def _machines(rng: np.random.Generator, p: dict, model: ServiceModel):
    M = p["num_machines"]
    speed = rng.uniform(p["speed_low"], 1.0, size=M)  # s_i
    theta = mean_rate(model, speed)  # θ_i
    if p["price"] == "paper":
        price = 2.0 * theta  # §VI: "two times of the mean service rate"
    else:
        price = rng.uniform(p["price_low"], p["price_high"], size=M)
    return speed, theta, price


def _arrivals(rng: np.random.Generator, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """(arrival slot a_j in 0..T-1, lifetime d_j − a_j) before load thinning."""
    T = p["horizon"]
    if p["arrivals"] == "synthetic":
        counts = rng.poisson(p["arrival_rate"], size=T)  # jobs arriving at the end of slot a = 0..T-1
        a = np.repeat(np.arange(T), counts)
        life = rng.integers(p["life_min"], p["life_max"] + 1, size=a.size)
        return a, life
    from clustergym.envs.traces.philly import load_philly

    tr = load_philly(p["trace_path"])
    t0, span = p["trace_start"], T * p["slot_seconds"]
    keep = (tr.submit >= t0) & (tr.submit < t0 + span)
    submit, dur = tr.submit[keep] - t0, tr.duration[keep]
    if submit.size == 0:
        raise ValueError(f"trace_start={t0!r} leaves no job of {p['trace_path']} in the first "
                         f"{T} slots of {p['slot_seconds']} s")
    target = p["arrival_rate"] * T
    if submit.size > target:  # uniform subset of the trace's jobs, order kept
        idx = np.sort(rng.choice(submit.size, size=int(round(target)), replace=False))
        submit, dur = submit[idx], dur[idx]
    a = np.floor(submit / p["slot_seconds"]).astype(np.int64)
    dur = np.where(np.isfinite(dur), dur, p["life_min"] * p["slot_seconds"])
    life = np.clip(np.ceil(dur / p["slot_seconds"]), p["life_min"], p["life_max"]).astype(np.int64)
    return a, life


def make_approx_scenario(name: str = "paper", seed: int | np.random.Generator | None = 0, **params) -> Scenario:
    """Build a P4 scenario by name; ``params`` override the named defaults (validated)."""
    if name == "single":
        return _single(seed, **params)
    if name not in ("paper", "philly"):
        raise ValueError(f"scenario={name!r} is invalid: expected one of {', '.join(map(repr, APPROX_SCENARIOS))}")
    check_known(params, PAPER_DEFAULTS, name)
    base = dict(PAPER_DEFAULTS)
    if name == "philly":
        if params.get("arrivals", "philly") != "philly":
            raise ValueError(f"arrivals={params['arrivals']!r} contradicts scenario='philly' (its arrivals are the "
                             "trace's); use scenario='paper' for synthetic arrivals")
        base["arrivals"] = "philly"
    arrivals = params.get("arrivals", base["arrivals"])
    unused = {"synthetic": ("trace_path", "trace_start", "slot_seconds")}.get(arrivals, ()) if isinstance(arrivals, str) \
        else ()  # a non-string is refused by _validate, naming arrivals
    given = sorted(set(unused) & set(params))
    if given:  # a parameter that would be ignored is an error, not silently recorded in the results
        raise ValueError(f"{', '.join(given)} is not used with arrivals={arrivals!r} (scenario {name!r})")
    scale = params.get("scale", "default")
    if isinstance(scale, str):  # anything else is refused by _validate, naming scale
        base.update(SCALES.get(scale, {}))
    p = _validate({**base, **params})
    rng = as_generator(seed)
    model = ServiceModel(kind=p["service"])
    speed, theta, price = _machines(rng, p, model)
    a, life = _arrivals(rng, p)
    kept = rng.random(a.size) < p["load"]  # Fig. 2 light load: keep a fraction of the jobs
    a, life = a[kept], life[kept]
    n = a.size
    q = rng.uniform(p["budget_low"], p["budget_high"], size=n)  # §VI
    v = rng.uniform(p["value_low"], p["value_high"], size=n)  # §VI
    jobs = JobList(arrival=freeze(a.astype(np.int64)), deadline=freeze((a + life).astype(np.int64)),
                   budget=freeze(q * life), value=freeze(v), beta=freeze(np.full(n, p["beta"])))
    problem = ApproxProblem(num_machines=p["num_machines"], max_jobs=p["max_jobs"], horizon=p["horizon"],
                            price=freeze(price), beta=p["beta"])
    truth = ApproxTruth(jobs=jobs, speed=freeze(speed), mean_rate=freeze(theta), service=model)
    return Scenario(name=name, problem=problem, truth=truth, params=p)


def demand(scenario: Scenario, skip: int = 0) -> float:
    """Mean number of machines the active jobs' budgets pay for per slot, Σ_{j active at t} q_j / p̄ (q_j =
    B_j/(d_j − a_j), p̄ the mean price), over slots skip+1..T (``skip`` = life_max leaves out the first jobs'
    ramp-up). The load measure of "Load of the paper scale" (module docstring); divide by M for a share."""
    pb, jobs = scenario.problem, scenario.truth.jobs
    T = pb.horizon
    if skip >= T:
        raise ValueError(f"skip={skip!r} is invalid: expected fewer than the horizon's {T} slots")
    rate = np.asarray(jobs.budget) / np.maximum(np.asarray(jobs.deadline) - np.asarray(jobs.arrival), 1)
    per_slot = np.zeros(T + 2)
    start = np.minimum(np.asarray(jobs.arrival) + 1, T + 1)  # runnable in slots a_j+1..d_j (eq. 2)
    stop = np.minimum(np.asarray(jobs.deadline), T) + 1
    np.add.at(per_slot, start, rate)
    np.add.at(per_slot, stop, -rate)
    active = np.cumsum(per_slot)[1:T + 1]  # budget per slot of the jobs active in slot t = 1..T
    return float(active[skip:].mean() / float(np.mean(pb.price)))


def _single(seed, **params) -> Scenario:
    """One job present from slot 1 to T (a=0, d=T), budget B = budget_rate·T (§IV)."""
    check_known(params, SINGLE_DEFAULTS, "single")
    p = {**SINGLE_DEFAULTS, **params}
    p["num_machines"] = check_int("num_machines", p["num_machines"], 1, 100_000)
    p["horizon"] = check_int("horizon", p["horizon"], 1, None)
    p["beta"] = check_real("beta", p["beta"], 0.0, 1.0, lo_open=True)
    p["value"] = check_real("value", p["value"], 0.0, None, lo_open=True)
    p["speed_low"] = check_real("speed_low", p["speed_low"], 0.0, 1.0, lo_open=True)
    p["service"] = check_choice("service", p["service"], ("gamma", "iid"))
    p["price_low"] = check_real("price_low", p["price_low"], 0.0, None, lo_open=True)
    p["price_high"] = check_real("price_high", p["price_high"], p["price_low"], None)
    if p["budget_rate"] is None:
        p["budget_rate"] = 0.4 * p["num_machines"] * 0.5 * (p["price_low"] + p["price_high"])
    p["budget_rate"] = check_real("budget_rate", p["budget_rate"], 0.0, None, lo_open=True)
    rng = as_generator(seed)
    model = ServiceModel(kind=p["service"])
    speed, theta, price = _machines(rng, {**p, "price": "uniform"}, model)
    T = p["horizon"]
    jobs = JobList(arrival=freeze(np.array([0])), deadline=freeze(np.array([T])),
                   budget=freeze(np.array([p["budget_rate"] * T])), value=freeze(np.array([p["value"]])),
                   beta=freeze(np.array([p["beta"]])))
    problem = ApproxProblem(num_machines=p["num_machines"], max_jobs=1, horizon=T, price=freeze(price), beta=p["beta"])
    truth = ApproxTruth(jobs=jobs, speed=freeze(speed), mean_rate=freeze(theta), service=model)
    return Scenario(name="single", problem=problem, truth=truth, params=p)


def offline_single_optimum(scenario: Scenario) -> float:
    """Benchmark X* of eq. 7 for a single-job scenario: P1 with θ_i^t replaced by θ_i.

    With one job and f increasing, P1 maximises Σ_t Σ_i θ_i x^i(t) s.t. Σ_t Σ_i p_i x^i(t) <= B,
    x^i(t) ∈ {0,1}: a knapsack of T copies of every machine. We return the fractional (LP) optimum,
    greedy by θ_i/p_i (an upper bound on the integer optimum, exceeding it by less than one item,
    max_i θ_i). Returns X*; the utility benchmark of eq. 6 is T f(X*/T).
    """
    pb, tr = scenario.problem, scenario.truth
    T, B = pb.horizon, float(tr.jobs.budget[0])
    order = np.argsort(-tr.mean_rate / pb.price, kind="stable")
    cost = pb.price[order] * T  # whole machine for all T slots
    cum = np.cumsum(cost)
    full = int(np.searchsorted(cum, B, side="right"))  # machines that fit entirely
    work = float(tr.mean_rate[order[:full]].sum() * T)
    if full < order.size:
        left = B - (cum[full - 1] if full else 0.0)
        work += tr.mean_rate[order[full]] * left / pb.price[order[full]]
    return work
