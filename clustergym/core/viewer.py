"""The episode viewer every clustergym env shares: a timeline of the episode so far, one style for all.

An env built with ``render_mode="rgb_array"`` or ``"human"`` owns an :class:`EpisodeViewer` (its family's
subclass, in the family's ``render.py``). ``step`` hands the viewer the slot's arrays
(:meth:`EpisodeViewer.record`: a copy into a growing buffer, no drawing); ``render()`` draws the whole
episode so far (:meth:`EpisodeViewer.figure`) and returns it as an RGB array, or shows it in a pygame
window (``"human"``, after every step as Gymnasium's envs do). Without a render mode the env has no
viewer and records nothing, so stepping costs the same as before.

Every frame has the same size and layout: a title line (env, slot t / T), a wide timeline panel
(what ran where, slot by slot: x axis "time slot t" from 0 to the current slot), and a panel of
per-slot totals in the problem's units below it, sharing the time axis; legends sit outside the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["VISUAL_MODES", "EpisodeViewer", "History", "require_pygame", "figure_to_array", "timeline_image", "group_ticks",
           "legend_outside", "FRAME_SIZE", "FRAME_DPI"]

VISUAL_MODES = ("rgb_array", "human")
"""The render modes that draw pictures (and so keep an episode history)."""

FRAME_SIZE = (9.0, 5.6)  # inches: every env's frame has the same size (GIFs of two envs line up)
FRAME_DPI = 80  # 720 x 448 pixels

PYGAME_MISSING = ("render_mode='human' needs pygame, which is not installed: pip install 'clustergym[viewer]' "
                  "(or pip install pygame); render_mode='rgb_array' returns the same frames without it")


def require_pygame():
    """The pygame module, or ``gymnasium.error.DependencyNotInstalled`` with one line saying how to get it."""
    import os

    from gymnasium.error import DependencyNotInstalled

    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # no greeting on stdout
    try:
        import pygame
    except ImportError:
        raise DependencyNotInstalled(PYGAME_MISSING) from None
    return pygame


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def figure_to_array(fig) -> np.ndarray:
    """The figure as an (H, W, 3) uint8 RGB array (and the figure closed)."""
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    _plt().close(fig)
    return img


class History:
    """Per-slot arrays of one episode, appended on ``step``: one buffer per key, grown by doubling
    (amortised O(1) per slot, one array copy per key). ``h["key"]`` is the (n, ...) array of the n slots
    recorded so far (a view)."""

    def __init__(self) -> None:
        self._cols: dict[str, np.ndarray] = {}
        self.n = 0

    def clear(self) -> None:
        self.n = 0

    def append(self, **row: Any) -> None:
        n = self.n
        for key, value in row.items():
            v = np.asarray(value)
            buf = self._cols.get(key)
            if buf is None or buf.shape[1:] != v.shape or buf.dtype != v.dtype and not np.can_cast(v.dtype, buf.dtype):
                fresh = np.zeros((max(64, 2 * n), *v.shape), dtype=v.dtype)
                if buf is not None and buf.shape[1:] == v.shape:
                    fresh = fresh.astype(np.result_type(buf.dtype, v.dtype))
                    fresh[:n] = buf[:n]
                buf = self._cols[key] = fresh
            elif buf.shape[0] <= n:
                grown = np.zeros((2 * buf.shape[0], *buf.shape[1:]), dtype=buf.dtype)
                grown[:n] = buf[:n]
                buf = self._cols[key] = grown
            buf[n] = v
        self.n = n + 1

    def __getitem__(self, key: str) -> np.ndarray:
        buf = self._cols.get(key)
        if buf is None:
            raise KeyError(f"{key!r}: nothing recorded under this key (recorded: {sorted(self._cols)})")
        return buf[:self.n]

    def __contains__(self, key: str) -> bool:
        return key in self._cols

    def __len__(self) -> int:
        return self.n


class EpisodeViewer:
    """Base of the families' viewers: the history, the shared frame layout, the pygame window.

    A subclass sets ``title`` and implements :meth:`draw` (fill the timeline axis ``ax`` and the totals
    axis ``bx`` from :attr:`history`). The env calls :meth:`reset` at ``reset`` (with the static data the
    pictures need) and :meth:`record` at every ``step``.
    """

    title = "episode"
    label = ""  # shown before the title (the agent's name in ``clustergym replay``)
    label_apart = False  # the label on a line of its own (a long one: a model's path)
    # Side-by-side replays fix these so both panels read alike: the timeline's colour scale (vmin, vmax)
    # and its last slot (the x axis then spans 0..end at every frame). None: each frame's own.
    shared_scale: tuple[float, float] | None = None
    end_slot: int | None = None
    natural_scale: tuple[float, float] | None = None  # the scale the last frame's data asked for
    drawn_scale: tuple[float, float] | None = None  # the scale the last frame was drawn with
    # The same for the totals panel's y axis: fixed by side-by-side replays, else each frame's own limits.
    shared_totals: tuple[float, float] | None = None
    natural_totals: tuple[float, float] | None = None  # the y limits the last frame's totals asked for

    def __init__(self, mode: str, horizon: int, fps: int = 4) -> None:
        if mode == "human":
            require_pygame()  # fail at construction, with one line, not at the first step
        self.mode = mode
        self.horizon = int(horizon)
        self.fps = fps
        self.history = History()
        self.static: dict[str, Any] = {}
        self._window: tuple[Any, Any] | None = None  # (pygame screen, clock), opened at the first "human" frame

    # -- recording (cheap: no drawing) ------------------------------------------------------------
    def reset(self, **static: Any) -> None:
        """A new episode: forget the history; keep ``static`` (problem data the pictures need)."""
        self.history.clear()
        self.static = static
        if self.mode == "human":
            self.show()

    def record(self, **row: Any) -> None:
        """One slot's arrays (copied). Under ``"human"`` the window shows the new frame."""
        self.history.append(**row)
        if self.mode == "human":
            self.show()

    # -- drawing ------------------------------------------------------------------------------------
    def scale(self, vmin: float, vmax: float) -> tuple[float, float]:
        """The timeline's colour scale: ``(vmin, vmax)`` from this frame's data, unless :attr:`shared_scale` fixes it."""
        natural = (float(vmin), float(vmax))
        drawn = natural if self.shared_scale is None else (float(self.shared_scale[0]), float(self.shared_scale[1]))
        self.natural_scale, self.drawn_scale = natural, drawn
        return drawn

    def draw(self, ax, bx) -> str:
        """Fill the timeline axis ``ax`` and the per-slot totals axis ``bx``; returns a subtitle."""
        raise NotImplementedError  # pragma: no cover - abstract: each family's viewer (envs/*/render.py) draws

    def figure(self):
        """The matplotlib figure of the episode so far (save it as PDF/SVG for a paper; close it after)."""
        plt = _plt()
        fig, (ax, bx) = plt.subplots(2, 1, figsize=FRAME_SIZE, dpi=FRAME_DPI, sharex=True, layout="constrained",
                                     gridspec_kw={"height_ratios": [3, 1.3]})
        n = self.history.n
        sub = self.draw(ax, bx)
        lo, hi = bx.get_ylim()
        self.natural_totals = (float(lo), float(hi))
        if self.shared_totals is not None:
            bx.set_ylim(*self.shared_totals)
        ax.set_xlim(0, max(n, self.end_slot or 0, 1))
        bx.set_xlabel("time slot t")
        from matplotlib.ticker import MaxNLocator

        bx.xaxis.set_major_locator(MaxNLocator(integer=True))
        bx.grid(alpha=0.3)
        line = f"{self.title}   slot {n} / {self.horizon}"
        if self.label:
            line = f"[{self.label}]" + ("\n" if self.label_apart else " ") + line
        fig.suptitle(line + (f"\n{sub}" if sub else ""), fontsize=11)
        return fig

    def frame(self) -> np.ndarray:
        """The episode so far as an RGB array (the same size at every slot)."""
        return figure_to_array(self.figure())

    # -- "human" --------------------------------------------------------------------------------------
    def show(self) -> None:
        pygame = require_pygame()
        img = self.frame()
        if self._window is None:
            pygame.display.init()  # the display only: pygame.init() would start audio too (ALSA errors headless)
            screen = pygame.display.set_mode((img.shape[1], img.shape[0]))
            pygame.display.set_caption(self.title)
            self._window = (screen, pygame.time.Clock())
        screen, clock = self._window
        screen.blit(pygame.surfarray.make_surface(img.swapaxes(0, 1)), (0, 0))
        pygame.event.pump()
        pygame.display.flip()
        clock.tick(self.fps)

    def close(self) -> None:
        if self._window is not None:
            pygame = require_pygame()
            pygame.display.quit()
            pygame.quit()
            self._window = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_window"] = None  # a window is not copied (a copy opens its own)
        return state


