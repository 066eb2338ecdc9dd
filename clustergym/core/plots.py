"""The figure style of every clustergym plot, and the plots of ``clustergym run``.

One module so that every figure reads the same way:

* **one colour per agent name** (:func:`agent_color`), the same in every figure whatever the other agents
  in it: the paper policies (ESDP, OGASched, GADGET, OPM) in vermilion, ``random`` in grey, each baseline
  and learner its own colour; a name the table does not know gets a colour derived from the name itself;
  and within one figure no two agents share a colour (:func:`agent_colors`: two ``sb3:`` models, two
  options of one policy, a name whose derived colour is taken get the next free colour);
* **95% intervals of the mean** over instances (Student t), never min–max bands;
* a **paired-difference plot** beside every comparison table (:func:`paired_difference`): each instance's
  difference to the reference agent as a point, with the mean and its 95% interval;
* bars start at zero; legends sit outside the data (:func:`legend_outside`); constrained layout, so
  titles and labels fit (:func:`figure`, :func:`save`);
* training curves: the raw episode returns, their rolling mean and reference lines (:func:`training_curve`).
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Mapping, Sequence

import numpy as np

from clustergym.core.stats import t_quantile

__all__ = ["AGENT_COLORS", "agent_color", "agent_colors", "reference_color", "figure", "save", "style", "legend_outside", "figure_legend", "mean_ci", "mean_band",
           "paired_difference", "plot_comparisons", "plot_claims", "rolling_mean", "training_curve", "plot_results"]

PAPER = "#D55E00"  # vermilion: the paper's policy of each family
AGENT_COLORS: dict[str, str] = {
    # the papers' policies: one colour, the same meaning in every figure
    "esdp": PAPER, "ogasched": PAPER, "gadget": PAPER, "opm": PAPER,
    "random": "#7F7F7F",
    # baselines: distinct colours (no two agents of one family share one)
    "hauf": "#0072B2", "lcf": "#009E73", "lwtf": "#CC79A7",
    "binpacking": "#0072B2", "drf": "#56B4E9", "fairness": "#009E73", "spreading": "#CC79A7",
    "fifo": "#0072B2", "greedy": "#009E73", "las": "#E69F00",
    "edf": "#0072B2", "fair": "#009E73", "ops": "#CC79A7", "opm-noest": "#E69F00",
    # learners (clustergym train / drl)
    "ppo": "#332288", "maskable_ppo": "#117733", "a2c": "#882255", "sac": "#999933", "bc": "#44AA99",
    "recurrent_ppo": "#661100",
}
# for names not in the table (options, users' agents): none close to a colour above
_EXTRA = ("#9467BD", "#8C564B", "#BCBD22", "#17BECF", "#393B79", "#637939", "#8C6D31", "#843C39", "#7B4173",
          "#AEC7E8", "#98DF8A", "#C5B0D5")


def agent_color(name: str) -> str:
    """The colour of agent ``name`` in every figure: :data:`AGENT_COLORS`, else (options in brackets, a
    learner's ``sb3:`` path, a user's agent) a colour chosen by a hash of the name, so it too is the same in
    every figure and every run."""
    if name in AGENT_COLORS:
        return AGENT_COLORS[name]
    low = name.lower()
    for learner in ("maskable_ppo", "recurrent_ppo", "ppo", "a2c", "sac"):  # e.g. "ppo (3 seeds)", "sb3:runs/ppo/model.zip"
        if low.startswith(learner) and (len(low) == len(learner) or not low[len(learner)].isalnum()):
            return AGENT_COLORS[learner]
    return _EXTRA[zlib.crc32(name.encode()) % len(_EXTRA)]


# after _EXTRA, for figures with many agents
_MORE = ("#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#E377C2", "#FFBB78", "#FF9896", "#C49C94", "#F7B6D2",
         "#DBDB8D", "#9EDAE5", "#6B6ECF", "#B5CF6B", "#E7BA52", "#D6616B", "#CE6DBD")


def agent_colors(names: Sequence[str]) -> dict[str, str]:
    """The colour of each agent of one figure: :func:`agent_color`, except that no two names share one — the
    names :data:`AGENT_COLORS` knows keep theirs first, then (in the given order) a name whose colour an
    earlier one took gets a free colour (chosen by a hash of the name among the free ones, so it is stable)."""
    names = list(dict.fromkeys(names))
    order = sorted(range(len(names)), key=lambda i: (names[i] not in AGENT_COLORS, i))
    out: dict[str, str] = {}
    used: set[str] = set()
    for i in order:
        name = names[i]
        c = agent_color(name)
        if c in used:
            free = [x for x in (*_EXTRA, *_MORE, *AGENT_COLORS.values()) if x not in used]
            free = list(dict.fromkeys(free))
            if free:
                c = free[zlib.crc32(name.encode()) % len(free)]
            else:  # more agents than the palettes: evenly spread hues
                import colorsys

                k = len(used)
                while c in used:
                    r, g, b = colorsys.hsv_to_rgb((k * 0.618034) % 1.0, 0.55 + 0.4 * ((k // 7) % 2), 0.75)
                    c = f"#{int(r * 255):02X}{int(g * 255):02X}{int(b * 255):02X}"
                    k += 1
        out[name] = c
        used.add(c)
    return {n: out[n] for n in names}


def reference_color(label: str) -> str:
    """The colour of a reference line labelled e.g. ``"paper policy esdp"`` or ``"best baseline (lcf)"``: that
    of the first agent name in the label, else one derived from the label."""
    import re

    for token in re.split(r"[\s:(),=\[\]]+", label):
        if token in AGENT_COLORS:
            return AGENT_COLORS[token]
    return agent_color(label)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (7.0, 4.2), dpi: int = 110, **kw):
    """``plt.subplots`` with the house defaults: constrained layout (titles, labels and outside legends fit)."""
    return _plt().subplots(nrows, ncols, figsize=size, dpi=dpi, layout="constrained", **kw)


def legend_outside(ax, fontsize: float = 8, **kw) -> None:
    """The axis' legend to the right of the data (nothing if no artist has a label)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    opts = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=fontsize, frameon=False, borderaxespad=0.0)
    opts.update(kw)
    ax.legend(handles, labels, **opts)


