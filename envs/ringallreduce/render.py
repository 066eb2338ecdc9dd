"""Rendering for P3: a text summary of the slot and the episode viewer (ring placements per server over time)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from clustergym.viewer import EpisodeViewer, group_ticks, legend_outside, timeline_image


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


class RingViewer(EpisodeViewer):
    """P3 timeline: every server (rows, grouped by rack) × slot t; colour = the job whose ring holds most of
    the server's GPUs that slot (one colour per job id, so a ring's servers share a colour; white = idle).
    Below: GPUs in use and the most loaded server and rack links, in % of capacity."""

    title = "RingAllReduce (P3): ring placements per server"

    def reset(self, **static) -> None:
        topo = static["problem"].topology
        order = np.lexsort((np.arange(topo.num_servers), np.asarray(topo.rack_of)))  # servers grouped by rack
        S = topo.num_servers
        static.update(order=order, cap_srv=np.asarray(topo.server_bw, dtype=float)[:, 0],
                      cap_rack=np.asarray(topo.rack_bw, dtype=float)[:, 0], gpus=float(np.sum(topo.gpus)), S=S)
        super().reset(**static)

    def record(self, *, allocation, job_ids, load, **row) -> None:  # type: ignore[override]  # the keys its env records
        st = self.static
        S = st["S"]
        used = allocation.sum(axis=0)  # (S,) GPUs in use per server
        main = np.where(used > 0, job_ids[allocation.argmax(axis=0)], -1)  # (S,) job holding most GPUs
        srv, rack = load[:S, 0] / st["cap_srv"], load[S:, 0] / st["cap_rack"]
        super().record(main_job=main[st["order"]], gpu_share=used.sum() / st["gpus"],
                       server_link=srv.max() if srv.size else 0.0, rack_link=rack.max() if rack.size else 0.0, **row)

    def draw(self, ax, bx) -> str:
        st, h = self.static, self.history
        topo = st["problem"].topology
        n, S = h.n, st["S"]
        if n:
            main = h["main_job"].T.astype(float)  # (S, n)
            img = np.where(main >= 0, main % 20, np.nan)
        else:
            img = np.full((S, 0), np.nan)
        timeline_image(ax, img, "tab20", *self.scale(-0.5, 19.5))
        group_ticks(ax, np.asarray(topo.rack_of)[st["order"]], "server s, grouped by rack", "rack ")
        import matplotlib as mpl

        tab20 = mpl.colormaps["tab20"]
        last = np.unique(h["main_job"][-1]) if n else np.zeros(0, dtype=np.int64)
        last = last[last >= 0]
        handles = [Patch(facecolor=tab20(int(j) % 20), label=f"job {int(j)}") for j in last[:10]]
        if last.size > 10:
            handles.append(Patch(facecolor="none", edgecolor="none", label=f"(+{last.size - 10} more)"))
        handles.append(Patch(facecolor="white", edgecolor="0.5", label="idle server"))
        legend_outside(ax, handles=handles, title="rings, last slot", title_fontsize=7)
        t = np.arange(n) + 0.5
        if n:
            bx.step(t, 100 * h["gpu_share"], where="mid", color="tab:blue", lw=1.0, label="GPUs in use")
            bx.step(t, 100 * h["server_link"], where="mid", color="tab:red", lw=0.8, label="max server link load")
            bx.step(t, 100 * h["rack_link"], where="mid", color="tab:purple", lw=0.8, ls="--",
                    label="max rack link load")
            legend_outside(bx)
        bx.set_ylabel("% of capacity", fontsize=8)
        bx.set_ylim(bottom=0)
        if not n:
            return f"{S} servers in {topo.num_racks} racks, {int(st['gpus'])} GPUs"
        return (f"{S} servers in {topo.num_racks} racks; {int(h['active'][-1])} active jobs; "
                f"utility so far {float(h['reward'].sum()):.2f}")