def timeline_image(ax, img: np.ndarray, cmap, vmin: float, vmax: float, bad: str = "white", under: str | None = None):
    """Draw an (rows, n) array of the episode so far: column s is slot s (x from s to s+1), row 0 at the top."""
    import matplotlib as mpl

    cm = (mpl.colormaps[cmap] if isinstance(cmap, str) else cmap).with_extremes(bad=bad, under=under)
    rows, n = img.shape
    data = img if n else np.full((max(rows, 1), 1), np.nan)
    return ax.imshow(np.ma.masked_invalid(data), aspect="auto", interpolation="nearest", cmap=cm, vmin=vmin,
                     vmax=vmax, extent=(0, max(n, 1), max(rows, 1) - 0.5, -0.5), origin="upper")


def group_ticks(ax, group_of_row: np.ndarray, label: str, prefix: str, max_labels: int = 12,
                names: "list[str] | None" = None, label_all: bool = False) -> None:
    """Y ticks at the middle of each run of equal ``group_of_row`` values (labelled ``names[g]``, else
    ``prefix + g``), with separator lines. Groups too close to label without overlap are skipped, unless
    ``label_all``: then every group is labelled, labels of small neighbouring groups spread apart with a
    leader line to their group's middle, as long as all the labels fit the axis without overlapping (else
    groups are skipped as without ``label_all``)."""
    g = np.asarray(group_of_row)
    if g.size == 0:
        ax.set_yticks([])
        return
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    ends = np.r_[starts[1:], g.size]
    mids = (starts + ends - 1) / 2
    gap = g.size / (1.6 * max_labels)  # rows between two labels, so that they never overlap
    text = [names[int(g[s])] if names else f"{prefix}{int(g[s])}" for s in starts]
    if label_all and (len(mids) - 1) * gap <= g.size - 1:  # every label fits, at least ``gap`` apart
        pos = _spread(mids.astype(float), gap, -0.5, g.size - 0.5)
        ax.set_yticks(mids, [""] * len(mids))  # tick marks at each group's middle
        trans = ax.get_yaxis_transform()  # x: axes fraction, y: rows
        for m, p, lab in zip(mids, pos, text):
            ax.annotate(lab, xy=(0.0, m), xycoords=trans, xytext=(-0.03, p), textcoords=trans, ha="right",
                        va="center", fontsize=7, annotation_clip=False,
                        arrowprops=None if abs(p - m) < 0.3 else dict(arrowstyle="-", lw=0.5, color="0.45"))
        for s in starts[1:]:
            ax.axhline(s - 0.5, color="0.55", lw=0.5)
        # the axis label clears the labels: their offset (0.03 of the axis, about 15 pt) and their width
        ax.set_ylabel(label, labelpad=18 + 4.5 * max(len(t) for t in text))
        return
    shown, last = [], -np.inf
    for k, mid in enumerate(mids):
        if mid - last >= gap:
            shown.append(k)
            last = mid
    ax.set_yticks(mids[shown], [text[k] for k in shown], fontsize=7)
    for s in starts[1:]:
        ax.axhline(s - 0.5, color="0.55", lw=0.5)
    ax.set_ylabel(label)


def _spread(pos: np.ndarray, gap: float, lo: float, hi: float) -> np.ndarray:
    """Positions as close to ``pos`` (ascending) as they can be with at least ``gap`` between neighbours and
    all within [lo, hi] (when they fit: else evenly spaced over it)."""
    n = pos.size
    if n <= 1:
        return pos.copy()
    if (n - 1) * gap > hi - lo:
        return np.linspace(lo, hi, n)
    out = pos.copy()
    for i in range(1, n):  # push down
        out[i] = max(out[i], out[i - 1] + gap)
    out[-1] = min(out[-1], hi)
    for i in range(n - 2, -1, -1):  # then up, where the bottom overflowed
        out[i] = min(out[i], out[i + 1] - gap)
    out[0] = max(out[0], lo)
    for i in range(1, n):
        out[i] = max(out[i], out[i - 1] + gap)
    return out


def legend_outside(ax, handles=None, **kw) -> None:
    """A legend to the right of the axis (outside the data)."""
    opts = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False, borderaxespad=0.0)
    opts.update(kw)
    if handles is None:
        ax.legend(**opts)
    else:
        ax.legend(handles=handles, **opts)
