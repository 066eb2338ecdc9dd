"""Rendering for P4: a text summary and a picture of machines coloured by the job they ran."""

from __future__ import annotations

import numpy as np


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


def render_rgb(problem, t, slot_job, jobs, spent, work, last) -> np.ndarray:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    M, J = problem.num_machines, problem.max_jobs
    mach, slot, _ = last
    grid = np.zeros(M)
    grid[mach] = slot
    side = int(np.ceil(np.sqrt(M)))
    img = np.full(side * side, np.nan)
    img[:M] = grid
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(8, 4), dpi=80)
    ax.imshow(img.reshape(side, side), cmap="tab20", vmin=0, vmax=max(J, 1), interpolation="nearest")
    ax.set_title(f"ApproxJobs slot {t}: machines by window slot")
    ax.set_xticks([]), ax.set_yticks([])
    occ = np.flatnonzero(slot_job >= 0)
    used = [spent[slot_job[k]] / jobs.budget[slot_job[k]] for k in occ]
    bx.barh(np.arange(occ.size), used, color="tab:orange")
    bx.set_xlim(0, 1)
    bx.set_yticks(np.arange(occ.size), [f"[{k + 1}] job {slot_job[k]}" for k in occ], fontsize=6)
    bx.set_title("budget used")
    fig.tight_layout()
    fig.canvas.draw()
    out = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return out
