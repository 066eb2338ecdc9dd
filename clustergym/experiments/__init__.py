"""One module per paper: ``reproduce(quick, out, workers, progress) -> report path`` and
``bench_rows(quick) -> list[bench.Row]``. Modules are discovered by name, so a new paper adds one
file here and nothing else (``clustergym reproduce NAME`` and ``clustergym bench`` pick it up).
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["KNOWN", "MIN_INSTANCES", "instances_for", "list_papers", "load", "reproduce", "write_combined_report"]

# Instances (scenario seeds) of every claims comparison, quick and full mode alike (issue 26): with
# n = 3 no sign pattern reaches a 95% t-interval verdict that the signs alone would not give, and a
# verdict needs the interval. Quick mode shortens horizons instead (docs/evaluation.md).
MIN_INSTANCES = 5


def instances_for(quick: bool) -> list[int]:
    """The instances (scenario seeds) a paper's reproduction compares agents over: ``MIN_INSTANCES``
    in both modes (the one place that sets the number)."""
    return list(range(MIN_INSTANCES))

from clustergym.envs import FAMILIES as _FAMILIES

# The ``experiment`` of every shipped family, in the order the papers appear in the README (P1..P4).
KNOWN = tuple(f.experiment for f in _FAMILIES if f.experiment)


def list_papers() -> list[str]:
    """Papers whose experiment module is present."""
    return [n for n in KNOWN if importlib.util.find_spec(f"{__name__}.{n}") is not None]


def load(name: str):
    if name not in list_papers():
        raise ValueError(f"unknown paper {name!r}; expected one of {', '.join([*list_papers(), 'all'])}")
    return importlib.import_module(f"{__name__}.{name}")


def reproduce(paper: str, quick: bool = False, out: str = "runs/reproduce", workers: int = 2,
              progress: bool = True) -> list[str]:
    """Run one paper's comparison (or ``"all"``); returns the report paths.

    Each paper writes its own ``OUT/<paper>/report.md`` (tables, figures). With ``"all"``, a combined
    ``OUT/report.md`` follows them: one section per paper (its report, figure links rewritten to
    point into the paper's folder) and the wall time of each part.
    """
    import time

    names = list_papers() if paper == "all" else [paper]
    mods = [load(n) for n in names]  # validate every name before running anything
    from clustergym.runner import worker_pool

    reports, walls = [], []
    with worker_pool(workers):  # one set of worker processes for every sweep of every paper
        for m in mods:
            t0 = time.perf_counter()
            reports.append(m.reproduce(quick, out, workers, progress))
            walls.append(time.perf_counter() - t0)
    if paper == "all":
        reports.append(write_combined_report(out, names, reports, walls, quick, workers))
    return reports


def write_combined_report(out: str, names: list[str], reports: list[str], walls: list[float], quick: bool,
                          workers: int) -> str:
    """``OUT/report.md``: every paper's report in one page, with per-paper wall times."""
    import os
    import platform
    import re

    import clustergym

    total = sum(walls)
    lines = [f"# clustergym reproduction report ({'quick' if quick else 'full'} mode)", "",
             f"clustergym {clustergym.__version__}, {platform.machine()} with {os.cpu_count()} cores, "
             f"{workers} worker processes; total wall time {total / 60:.1f} min.", "",
             "| paper | report | wall time |", "|---|---|---|"]
    for n, r, w in zip(names, reports, walls):
        lines.append(f"| {n} | [{n}/report.md]({os.path.relpath(r, out)}) | {w:.0f} s |")
    lines.append("")
    for n, r in zip(names, reports):
        with open(r) as f:
            body = f.read()
        rel = os.path.relpath(os.path.dirname(r), out)
        # Figure and file links are relative to the paper's folder: point them into it.
        body = re.sub(r"(!?\[[^\]]*\]\()(?![a-z]+://|/|#)([^)]+\))", lambda mm: f"{mm.group(1)}{rel}/{mm.group(2)}",
                      body)
        body = re.sub(r"^(#+) ", lambda mm: "#" + mm.group(1) + " ", body, flags=re.M)  # one level down
        lines += [body.rstrip(), ""]
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(f"combined report: {path} (total {total / 60:.1f} min)")
    return path
