"""Rendering for P1: a text summary of the slot and the episode viewer (a timeline of the selected channels)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from clustergym.core.viewer import EpisodeViewer, group_ticks, legend_outside, timeline_image


def render_ansi(problem, t: int, arrivals: np.ndarray, last_x: np.ndarray) -> str:
    used = problem.demand.T @ last_x.astype(np.int64)
    lines = [f"slot {t}: jobs at ports {np.flatnonzero(arrivals).tolist()}"]
    lines.append("last action: channels " + ", ".join(
        f"{e}=(l{problem.edge_port[e]},r{problem.edge_server[e]})" for e in np.flatnonzero(last_x)) or "-")
    lines.append("devices used: " + ", ".join(
        f"{name} {int(u)}/{int(c)}" for name, u, c in zip(problem.device_names, used, problem.capacity)))
    return "\n".join(lines) + "\n"


class ChannelViewer(EpisodeViewer):
    """P1 timeline: every channel e (rows, grouped by port l) × slot t; colour = the realised utility Z̃_e(t)
    of an executed channel, light grey = usable (its port had a job) but not selected, white = no job.
    Below: the slot's reward Σ_e x_e Z̃_e(t) (eq. 5), its expectation ṽᵀx and the oracle's max ṽᵀx."""

    title = "MultiServerChannel (P1): channels selected per slot"

    def draw(self, ax, bx) -> str:
        pb, h = self.static["problem"], self.history
        n, E = h.n, pb.num_edges
        if n:
            img = np.where(h["selected"], h["utility"], np.where(h["available"], -1.0, np.nan)).T  # (E, n)
        else:
            img = np.full((E, 0), np.nan)
        im = timeline_image(ax, img, "viridis", *self.scale(0.0, 1.0), under="0.86")
        group_ticks(ax, pb.edge_port, "channel e, grouped by port l", "l")
        cb = ax.figure.colorbar(im, ax=ax, pad=0.01, fraction=0.03)
        cb.set_label("realised utility Z̃_e(t) of a selected channel", fontsize=7)
        cb.ax.tick_params(labelsize=7)
        t = np.arange(n) + 0.5
        if n:
            bx.step(t, h["reward"], where="mid", color="tab:blue", lw=1.0, label="reward Σ x_e Z̃_e (eq. 5)")
            bx.step(t, h["expected"], where="mid", color="tab:orange", lw=1.0, label="expected ṽᵀx")
            if np.isfinite(h["oracle"]).any():
                bx.step(t, h["oracle"], where="mid", color="0.25", lw=0.8, ls="--", label="oracle max ṽᵀx")
        bx.set_ylabel("utility per slot", fontsize=8)
        bx.set_ylim(bottom=0)
        legend_outside(bx, handles=None if n else [Patch(color="w", label="no slot yet")])
        legend_outside(ax, handles=[Patch(facecolor="0.86", edgecolor="0.5", label="port has a job,\nnot selected"),
                                    Patch(facecolor="white", edgecolor="0.5", label="port has no job")],
                       bbox_to_anchor=(1.09, 1.0))
        if not n:
            return f"|L|={pb.num_ports} ports, |R|={pb.num_servers} servers, |E|={E} channels"
        sel = h["selected"].sum(axis=1)
        return (f"|E|={E} channels; {int(sel[-1])} selected in the last slot; "
                f"total reward {float(h['reward'].sum()):.1f}")
