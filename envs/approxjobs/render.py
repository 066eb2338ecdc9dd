"""Rendering for P4: a text summary of the slot and the episode viewer (a Gantt chart of jobs × machines)."""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from clustergym.core.viewer import EpisodeViewer, legend_outside, timeline_image


def render_ansi(problem, t, slot_job, jobs, spent, work, last) -> str:
    mach, slot, w = last
    lines = [f"slot {t}: {int((slot_job >= 0).sum())}/{problem.max_jobs} window slots occupied, "
             f"{mach.size}/{problem.num_machines} machines busy last slot, work {float(np.sum(w)):.2f}"]
    for k, j in enumerate(slot_job):
        if j >= 0:
            n = int((slot == k + 1).sum())
            lines.append(f"  [{k + 1}] job {j}: a={jobs.arrival[j]} d={jobs.deadline[j]} "
                         f"spent {spent[j]:.1f}/{jobs.budget[j]:.1f} X={work[j]:.2f} machines {n}")
    return "\n".join(lines) + "\n"


class ApproxViewer(EpisodeViewer):
    """P4 Gantt chart: every job that has arrived (rows, by arrival) × slot t; colour = machines running it,
    light grey = in its window [a_j, d_j] but not served, white = not yet arrived or past its deadline;
    a black tick marks the deadline d_j, a red cross the slot its spend reached the budget B_j.
    Below: busy machines and occupied window slots per slot."""

    title = "ApproxJobs (P4): jobs × machines over the window"

    def record(self, *, job_of_machine, cost, **row) -> None:  # type: ignore[override]  # the keys its env records
        super().record(job_of_machine=job_of_machine.astype(np.int32), cost=cost, **row)

    def draw(self, ax, bx) -> str:
        pb, jobs, h = self.static["problem"], self.static["jobs"], self.history
        n, M = h.n, pb.num_machines
        arrival, deadline = np.asarray(jobs.arrival), np.asarray(jobs.deadline)
        budget = np.asarray(jobs.budget, dtype=float)
        N = int((arrival <= n).sum()) if arrival.size else 0  # jobs arrived by the current slot (ids in arrival order)
        if n and N:
            jm = h["job_of_machine"]  # (n, M)
            run = jm >= 0
            t_idx = np.broadcast_to(np.arange(n)[:, None], jm.shape)[run]
            j_idx = jm[run]
            keep = j_idx < N
            flat = j_idx[keep] * n + t_idx[keep]
            count = np.bincount(flat, minlength=N * n).reshape(N, n).astype(float)  # (N, n) machines per job
            paid = np.bincount(flat, weights=h["cost"][run][keep], minlength=N * n).reshape(N, n)
            slots = np.arange(n)
            inside = (slots[None, :] >= arrival[:N, None]) & (slots[None, :] <= deadline[:N, None])
            img = np.where(count > 0, count, np.where(inside, -1.0, np.nan))
            over = np.cumsum(paid, axis=1) >= budget[:N, None] - 1e-9
            hit = over.any(axis=1) & (paid.sum(axis=1) > 0)
            first = over.argmax(axis=1)
        else:
            img, hit, first = np.full((max(N, 1), n), np.nan), np.zeros(N, dtype=bool), np.zeros(N, dtype=int)
        vmax = max(float(np.nanmax(img)) if n and N and np.isfinite(img).any() else 1.0, 1.0)
        im = timeline_image(ax, img, "viridis", *self.scale(0.5, vmax + 0.5), under="0.86")
        if N:
            d = deadline[:N]
            show = d < max(n, 1)
            ax.scatter(d[show] + 0.5, np.flatnonzero(show), marker="|", s=30, color="k", lw=1.0, zorder=3)
            ax.scatter(first[hit] + 0.5, np.flatnonzero(hit), marker="x", s=18, color="tab:red", lw=1.0, zorder=3)
            ax.set_ylabel("job j (by arrival)")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        else:
            ax.set_yticks([])
            ax.text(0.5, 0.5, f"no job has arrived yet (slot {n})", transform=ax.transAxes, ha="center", va="center",
                    color="0.3")
        cb = ax.figure.colorbar(im, ax=ax, pad=0.01, fraction=0.03)
        cb.set_label("machines running job j", fontsize=7)
        cb.ax.tick_params(labelsize=7)
        legend_outside(ax, bbox_to_anchor=(1.11, 1.0), handles=[
            Patch(facecolor="0.86", edgecolor="0.5", label="in window\n[a_j, d_j], idle"),
            Line2D([], [], marker="|", color="k", ls="none", markersize=8, label="deadline d_j"),
            Line2D([], [], marker="x", color="tab:red", ls="none", markersize=6, label="budget B_j spent")])
        t = np.arange(n) + 0.5
        if n:
            bx.step(t, h["busy"], where="mid", color="tab:blue", lw=1.0, label="busy machines")
            bx.step(t, h["occupied"], where="mid", color="tab:orange", lw=0.8, label="jobs in the window")
        bx.axhline(M, color="0.4", lw=0.8, ls="--", label=f"M = {M} machines")
        bx.set_ylim(0, M * 1.08)
        bx.set_ylabel("count", fontsize=8)
        legend_outside(bx)
        util = float(h["utility"].sum()) if n else 0.0
        return f"M={M} machines, window J_max={pb.max_jobs}; {N} jobs arrived; utility so far {util:.2f}"
