"""Rendering for P3: a text summary of the slot and the episode viewer (ring placements per server over time)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from clustergym.core.viewer import EpisodeViewer, group_ticks, legend_outside, timeline_image


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


def _job_colors() -> tuple:
    import matplotlib as mpl

    return tuple(mpl.colors.to_hex(mpl.colormaps[name](i)) for name in ("tab20", "tab20b", "tab20c")
                 for i in range(20))


JOB_COLORS = _job_colors()  # 60 colours: more than the jobs of one window (max_jobs = 32)


def job_colormap():
    from matplotlib.colors import ListedColormap

    return ListedColormap(list(JOB_COLORS), name="jobs")


class RingViewer(EpisodeViewer):
    """P3 timeline: every server (rows, grouped by rack; every rack labelled where the labels fit) × slot t; colour = the job whose
    ring holds most of the server's GPUs that slot (one colour per job id, so a ring's servers share a colour;
    one of :data:`JOB_COLORS`, never that of another job in the window at the same time; white = idle). The key lists every job of the
    last slot with its colour and the racks its ring spans. Below: GPUs in use and the most loaded server and
    rack links, in % of capacity."""

    title = "RingAllReduce (P3): ring placements per server"

    def reset(self, **static) -> None:
        topo = static["problem"].topology
        order = np.lexsort((np.arange(topo.num_servers), np.asarray(topo.rack_of)))  # servers grouped by rack
        S = topo.num_servers
        static.update(order=order, cap_srv=np.asarray(topo.server_bw, dtype=float)[:, 0],
                      cap_rack=np.asarray(topo.rack_bw, dtype=float)[:, 0], gpus=float(np.sum(topo.gpus)), S=S,
                      colour_of={}, free=list(range(len(JOB_COLORS))))
        super().reset(**static)

    def _colours(self, main: np.ndarray, window: np.ndarray) -> np.ndarray:
        """(S,) colour index of each server's job (-1 idle). A job keeps the colour it got when first drawn; a
        new job gets the colour freed longest ago, and a job's colour is freed when it leaves the window: jobs
        in the window together (at most max_jobs = 32 < 60 colours) never share one."""
        st = self.static
        colour_of, free = st["colour_of"], st["free"]
        inside = set(int(j) for j in window[window >= 0])
        for j in [j for j in colour_of if j not in inside]:
            free.append(colour_of.pop(j))
        for j in np.unique(main[main >= 0]):
            if int(j) not in colour_of:
                colour_of[int(j)] = free.pop(0) if free else int(j) % len(JOB_COLORS)
        return np.array([colour_of[int(j)] if j >= 0 else -1 for j in main], dtype=np.int64)

    def record(self, *, allocation, job_ids, load, **row) -> None:  # type: ignore[override]  # the keys its env records
        st = self.static
        S = st["S"]
        used = allocation.sum(axis=0)  # (S,) GPUs in use per server
        main = np.where(used > 0, job_ids[allocation.argmax(axis=0)], -1)  # (S,) job holding most GPUs
        srv, rack = load[:S, 0] / st["cap_srv"], load[S:, 0] / st["cap_rack"]
        super().record(main_job=main[st["order"]], main_colour=self._colours(main[st["order"]], job_ids),
                       gpu_share=used.sum() / st["gpus"],
                       server_link=srv.max() if srv.size else 0.0, rack_link=rack.max() if rack.size else 0.0, **row)

    def draw(self, ax, bx) -> str:
        st, h = self.static, self.history
        topo = st["problem"].topology
        n, S = h.n, st["S"]
        if n:
            main = h["main_colour"].T.astype(float)  # (S, n)
            img = np.where(main >= 0, main, np.nan)
        else:
            img = np.full((S, 0), np.nan)
        timeline_image(ax, img, job_colormap(), -0.5, len(JOB_COLORS) - 0.5)  # categorical: no shared scale
        racks = np.asarray(topo.rack_of)
        group_ticks(ax, racks[st["order"]], "server s, grouped by rack", "rack ", label_all=True)
        last = h["main_job"][-1] if n else np.zeros(0, dtype=np.int64)  # (S,) in row order
        colour = h["main_colour"][-1] if n else np.zeros(0, dtype=np.int64)
        jobs = np.unique(last[last >= 0])
        handles = []
        for j in jobs:
            on = np.unique(racks[st["order"]][last == j])
            where = f"rack {int(on[0])}" if on.size == 1 else f"racks {','.join(str(int(r)) for r in on)}"
            c = JOB_COLORS[int(colour[np.flatnonzero(last == j)[0]])]
            handles.append(Patch(facecolor=c, label=f"job {int(j)}: {where}"))
        handles.append(Patch(facecolor="white", edgecolor="0.5", label="idle server"))
        legend_outside(ax, handles=handles, title=f"{jobs.size} rings, last slot\n(one colour per job while\n"
                       "it is in the window)", title_fontsize=6, fontsize=6, ncol=1 if jobs.size <= 13 else 2,
                       handlelength=1.0, columnspacing=0.6, labelspacing=0.25)
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
