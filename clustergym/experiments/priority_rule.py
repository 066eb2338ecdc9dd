"""A priority rule for P3 whose weights are learned on training instances (cross-entropy search).

The rule acts like the ring heuristics of ``baselines/ringallreduce.py``: each job gets a fixed size ``workers``,
capped each slot at min(N_i, budget left) (eqs. 2, 11), and jobs are placed one after another with the greedy ring
placement. Only the order is learned: jobs by decreasing score

    score_i = (λ1 − μ_i(ζ_i z_i) + c · (1 + f · n / J)) / (B_i − z_i)^a      utility still to gain plus a row's worth
              + d / ⌈(B_i − z_i) / min(N_i, workers)⌉                        slots the job still needs
              + e · age_i / 100 + h · (μ_i(ζ_i (z_i + κ_i)) − μ_i(ζ_i z_i)) / κ_i + g · b_i / max_j b_j

with n the visible jobs, J the window, age_i = t − arrival, κ_i the job's size this slot and b_i its ring bandwidth
(ties by arrival, then id). θ = (c, a, d, e, h, g, f); :data:`THETA_SRPT` = (30, 1, 0, 0, 0, 0, 0) is
``srpt[workers=5,row_value=30]`` exactly, the best non-learned policy on the ``gpu-short`` scenario. Every input is
public (``info["window"]`` and the slot ``t``).

:func:`train_rule` fits θ by the cross-entropy method (Rubinstein; the "CEM" of policy search): from a Gaussian
around a start θ, each iteration scores ``population`` candidates (the mean among them) by their mean relative
difference of totals to the start rule over the training instances (the same instances and dynamics for every
candidate: common random numbers), and moves the mean and spread to those of the ``elite`` best. It returns the last
mean. A fitted rule is a JSON file (:func:`save_rule`); the agent spec ``rule:PATH`` (a ``rule.json``, or its folder)
acts with it.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from clustergym.baselines.ringallreduce import _RingHeuristic
from clustergym.envs.ringallreduce.scenario import sigmoid_utility
from clustergym.runner.episode import make_env, run_episode

__all__ = ["PARAMS", "THETA_SRPT", "STD_START", "RULE_PREFIX", "FORMAT", "PriorityRule", "rule_scores", "RuleFit",
           "train_rule", "rule_totals", "rule_totals_many", "save_rule", "load_rule", "resolve_rule_path", "theta_text"]

PARAMS = ("row_value", "exponent", "slots", "age", "gain", "bandwidth", "fullness")  # θ = (c, a, d, e, h, g, f)
THETA_SRPT = (30.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # srpt[workers=5,row_value=30]
STD_START = (20.0, 0.2, 2.0, 1.0, 1.0, 1.0, 1.0)  # the search's first spread, per weight
RULE_PREFIX = "rule:"
FORMAT = "clustergym-priority-rule"
P3 = "clustergym/RingAllReduce-v0"
_PRETRAINED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "learning", "pretrained")


def _check_theta(theta) -> np.ndarray:
    th = np.asarray(theta, dtype=np.float64).reshape(-1)
    if th.shape != (len(PARAMS),) or not np.all(np.isfinite(th)):
        raise ValueError(f"theta={list(np.ravel(theta))!r} is invalid: expected {len(PARAMS)} finite numbers "
                         f"({', '.join(PARAMS)})")
    if th[0] < 0 or th[1] <= 0:
        raise ValueError(f"theta is invalid: row_value must be >= 0 and exponent > 0 (got {th[0]}, {th[1]})")
    return th


def rule_scores(theta, win: dict, rows: np.ndarray, size: np.ndarray, t: float, workers: int) -> np.ndarray:
    """(len(rows),) each visible job's score (module docstring); higher is placed first."""
    c, a, d, e, h, g, f = (float(x) for x in theta)
    left = np.maximum(win["remaining"][rows].astype(np.float64), 1.0)  # B_i − z_i, >= 1 for a visible job
    zeta, z = win["zeta"][rows], win["attained"][rows].astype(np.float64)
    lam = (win["lam1"][rows], win["lam2"][rows], win["lam3"][rows])
    mu = sigmoid_utility(zeta * z, *lam)
    full = float(np.count_nonzero(win["present"])) / win["present"].shape[0]
    n_max = np.maximum(np.minimum(win["workers"][rows].astype(np.float64), float(workers)), 1.0)
    kappa = np.maximum(np.asarray(size, dtype=np.float64), 1.0)
    gain = (sigmoid_utility(zeta * (z + kappa), *lam) - mu) / kappa
    bw = win["bw"][rows].astype(np.float64)
    return ((lam[0] - mu + c * (1.0 + f * full)) / left ** a + d / np.ceil(left / n_max)
            + e * (t - win["arrival"][rows]) / 100.0 + h * gain + g * bw / (bw.max() + 1e-9))


