"""The learning curve of a training run: episode returns from the Monitor files, evaluations, reference lines."""

from __future__ import annotations

import json
import os

import numpy as np

from clustergym.learning.algos import SIDE_CAR
from clustergym.plots import figure, legend_outside, save, training_curve

__all__ = ["monitor_curve", "plot_training_curve"]


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


def plot_training_curve(run_dir: str, path: str | None = None, reference: dict[str, float] | None = None) -> str:
    """Training episode returns and periodic evaluation returns vs timesteps (PNG).

    ``reference``: optional horizontal lines (label -> episode return), e.g. paper agents.
    """
    meta = json.load(open(os.path.join(run_dir, SIDE_CAR)))
    fig, ax = figure(size=(8.0, 3.8))
    steps, ret = monitor_curve(run_dir)
    # raw returns (instances differ, so they scatter), their rolling mean, and the reference lines
    training_curve(ax, steps, ret, label=meta["algo"], references=reference)
    ev = os.path.join(run_dir, "evaluations.npz")
    if os.path.exists(ev):
        d = np.load(ev)
        if d["timesteps"].size:
            r = d["results"]
            ax.plot(d["timesteps"], r.mean(axis=1), "-o", color="k", ms=3,
                    label="evaluation (held-out seeds, deterministic)")
    ax.set_xlabel("timesteps")
    ax.set_ylabel("episode return")
    ax.set_title(f"{meta['algo'].upper()} on {meta['env_id'].split('/')[-1]}")
    ax.grid(alpha=0.3)
    legend_outside(ax)  # nothing to label before the first episode ends
    path = path or os.path.join(run_dir, "training_curve.png")
    save(fig, path)
    return path


_monitor_curve = monitor_curve  # its earlier name
