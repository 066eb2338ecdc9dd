"""Rendering for P2: a text summary and a heat map of per-server, per-type allocation."""

from __future__ import annotations

import numpy as np


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


def render_rgb(env, t: int, arrivals: np.ndarray, last_y: np.ndarray) -> np.ndarray:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    pb = env.problem
    cap = np.asarray(pb.capacity, dtype=float)
    share = np.divide(env.layout.server_sums(last_y), cap, out=np.zeros_like(cap), where=cap > 0)  # (R, K)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(7, 4), dpi=80, gridspec_kw={"width_ratios": [1, 4]})
    ax0.imshow(np.asarray(arrivals, dtype=float)[:, None], aspect="auto", cmap="Blues", vmin=0, vmax=1)
    ax0.set_title("jobs")
    ax0.set_xticks([])
    ax0.set_ylabel("port l")
    im = ax1.imshow(share.T, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    ax1.set_yticks(range(pb.num_device_types), pb.device_names[:pb.num_device_types])
    ax1.set_xlabel("server r")
    ax1.set_title(f"MultiServerAllocation slot {t}: allocated / capacity")
    fig.colorbar(im, ax=ax1, fraction=0.04)
    fig.tight_layout()
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return img