class PriorityRule(_RingHeuristic):
    """The learned priority rule (module docstring) with weights ``theta`` and every job's size ``workers``."""

    name = "rule"
    family = "ringallreduce"

    def __init__(self, theta=THETA_SRPT, workers: int = 5):
        super().__init__(workers=workers)
        self.theta = _check_theta(theta)
        self.meta: dict = {}  # a rule file's env id, env kwargs and training record (``load_rule``)
        self._t = 0.0

    def act(self, obs, info):
        self._t = float(info["t"])
        return super().act(obs, info)

    def _order(self, win, rows, size):
        score = rule_scores(self.theta, win, rows, size, self._t, self.workers)
        return np.lexsort((win["id"][rows], win["arrival"][rows], -score))


# -- files -----------------------------------------------------------------------------------------------------------
def save_rule(path: str, theta, *, workers: int = 5, env_kwargs: dict | None = None, training: dict | None = None):
    """Write a fitted rule to ``path`` (a ``.json`` file), atomically."""
    th = _check_theta(theta)
    doc = {"format": FORMAT, "version": 1, "env_id": P3, "env_kwargs": dict(env_kwargs or {}), "workers": int(workers),
           "theta": {k: float(v) for k, v in zip(PARAMS, th)}, "training": training or {}}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, path)


def resolve_rule_path(path: str) -> str:
    """``pretrained/<name>`` -> the rule shipped with clustergym; a folder -> its ``rule.json``; else ``path``."""
    norm = path.replace("\\", "/")
    if norm.startswith("pretrained/"):
        name = norm[len("pretrained/"):].strip("/")
        shipped = os.path.join(_PRETRAINED, name, "rule.json")
        if not os.path.exists(shipped):
            have = sorted(d for d in os.listdir(_PRETRAINED)
                          if os.path.exists(os.path.join(_PRETRAINED, d, "rule.json")))
            raise FileNotFoundError(f"no pretrained rule {path!r}: shipped are "
                                    f"{', '.join('pretrained/' + h for h in have) or 'none'}")
        return shipped
    if os.path.isdir(path):
        return os.path.join(path, "rule.json")
    return path


def load_rule(path: str, **options) -> PriorityRule:
    """The agent of the rule file ``path`` (:func:`resolve_rule_path`); the loader of ``rule:PATH`` specs.
    ``options`` may set ``workers``."""
    file = resolve_rule_path(path)
    if not os.path.exists(file):
        raise FileNotFoundError(f"no rule file {file!r} (write one with clustergym.experiments.priority_rule.save_rule)")
    with open(file, encoding="utf-8") as fh:
        try:
            doc = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{file} is not a rule file: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{file} is not a rule file (its 'format' is not {FORMAT!r})")
    theta = doc.get("theta", {})
    missing = [k for k in PARAMS if k not in theta]
    if missing:
        raise ValueError(f"{file}: theta lacks {', '.join(missing)}")
    unknown = set(options) - {"workers"}
    if unknown:
        raise TypeError(f"unexpected option(s) {', '.join(sorted(unknown))}")
    workers = options["workers"] if "workers" in options else doc.get("workers", 5)
    agent = PriorityRule([theta[k] for k in PARAMS], workers=int(workers))
    agent.meta = {"env_id": doc.get("env_id", P3), "env_kwargs": doc.get("env_kwargs", {}),
                  "training": doc.get("training", {})}
    return agent


# -- training --------------------------------------------------------------------------------------------------------
def rule_totals(theta, instances, *, workers: int = 5, horizon: int = 200, env_kwargs: dict | None = None) -> list:
    """The rule's total reward on each instance (instance = reset seed, as the runner's P3 runs)."""
    out = []
    for k in instances:
        env = make_env(P3, scenario_seed=int(k), horizon=horizon, **(env_kwargs or {}))
        out.append(float(run_episode(env, PriorityRule(theta, workers), int(k), horizon).rewards.sum()))
        env.close()
    return out


def _totals_task(args):
    theta, instances, workers, horizon, env_kwargs = args
    return rule_totals(theta, instances, workers=workers, horizon=horizon, env_kwargs=env_kwargs)