def figure_legend(fig, axes, fontsize: float = 8, ncol: int | None = None) -> None:
    """One legend for a figure of several panels, below them (outside the data): every labelled artist of
    ``axes``, each label once."""
    seen: dict = {}
    for ax in np.atleast_1d(axes).ravel():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", fontsize=fontsize, frameon=False,
                   ncol=ncol or min(len(seen), 4))


def style(*axes, legend: float | None = 8) -> None:
    """The house style of every axis: a light grid and (unless ``legend=None``) a legend outside the data."""
    for ax in axes:
        ax.grid(alpha=0.3)
        if legend is not None:
            legend_outside(ax, fontsize=legend)


def save(fig, path: str) -> str:
    """Write ``path`` with constrained layout (titles and outside legends inside the image) and close the figure."""
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    fig.savefig(path, bbox_inches="tight")
    _plt().close(fig)
    return path


# -- intervals ---------------------------------------------------------------------------------------
def mean_ci(arr, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Column means of ``arr`` (rows = instances or seeds) and the half-width of their Student-t interval
    (0 with a single row), ignoring NaN entries column by column."""
    a = np.atleast_2d(np.asarray(arr, dtype=float))
    fin = np.isfinite(a)
    n = fin.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.where(n > 0, np.where(fin, a, 0.0).sum(axis=0) / np.maximum(n, 1), np.nan)
        var = np.where(n > 1, (np.where(fin, a - m, 0.0) ** 2).sum(axis=0) / np.maximum(n - 1, 1), 0.0)
    q = np.array([t_quantile(int(k) - 1, level) if k > 1 else 0.0 for k in np.unique(n)])
    qn = q[np.searchsorted(np.unique(n), n)]
    return m, qn * np.sqrt(var / np.maximum(n, 1))


def mean_band(ax, t, arr, label, color=None, **line):
    """The mean of ``arr`` (runs × t) with its 95% t-interval as a band (colour: :func:`agent_color`)."""
    color = agent_color(label) if color is None else color
    m, half = mean_ci(arr)
    ax.plot(t, m, label=label, color=color, lw=line.pop("lw", 1.6), **line)
    if np.atleast_2d(arr).shape[0] > 1:
        ax.fill_between(t, m - half, m + half, color=color, alpha=0.12, lw=0, zorder=line.get("zorder", 1) - 0.5)


def paired_difference(ax, diffs: Mapping[str, Sequence[float]], reference: str, unit: str = "",
                      relative: bool = False, seed: int = 0,
                      intervals: Mapping[str, tuple[float, float, float]] | None = None,
                      colors: Mapping[str, str] | None = None) -> None:
    """Per-instance differences ``agent − reference`` (one row per agent): each instance a point, the mean a
    diamond with its 95% t-interval, a line at 0 (no difference). ``relative``: the values are percentages.
    ``intervals`` (name -> (mean, low, high)) replaces the interval computed here (e.g. the table's own);
    ``colors`` (name -> colour) replaces :func:`agent_color` of the row names."""
    rng = np.random.default_rng(seed)  # vertical jitter of the points only
    names = list(diffs)
    for i, name in enumerate(names):
        d = np.asarray(diffs[name], dtype=float)
        d = d[np.isfinite(d)]
        c = colors[name] if colors and name in colors else agent_color(name)
        y = len(names) - 1 - i
        ax.scatter(d, y + rng.uniform(-0.15, 0.15, d.size), s=14, color=c, alpha=0.6, lw=0)
        if intervals is not None and name in intervals:
            m, lo, hi = intervals[name]
        elif d.size:
            m = d.mean()
            half = t_quantile(d.size - 1) * d.std(ddof=1) / math.sqrt(d.size) if d.size > 1 else 0.0
            lo, hi = m - half, m + half
        else:
            continue
        if np.isfinite(m):
            lo, hi = (m, m) if not (np.isfinite(lo) and np.isfinite(hi)) else (lo, hi)
            ax.errorbar([m], [y], xerr=[[m - lo], [hi - m]], fmt="D", color=c, ms=6, capsize=4, lw=1.6,
                        markeredgecolor="k", markeredgewidth=0.6)
    ax.axvline(0.0, color="0.3", lw=0.9, ls="--")
    ax.set_yticks(range(len(names)), names[::-1])
    ax.set_ylim(-0.6, len(names) - 0.4)
    what = "relative difference (%)" if relative else "difference"
    ax.set_xlabel(f"{what} to {reference}{f' ({unit})' if unit and not relative else ''}: "
                  f"points = instances, ◆ = mean with 95% interval")
    ax.grid(alpha=0.3, axis="x")


# -- training curves ---------------------------------------------------------------------------------
def plot_comparisons(ax, comparisons, colors: Mapping[str, str] | None = None) -> None:
    """:func:`paired_difference` of :class:`clustergym.core.stats.Comparison` objects (one reference): the
    per-instance differences and the very interval a comparison table prints. ``colors``: the figure's
    agent colours (default :func:`agent_colors` of the rows)."""
    comps = list(comparisons)
    if not comps:
        return
    colors = colors if colors is not None else agent_colors([c.agent for c in comps])
    paired_difference(ax, {c.agent: list(c.per_instance.values()) for c in comps}, comps[0].reference,
                      relative=bool(comps[0].basis), intervals={c.agent: (c.mean, c.low, c.high) for c in comps},
                      colors=colors)


def _claim_color(c) -> str:
    """A claim "paper policy > baseline" is coloured by its baseline (the rows differ by it), any other by its agent."""
    paper_policy = AGENT_COLORS.get(c.agent.split("[")[0]) == PAPER  # e.g. "ogasched[lr=eq26]" too
    return reference_color(c.reference) if paper_policy else agent_color(c.agent)


def plot_claims(rows: Sequence[Mapping], path: str, title: str, wrap: int = 60) -> str | None:
    """The picture of a claims table (:func:`clustergym.core.stats.claims_table`): one row per claim whose
    comparison is relative (% of S), its per-instance differences as points and the table's interval,
    coloured by the baseline (a paper policy's claim) or the agent; the paper's number, where it is a single percentage, as a black bar.
    Returns ``path``, or None when no row has a relative comparison."""
    import re
    import textwrap

    rel = [r for r in rows if r.get("comparison") is not None and r["comparison"].basis]
    if not rel:
        return None
    def two_lines(text: str) -> str:
        lines = textwrap.wrap(text, wrap, break_on_hyphens=False)
        return "\n".join(lines) if len(lines) <= 2 else lines[0] + "\n" + textwrap.shorten(
            " ".join(lines[1:]), wrap, placeholder="…")

    labels = [two_lines(r["claim"]) for r in rel]
    labels = [f"{lab} ({k + 1})" if labels.count(lab) > 1 else lab for k, lab in enumerate(labels)]
    comps = [r["comparison"] for r in rel]
    fig, ax = figure(size=(11.0, 1.2 + 0.42 * len(rel)))
    paired_difference(ax, {lab: list(c.per_instance.values()) for lab, c in zip(labels, comps)}, "the reference",
                      relative=True, intervals={lab: (c.mean, c.low, c.high) for lab, c in zip(labels, comps)},
                      colors={lab: _claim_color(c) for lab, c in zip(labels, comps)})
    marked = False
    for k, r in enumerate(rel):
        m = re.fullmatch(r"\s*([+-]?\d+(?:\.\d+)?)\s*%\s*", str(r.get("paper", "")).replace("−", "-"))
        if m:
            ax.scatter([float(m.group(1))], [len(rel) - 1 - k], marker="|", s=160, color="k", zorder=4,
                       label=None if marked else "the paper's number")
            marked = True
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("difference in % of S (the claim's common scale, see the table): points = instances, "
                  "◆ = mean with 95% interval, | = the paper's number")
    ax.set_title(title)
    legend_outside(ax)
    return save(fig, path)


def rolling_mean(x, window: int) -> np.ndarray:
    """The mean of the last ``window`` values at every index (fewer at the start): same length as ``x``."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return x
    w = max(1, int(window))
    c = np.cumsum(np.r_[0.0, x])
    hi = np.arange(1, x.size + 1)
    lo = np.maximum(hi - w, 0)
    return (c[hi] - c[lo]) / (hi - lo)


def legend_number(v: float) -> str:
    """A value in a legend, one format throughout: 4 significant digits, thousands separated, no exponent."""
    v = float(v)
    if not np.isfinite(v) or v == 0:
        return f"{v:g}"
    digits = max(0, 3 - int(np.floor(np.log10(abs(v)))))
    return f"{v:,.{digits}f}"


def training_curve(ax, steps, returns, *, label: str = "episode return", color: str | None = None,
                   window: int | None = None, references: Mapping[str, float] | None = None) -> None:
    """Raw episode returns as faint points, their rolling mean as a line, and horizontal reference lines
    (e.g. the paper policy, the best baseline and random; coloured by :func:`agent_color` of their name)."""
    steps, returns = np.asarray(steps, dtype=float), np.asarray(returns, dtype=float)
    color = agent_color(label) if color is None else color
    if returns.size:
        w = window or max(5, returns.size // 20)
        ax.plot(steps, returns, ".", color=color, alpha=0.25, ms=3, label=f"{label} (each episode)")
        ax.plot(steps, rolling_mean(returns, w), "-", color=color, lw=1.8, label=f"{label} (rolling mean of {w})")
    for name, val in (references or {}).items():
        ax.axhline(val, ls="--", lw=1.1, color=reference_color(name), label=f"{name}: {legend_number(val)}")


# -- clustergym run ------------------------------------------------------------------------------------
def _is_curve(c) -> bool:
    """A per-slot curve (two finite points at least), not an episode-end value (P2's episode regret)."""
    return c is not None and int(np.isfinite(np.asarray(c, dtype=float)).sum()) >= 2


def _instance_curves(rs, get, n: int) -> np.ndarray:
    """(instances, n): each instance's curve averaged over its seeds (intervals are over instances)."""
    by: dict = {}
    for r in rs:
        by.setdefault(r.instance, []).append(np.asarray(get(r), dtype=float)[:n])
    return np.vstack([np.mean(v, axis=0) for v in by.values()])


def plot_results(results, out_dir: str, prefix: str = "") -> list[str]:
    """Average reward vs t, cumulative regret vs t (if any run has a per-slot regret curve) and, with two
    agents or more, the paired differences of total reward to the best agent (the table's "vs best"), as PNGs."""
    agents = list(dict.fromkeys(r.agent for r in results.runs))
    colors = agent_colors(agents)  # one colour per agent, the same in the three figures
    name = results.env_id.split("/")[-1]
    n_inst = len({r.instance for r in results.runs})
    over = f"95% interval over {n_inst} instance{'s' if n_inst != 1 else ''}"
    paths = []

    fig, ax = figure()
    for a in agents:
        rs = [r for r in results.runs if r.agent == a]
        n = min(r.steps for r in rs)
        t = np.arange(1, n + 1)
        mean_band(ax, t, _instance_curves(rs, lambda r: np.cumsum(r.reward[:n]) / t, n), a, colors[a])
    ax.set(xlabel="time slot t", ylabel="average reward per slot, (1/t) Σ reward",
           title=f"{name}: average reward vs t ({over})")
    style(ax)
    paths.append(save(fig, os.path.join(out_dir, f"{prefix}avg_reward.png")))

    # Only when some run has a regret curve: an env whose regret is defined at the episode end only
    # (P2's best static allocation in hindsight) has no curve, and an empty figure would say nothing.
    if any(_is_curve(r.cum_regret) for r in results.runs):
        fig, ax = figure()
        for a in agents:
            rs = [r for r in results.runs if r.agent == a and _is_curve(r.cum_regret)]
            if rs:
                n = min(r.steps for r in rs)
                mean_band(ax, np.arange(1, n + 1), _instance_curves(rs, lambda r: r.cum_regret[:n], n), a, colors[a])
        ax.set(xlabel="time slot t", ylabel="cumulative regret (expected, eq. 6)",
               title=f"{name}: cumulative regret vs t ({over})")
        style(ax)
        paths.append(save(fig, os.path.join(out_dir, f"{prefix}cumulative_regret.png")))

    if len(agents) > 1 and n_inst > 0:
        best = max(results.summary(), key=lambda r: r["mean_total_reward"])["agent"]
        comps = results.comparisons(reference=best)  # the table's "vs best" column
        fig, ax = figure(size=(7.0, 1.4 + 0.5 * len(comps)))
        plot_comparisons(ax, comps, colors)
        ax.set_title(f"{name}: total reward relative to the best agent ({best}), paired over instances")
        paths.append(save(fig, os.path.join(out_dir, f"{prefix}paired_difference.png")))
    return paths
