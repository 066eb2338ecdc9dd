"""Plots in the papers' Fig. 2/4 style: one line per agent, a band (min–max) over its runs (instances × seeds)."""

from __future__ import annotations

import os

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _band(ax, t, curves, label, color):
    """Mean line and min–max band over the finite values of each column (a column without any: a gap,
    and no ``Mean of empty slice`` warning)."""
    arr = np.vstack(curves).astype(float)
    fin = np.isfinite(arr)
    cnt = fin.sum(axis=0)
    has = cnt > 0
    mean = np.where(has, np.where(fin, arr, 0.0).sum(axis=0) / np.maximum(cnt, 1), np.nan)
    ax.plot(t, mean, label=label, color=color, lw=1.6)
    if arr.shape[0] > 1:
        lo = np.where(has, np.where(fin, arr, np.inf).min(axis=0), np.nan)
        hi = np.where(has, np.where(fin, arr, -np.inf).max(axis=0), np.nan)
        ax.fill_between(t, lo, hi, color=color, alpha=0.18, lw=0)


def _is_curve(c) -> bool:
    """A per-slot curve (two finite points at least), not an episode-end value (P2's episode regret)."""
    return c is not None and int(np.isfinite(np.asarray(c, dtype=float)).sum()) >= 2


def mean_band(ax, t, arr, label, color):
    """The mean of ``arr`` (runs × t) with a 95% t-interval band over its rows (the experiments' curves)."""
    import math

    from clustergym.stats import t_quantile

    m = arr.mean(axis=0)
    ax.plot(t, m, label=label, color=color, lw=1.6)
    if arr.shape[0] > 1:
        half = t_quantile(arr.shape[0] - 1) * arr.std(axis=0, ddof=1) / math.sqrt(arr.shape[0])
        ax.fill_between(t, m - half, m + half, color=color, alpha=0.18, lw=0)


def style(*axes, legend: float | None = 8) -> None:
    """The house style of every axis: a light grid and (unless ``legend=None``) a legend of that font size."""
    for ax in axes:
        ax.grid(alpha=0.3)
        if legend is not None:
            ax.legend(fontsize=legend)


def save(fig, path: str) -> str:
    """Tight layout, write ``path``, close the figure; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path)
    _plt().close(fig)
    return path


def _finish(plt, fig, ax, xlabel: str, ylabel: str, title: str, path: str) -> str:
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    style(ax)
    return save(fig, path)


def plot_results(results, out_dir: str, prefix: str = "") -> list[str]:
    """Average reward vs t and cumulative regret vs t (if any run has a per-slot regret curve) as PNGs."""
    plt = _plt()
    agents = list(dict.fromkeys(r.agent for r in results.runs))
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    name = results.env_id.split("/")[-1]
    n_runs = len(results.runs) // max(len(agents), 1)
    n_inst = len({r.instance for r in results.runs})
    over = f"{n_runs} runs, {n_inst} instance{'s' if n_inst != 1 else ''}"
    paths = []

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for i, a in enumerate(agents):
        rs = [r for r in results.runs if r.agent == a]
        n = min(r.steps for r in rs)
        t = np.arange(1, n + 1)
        _band(ax, t, [np.cumsum(r.reward[:n]) / t for r in rs], a, colors[i % 10])
    paths.append(_finish(plt, fig, ax, "time slot t", "average reward per slot, (1/t) Σ reward",
                         f"{name}: average reward vs t (band: min–max over {over})",
                         os.path.join(out_dir, f"{prefix}avg_reward.png")))

    # Only when some run has a regret curve: an env whose regret is defined at the episode end only
    # (P2's best static allocation in hindsight) has no curve, and an empty figure would say nothing.
    if any(_is_curve(r.cum_regret) for r in results.runs):
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
        for i, a in enumerate(agents):
            rs = [r for r in results.runs if r.agent == a and _is_curve(r.cum_regret)]
            if rs:
                n = min(r.steps for r in rs)
                _band(ax, np.arange(1, n + 1), [r.cum_regret[:n] for r in rs], a, colors[i % 10])
        paths.append(_finish(plt, fig, ax, "time slot t", "cumulative regret (expected, eq. 6)",
                             f"{name}: cumulative regret vs t (band: min–max over {over})",
                             os.path.join(out_dir, f"{prefix}cumulative_regret.png")))
    return paths
