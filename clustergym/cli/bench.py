"""``clustergym bench``: the performance table (docs/architecture.md, Performance targets), measured on this machine.

Each row prints the measured value beside its target: every paper's rows (its experiment module's
``bench_rows``), the memory row and the training-throughput rows of :mod:`clustergym.bench.throughput`.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from clustergym.bench.rates import Row, tiny_sizes
from clustergym.bench.throughput import clear_anchor, memory_rows, plain_sb3_rows, throughput_rows
from clustergym.experiments import list_papers, load
from clustergym.runner.results import exclusive_write

__all__ = ["run_bench"]


def run_bench(only: str | None = None, quick: bool = False, out: str | None = None, tiny: bool = False) -> list[Row]:
    """Measure and print every paper's rows (or only one paper's); optionally write JSON to ``out``. ``tiny``:
    quick mode at smoke-test sizes (:func:`clustergym.bench.rates.tiny_sizes`)."""
    if tiny:
        with tiny_sizes():
            return _run_bench(only, True, out, "tiny")
    return _run_bench(only, quick, out, "quick" if quick else "full")


def _run_bench(only: str | None, quick: bool, out: str | None, mode: str) -> list[Row]:
    import platform

    from tqdm.auto import tqdm

    if only is not None and only not in (*list_papers(), "training"):
        raise ValueError(f"unknown paper {only!r} for --only; expected one of {', '.join(list_papers())}, training")
    names = list_papers() if only is None else [] if only == "training" else [only]
    rows: list[Row] = []
    clear_anchor()  # the CartPole-v1 anchor row is printed once per bench, beside the first training row
    for name in tqdm(names, desc="bench", leave=False):
        rows.extend(load(name).bench_rows(quick))
    if only is None:
        rows.extend(memory_rows(quick))
    if only in (None, "training"):
        rows.extend(throughput_rows(quick))
        rows.extend(plain_sb3_rows(quick))
    print(f"clustergym bench on {platform.node()} ({platform.machine()}, {_cores()} cores), "
          f"{mode} mode")
    print(f"{'what':<62} {'measured':>12} {'unit':<10} {'target':<14}")
    print("-" * 104)
    for r in rows:
        print(r.line())
    if out:
        doc = [asdict(r) for r in rows]
        exclusive_write(out, lambda f: json.dump(doc, f, indent=1), "--out")
    return rows


def _cores() -> int:
    import os

    return os.cpu_count() or 1

