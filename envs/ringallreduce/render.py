"""Rendering for P3: a text summary of the slot and a picture of racks, servers and rings."""

from __future__ import annotations

import numpy as np


def render_ansi(problem, t, last_y, last_ids, last_load, active) -> str:
    topo = problem.topology
    used = last_y.sum(axis=0)
    lines = [f"slot {t}: {active} active jobs, GPUs used last slot {int(used.sum())}/{int(topo.gpus.sum())}"]
    for j in np.flatnonzero(last_y.sum(axis=1)):
        servers = np.flatnonzero(last_y[j])
        lines.append(f"  job {int(last_ids[j])}: " + " -> ".join(f"s{s}(r{int(topo.rack_of[s])})x{int(last_y[j, s])}"
                                                           for s in servers))
    cap = np.concatenate([topo.server_bw, topo.rack_bw])
    lines.append(f"max link load {float((last_load / cap).max()) * 100:.1f}% of capacity")
    return "\n".join(lines) + "\n"


def render_rgb(problem, t, last_y, last_ids, last_load, active) -> np.ndarray:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    topo = problem.topology
    S = topo.num_servers
    order = np.lexsort((np.arange(S), topo.rack_of))
    xpos = np.empty(S)
    xpos[order] = np.arange(S) + topo.rack_of[order] * 1.5
    fig, ax = plt.subplots(figsize=(7, 3.5), dpi=80)
    ax.bar(xpos, topo.gpus, color="0.85", edgecolor="0.5", width=0.8)
    colors = plt.cm.tab20(np.linspace(0, 1, 20))
    bottom = np.zeros(S)
    for k, j in enumerate(np.flatnonzero(last_y.sum(axis=1))):
        ax.bar(xpos, last_y[j], bottom=bottom, color=colors[k % 20], width=0.8)
        bottom += last_y[j]
    ax.set_xticks([])
    ax.set_ylabel("GPUs (colour = job)")
    ax.set_title(f"RingAllReduce slot {t}: {active} active jobs; servers grouped by rack")
    fig.tight_layout()
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return img
