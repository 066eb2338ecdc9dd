"""The learning curve of a training run: episode returns from the Monitor files, evaluations, reference lines."""

from __future__ import annotations

import json
import os
import time

import gymnasium as gym
import numpy as np

from clustergym.core.agent import list_agents
from clustergym.core.family import env_family, family_spec
from clustergym.learning.algos import SIDE_CAR
from clustergym.core.plots import figure, legend_outside, save, training_curve
from clustergym.runner.evaluation import evaluate

__all__ = ["monitor_curve", "plot_training_curve", "reference_returns", "step_reward_callback", "step_rewards",
           "REFERENCE_INSTANCES", "REFERENCE_BUDGET_S", "STEP_REWARDS", "NO_EPISODE"]

REFERENCE_INSTANCES = 2  # instances (of the pool, or the one instance) the reference agents run on, one episode each
REFERENCE_BUDGET_S = 120.0  # wall time for the reference agents: those not reached by then are left out
STEP_REWARDS = "step_rewards.csv"  # (timesteps, mean reward per step over the training envs since the last row)
STEP_POINTS = 200  # rows of STEP_REWARDS over a run
NO_EPISODE = "no episode ended within the run"


def step_reward_callback(out: str, timesteps: int):
    """An SB3 callback writing :data:`STEP_REWARDS` into ``out`` at the end of training: the mean reward per step
    (the env's own reward, before VecNormalize) over the training envs, about :data:`STEP_POINTS` rows. The
    learning curve draws it when no episode ended (a horizon longer than the run)."""
    from stable_baselines3.common.callbacks import BaseCallback

    every = max(int(timesteps) // STEP_POINTS, 1)

    class StepRewards(BaseCallback):
        def _on_training_start(self) -> None:
            self.rows: list = []
            self.total, self.n, self.next = 0.0, 0, every

        def _on_step(self) -> bool:
            norm = self.model.get_vec_normalize_env()
            r = np.asarray(norm.get_original_reward() if norm is not None else self.locals.get("rewards", ()), dtype=float)
            self.total, self.n = self.total + float(r.sum()), self.n + r.size
            if self.num_timesteps >= self.next and self.n:
                self.rows.append((self.num_timesteps, self.total / self.n))
                self.total, self.n, self.next = 0.0, 0, self.num_timesteps + every
            return True

        def _on_training_end(self) -> None:
            if self.n:
                self.rows.append((self.num_timesteps, self.total / self.n))
            with open(os.path.join(out, STEP_REWARDS), "w") as f:
                f.write("timesteps,reward_per_step\n" + "".join(f"{t},{v!r}\n" for t, v in self.rows))

    return StepRewards()


def step_rewards(run_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """(timesteps, mean reward per step) of :data:`STEP_REWARDS`; empty arrays without the file."""
    path = os.path.join(run_dir, STEP_REWARDS)
    if not os.path.exists(path):
        return np.zeros(0), np.zeros(0)
    d = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return (d[:, 0], d[:, 1]) if d.size else (np.zeros(0), np.zeros(0))


def monitor_curve(run_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """(cumulative timesteps at episode end, episode return) over all training envs, in time order."""
    rows = []
    mon = os.path.join(run_dir, "monitor")
    for name in sorted(os.listdir(mon)) if os.path.isdir(mon) else []:
        if not name.endswith(".monitor.csv"):
            continue
        with open(os.path.join(mon, name)) as f:
            f.readline()  # JSON header
            header = f.readline().strip().split(",")
            for line in f:
                vals = dict(zip(header, line.strip().split(",")))
                rows.append((float(vals["t"]), float(vals["r"]), int(vals["l"])))
    rows.sort()
    if not rows:
        return np.zeros(0), np.zeros(0)
    steps = np.cumsum([r[2] for r in rows])
    return steps, np.array([r[1] for r in rows])


def reference_returns(env_id: str, env_kwargs: dict, pool, budget_s: float = REFERENCE_BUDGET_S) -> dict:
    """The episode return (total reward over one training episode, as the Monitor records it) of the family's
    paper policy, its best baseline and ``random``, each the mean over the first :data:`REFERENCE_INSTANCES`
    instances of ``pool`` (or the model's one instance), one episode each at the training horizon; the
    instances and horizon are recorded under ``"_on"``. Agents not reached within ``budget_s`` seconds are left
    out (a line is drawn only when known); {} when nothing could be run."""
    key = json.dumps([env_id, env_kwargs, None if pool is None else list(pool)[:REFERENCE_INSTANCES]], sort_keys=True,
                     default=str)
    if key not in _REFERENCES:
        _REFERENCES[key] = _reference_returns(env_id, env_kwargs, pool, budget_s)
    return dict(_REFERENCES[key])


_REFERENCES: dict = {}  # one computation per configuration and process (tuning trains many times on one)


def _reference_returns(env_id: str, env_kwargs: dict, pool, budget_s: float) -> dict:
    family = env_family(env_id)
    spec = family_spec(family)
    kw = {k: v for k, v in env_kwargs.items() if k not in (*spec.pad_kwargs, *spec.action_kwargs, "instances",
                                                            "render_mode", "oracle")}
    probe = gym.make(env_id, **{**kw, "oracle": False})
    horizon = int(getattr(probe.unwrapped, "horizon", kw.get("horizon", 0)) or 0)
    probe.close()
    kw.pop("horizon", None)
    if horizon <= 0:
        return {}
    if pool:
        instances = [int(k) for k in list(pool)[:REFERENCE_INSTANCES]]
    else:
        instances = [int(kw.pop("scenario_seed", 0))]
    kw.pop("scenario_seed", None)
    paper = spec.paper_agent
    names = [a for a in list_agents(family=family) if a not in ("random", paper)]
    order = [a for a in ("random", paper) if a] + names
    t0, totals = time.perf_counter(), {}
    for agent in order:
        if time.perf_counter() - t0 > budget_s:
            break
        try:
            res = evaluate(env_id, [agent], seeds=[0], horizon=horizon, env_kwargs=dict(kw), instances=instances,
                           progress=False, score=False)
        except Exception:  # noqa: BLE001 - an agent that cannot act on this configuration: no line for it
            continue
        vals = [r.total_reward for r in res.runs]
        if vals and np.all(np.isfinite(vals)):
            totals[agent] = float(np.mean(vals))
    out: dict = {}
    if paper in totals:
        out[f"paper policy ({paper})"] = totals[paper]
    base = {a: v for a, v in totals.items() if a in names}
    if base:
        best = max(base, key=base.get)
        out[f"best baseline ({best})"] = base[best]
    if "random" in totals:
        out["random"] = totals["random"]
    if out:
        out["_on"] = {"instances": instances, "horizon": horizon, "seed": 0}
    return out


def plot_training_curve(run_dir: str, path: str | None = None, reference: dict[str, float] | None = None) -> str:
    """Training episode returns and periodic evaluation returns vs timesteps (PNG).

    ``reference``: horizontal lines (label -> episode return), by default those ``clustergym train`` recorded
    in the side-car (``curve_references``: the paper policy, the best baseline and random on the training
    instances, :func:`reference_returns`), when known.
    """
    meta = json.load(open(os.path.join(run_dir, SIDE_CAR)))
    fig, ax = figure(size=(8.0, 3.8))
    steps, ret = monitor_curve(run_dir)
    on = None
    if reference is None:
        recorded = meta.get("curve_references") or {}
        reference = {k: float(v) for k, v in recorded.items() if not k.startswith("_")}
        on = recorded.get("_on")
    per_step = steps.size == 0
    if per_step:  # no episode ended (horizon x envs beyond the run): the reward per step instead of an empty axis
        t, r = step_rewards(run_dir)
        ax.plot(t, r, ".-", color="C0", ms=3, lw=1, label=f"{meta['algo']} (reward per step, mean over envs)")
        # the reference lines are episode returns: per step, they are the return over the horizon
        horizon = float((meta.get("curve_references") or {}).get("_on", {}).get("horizon") or 0)
        reference = {k: v / horizon for k, v in reference.items()} if horizon else {}
        training_curve(ax, [], [], label=meta["algo"], references=reference)
    else:  # raw returns (instances differ, so they scatter), their rolling mean, and the reference lines
        training_curve(ax, steps, ret, label=meta["algo"], references=reference)
    ev = os.path.join(run_dir, "evaluations.npz")
    if os.path.exists(ev):
        d = np.load(ev)
        if d["timesteps"].size:
            r = d["results"]
            ax.plot(d["timesteps"], r.mean(axis=1), "-o", color="k", ms=3,
                    label="evaluation (held-out seeds, deterministic)")
    ax.set_xlabel("timesteps")
    ax.set_ylabel("reward per step" if per_step else "episode return")
    title = f"{meta['algo'].upper()} on {meta['env_id'].split('/')[-1]}"
    if per_step:
        title += f"; {NO_EPISODE} ({meta.get('timesteps_trained')} steps): reward per step"
    if on:
        inst = on.get("instances") or []
        title += (f"; dashed: mean of one episode on each of instance{'s' if len(inst) != 1 else ''} "
                  f"{', '.join(map(str, inst))} (horizon {on.get('horizon')})")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    legend_outside(ax)  # nothing to label before the first episode ends
    path = path or os.path.join(run_dir, "training_curve.png")
    save(fig, path)
    return path
