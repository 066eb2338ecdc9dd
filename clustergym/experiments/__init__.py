"""One module per paper: ``reproduce(quick, out, workers, progress) -> report path`` and
``bench_rows(quick) -> list[bench.Row]``. Modules are discovered by name, so a new paper adds one
file here and nothing else (``clustergym reproduce NAME`` and ``clustergym bench`` pick it up).
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["KNOWN", "list_papers", "load", "reproduce"]

# In the order the papers appear in the README (P1..P4).
KNOWN = ("esdp", "ogasched", "gadget", "opm")


def list_papers() -> list[str]:
    """Papers whose experiment module is present."""
    return [n for n in KNOWN if importlib.util.find_spec(f"{__name__}.{n}") is not None]


def load(name: str):
    if name not in list_papers():
        raise ValueError(f"unknown paper {name!r}; expected one of {', '.join([*list_papers(), 'all'])}")
    return importlib.import_module(f"{__name__}.{name}")


def reproduce(paper: str, quick: bool = False, out: str = "runs/reproduce", workers: int = 2,
              progress: bool = True) -> list[str]:
    """Run one paper's comparison (or ``"all"``); returns the report paths."""
    names = list_papers() if paper == "all" else [paper]
    mods = [load(n) for n in names]  # validate every name before running anything
    return [m.reproduce(quick, out, workers, progress) for m in mods]