def rule_totals_many(thetas, instances, *, workers: int = 5, horizon: int = 200, env_kwargs: dict | None = None,
                     pool=None, processes: int = 1) -> list:
    """Per theta, :func:`rule_totals` on ``instances`` (an array, in order), the instances split in ``processes``
    parts run in ``pool`` (an executor with that many processes; None: one made for this call). The result is the
    same however the runs are spread."""
    instances = [int(k) for k in instances]
    chunks = max(int(processes), 1)
    live = [part for part in (instances[i::chunks] for i in range(chunks)) if part]  # each process's instances
    tasks = [(th, part, workers, horizon, dict(env_kwargs or {})) for th in thetas for part in live]
    if pool is None and chunks > 1:
        with ProcessPoolExecutor(chunks) as own:
            res = iter(list(own.map(_totals_task, tasks)))
    else:
        res = iter(pool.map(_totals_task, tasks) if pool else map(_totals_task, tasks))
    out = []
    for _ in thetas:
        by = {k: v for part in live for k, v in zip(part, next(res))}
        out.append(np.array([by[k] for k in instances]))
    return out


@dataclass
class RuleFit:
    """What :func:`train_rule` returns: the fitted θ (the last mean), per-iteration records and the cost."""

    theta: np.ndarray
    history: list = field(default_factory=list)  # per iteration: mean candidate's and best candidate's gain (%)
    env_steps: int = 0
    wall_s: float = 0.0

    def record(self, **extra) -> dict:
        return {"history": self.history, "env_steps": self.env_steps, "wall_s": round(self.wall_s, 1), **extra}


def train_rule(instances, *, seed: int = 0, iterations: int = 12, population: int = 16, elite: int = 4,
               start=THETA_SRPT, std=STD_START, workers: int = 5, horizon: int = 200, env_kwargs: dict | None = None,
               processes: int = 1, progress: bool = True) -> RuleFit:
    """Fit θ on ``instances`` by the cross-entropy method (module docstring). Every draw comes from
    ``np.random.default_rng(seed)``; ``processes`` only spreads the candidates' runs (same result). A drawn
    candidate with c < 0 or a < 0.1 is moved to that edge (c = 0, a = 0.1) before it runs: the rule's weights must
    have c >= 0 and a > 0."""
    instances = [int(k) for k in instances]
    if not instances:
        raise ValueError("train_rule needs at least one training instance")
    if not (iterations >= 1 and population >= 2 and 1 <= elite <= population):
        raise ValueError(f"iterations={iterations}, population={population}, elite={elite} are invalid: expected "
                         "iterations >= 1, population >= 2 and 1 <= elite <= population")
    rng = np.random.default_rng(seed)
    mean, sd0 = _check_theta(start), np.asarray(std, dtype=np.float64)
    sd = sd0.copy()
    fit = RuleFit(mean.copy())
    t0 = time.perf_counter()
    chunks = max(int(processes), 1)

    def totals(pool, thetas) -> list:
        return rule_totals_many(thetas, instances, workers=workers, horizon=horizon, env_kwargs=env_kwargs, pool=pool,
                                processes=chunks)

    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=iterations, desc=f"cross-entropy search (seed {seed})", unit="iteration")
    pool = ProcessPoolExecutor(chunks) if chunks > 1 else None
    try:
        base = totals(pool, [mean])[0]
        for _ in range(iterations):
            cands = [mean] + [mean + sd * rng.standard_normal(mean.shape) for _ in range(population - 1)]
            cands = [np.array([max(th[0], 0.0), max(th[1], 0.1), *th[2:]]) for th in cands]
            gains = np.array([100.0 * float(np.mean((v - base) / base)) for v in totals(pool, cands)])
            top = np.argsort(-gains, kind="stable")[:elite]
            elites = np.array([cands[i] for i in top])
            mean, sd = elites.mean(axis=0), np.maximum(elites.std(axis=0), 0.05 * sd0)
            fit.history.append({"mean_gain_pct": round(float(gains[0]), 4), "best_gain_pct": round(float(gains[top[0]]), 4),
                                "theta": [round(float(x), 4) for x in mean]})
            if bar is not None:
                bar.set_postfix_str(f"mean {gains[0]:+.3f}%, best {gains[top[0]]:+.3f}%")
                bar.update(1)
    finally:
        if pool is not None:
            pool.shutdown()
        if bar is not None:
            bar.close()
    fit.theta = _check_theta(mean)
    fit.env_steps = (1 + iterations * population) * len(instances) * horizon
    fit.wall_s = time.perf_counter() - t0
    return fit


def theta_text(theta) -> str:
    """``c=30, a=1, ...`` for tables."""
    return ", ".join(f"{k}={v:.3g}" for k, v in zip(PARAMS, _check_theta(theta)))

