"""Rendering for P2: a text summary of the slot and the episode viewer (each device type's allocation per port over time)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from clustergym.core.viewer import EpisodeViewer, group_ticks, legend_outside, timeline_image


def render_ansi(env, t: int, arrivals: np.ndarray, last_y: np.ndarray) -> str:
    pb = env.problem
    used = env.layout.server_sums(last_y).sum(axis=0)  # (K,)
    total = np.asarray(pb.capacity).sum(axis=0)
    gain, over = env.dynamics.parts(last_y)
    lines = [f"slot {t}: jobs at ports {np.flatnonzero(arrivals).tolist()}"]
    lines.append("last allocation per device type: " + ", ".join(
        f"{name} {u:.1f}/{c:.0f}" for name, u, c in zip(pb.device_names, used, total)))
    lines.append("per-port gain/overhead of the last allocation: " + ", ".join(
        f"l{l} {g:.2f}/{o:.2f}" for l, (g, o) in enumerate(zip(gain, over))))
    return "\n".join(lines) + "\n"


class AllocationViewer(EpisodeViewer):
    """P2 timeline: rows (device type k, port l), grouped by type, × slot t; colour = the share of type k's
    cluster capacity Σ_r c_r^k allocated to port l's channels, white = port l had no job. Below: the slot's
    reward (eq. 5) and its gain and overhead parts."""

    title = "MultiServerAllocation (P2): each device type's allocation per port"

    def reset(self, **static) -> None:
        pb = static["problem"]
        L, E = pb.num_ports, pb.num_edges
        onehot = np.zeros((L, E))
        onehot[np.asarray(pb.edge_port), np.arange(E)] = 1.0
        total = np.asarray(pb.capacity, dtype=float).sum(axis=0)  # (K,) Σ_r c_r^k
        static.update(port_of_edge=onehot, total=np.where(total > 0, total, 1.0))  # (L, E), (K,)
        super().reset(**static)

    def record(self, *, allocation, **row) -> None:  # type: ignore[override]  # the keys its env records
        share = (self.static["port_of_edge"] @ allocation) / self.static["total"]  # (L, K)
        super().record(share=share, **row)

    def draw(self, ax, bx) -> str:
        pb, h = self.static["problem"], self.history
        n, L, K = h.n, pb.num_ports, pb.num_device_types
        if n:
            share = np.where(h["arrivals"][:, :, None] > 0, h["share"], np.nan)  # (n, L, K)
            img = share.transpose(2, 1, 0).reshape(K * L, n)  # rows (k, l)
        else:
            img = np.full((K * L, 0), np.nan)
        vmax = max(float(np.nanmax(img)) if n and np.isfinite(img).any() else 0.0, 1e-9)
        im = timeline_image(ax, img, "viridis", *self.scale(0.0, vmax))
        names = list(pb.device_names[:K]) or [f"k{k}" for k in range(K)]
        group = np.repeat(np.arange(K), L)
        group_ticks(ax, group, f"device type k (rows: ports l = 0..{L - 1})", "k", names=names)
        cb = ax.figure.colorbar(im, ax=ax, pad=0.01, fraction=0.03)
        cb.set_label("share of type k's capacity Σ_r c_r^k given to port l", fontsize=7)
        cb.ax.tick_params(labelsize=7)
        legend_outside(ax, handles=[Patch(facecolor="white", edgecolor="0.5", label="port has no job")],
                       bbox_to_anchor=(1.09, 1.0))
        t = np.arange(n) + 0.5
        if n:
            bx.step(t, h["reward"], where="mid", color="tab:blue", lw=1.0, label="reward (eq. 5)")
            bx.step(t, h["gain"], where="mid", color="tab:green", lw=0.8, label="gain Σ f_r^k(y)")
            bx.step(t, h["overhead"], where="mid", color="tab:red", lw=0.8, label="overhead max_k β_k Σ y")
            legend_outside(bx)
        bx.set_ylabel("utility per slot", fontsize=8)
        if not n:
            return f"|L|={L} ports, |R|={pb.num_servers} servers, K={K} device types"
        return f"K={K} device types × |L|={L} ports; total reward {float(h['reward'].sum()):.1f}"
