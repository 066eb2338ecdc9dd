"""Rendering for P1: a text summary and a matplotlib picture of the bipartite graph."""

from __future__ import annotations

import numpy as np


def render_ansi(problem, t: int, arrivals: np.ndarray, last_x: np.ndarray) -> str:
    used = problem.demand.T @ last_x.astype(np.int64)
    lines = [f"slot {t}: jobs at ports {np.flatnonzero(arrivals).tolist()}"]
    lines.append("last action: channels " + ", ".join(
        f"{e}=(l{problem.edge_port[e]},r{problem.edge_server[e]})" for e in np.flatnonzero(last_x)) or "-")
    lines.append("devices used: " + ", ".join(
        f"{name} {int(u)}/{int(c)}" for name, u, c in zip(problem.device_names, used, problem.capacity)))
    return "\n".join(lines) + "\n"


def render_rgb(problem, t: int, arrivals: np.ndarray, last_x: np.ndarray) -> np.ndarray:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    L, R = problem.num_ports, problem.num_servers
    fig, ax = plt.subplots(figsize=(6, 4), dpi=80)
    yl = np.linspace(0, 1, L) if L > 1 else np.array([0.5])
    yr = np.linspace(0, 1, R) if R > 1 else np.array([0.5])
    for e in range(problem.num_edges):
        l, r = problem.edge_port[e], problem.edge_server[e]
        sel = bool(last_x[e])
        ax.plot([0, 1], [yl[l], yr[r]], color="tab:red" if sel else "0.8", lw=2.0 if sel else 0.6, zorder=1)
    ax.scatter(np.zeros(L), yl, s=80, c=["tab:blue" if a else "white" for a in arrivals], edgecolors="k", zorder=2)
    ax.scatter(np.ones(R), yr, s=25, c="0.3", zorder=2)
    ax.set_xlim(-0.2, 1.2)
    ax.set_xticks([0, 1], ["ports (filled = job)", "servers"])
    ax.set_yticks([])
    ax.set_title(f"MultiServerChannel slot {t}: red = selected channels")
    fig.tight_layout()
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return img
