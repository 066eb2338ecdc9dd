"""Run one of the additional reproduction experiments alone, at any size, printed as its report section:

    python -m clustergym.experiments.extra.cli esdp {sequences,servers,regret} [--horizon H] [--instances A-B] ...
    python -m clustergym.experiments.extra.cli ogasched table2 [--instances A-B] ...
    python -m clustergym.experiments.extra.cli opm [--quick] [--horizon H] [--instances A-B]
    python -m clustergym.experiments.extra.cli gadget [--horizon H] [--instances A-B] [--poisson]

``clustergym reproduce PAPER`` runs them with the paper's other experiments; this entry point sits above the
paper modules (it reads their settings), which themselves only call the experiment modules of this package.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from clustergym.core import stats
from clustergym.experiments.esdp_sweep import MAIN_AGENTS
from clustergym.experiments.extra import esdp_more, gadget_more, ogasched_more, opm_more
from clustergym.experiments.gadget import CONFIG
from clustergym.runner.evaluation import evaluate
from clustergym.runner.workers import worker_pool

__all__ = ["main"]


def esdp_main(argv=None) -> None:
    """``python -m clustergym.experiments.extra.cli esdp {sequences,servers,regret}``: one experiment
    alone, printed as its report section."""
    p = argparse.ArgumentParser(description="ESDP: δ(t)/g(t) sweeps, |R| sweep, regret against T")
    p.add_argument("what", choices=("sequences", "servers", "regret"))
    p.add_argument("--horizon", type=int, default=esdp_more.SWEEP_HORIZON)
    p.add_argument("--instances", default="0-19", help="A-B or a comma-separated list")
    p.add_argument("--servers", default=",".join(map(str, esdp_more.SERVERS)))
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)
    if "-" in a.instances:
        lo, hi = map(int, a.instances.split("-"))
        insts = list(range(lo, hi + 1))
    else:
        insts = [int(x) for x in a.instances.split(",")]
    t0 = time.perf_counter()
    more = {"quick": False, "tiny": False, "instances": insts}
    with worker_pool(a.workers):
        if a.what == "sequences":
            more["sequences"] = esdp_more.sequence_study(a.horizon, insts, a.workers, True)
        elif a.what == "servers":
            more["servers"] = esdp_more.servers_study([int(x) for x in a.servers.split(",")], a.horizon, insts,
                                                      a.workers, True)
        else:
            study = esdp_more._evaluate(MAIN_AGENTS[:-1], insts, a.horizon, {}, a.workers, True)
            more["regret"] = esdp_more.regret_vs_horizon(study)
    print(esdp_more.section(more))
    print(f"({time.perf_counter() - t0:.0f} s)")


def ogasched_main(argv=None) -> None:
    """``python -m clustergym.experiments.extra.cli ogasched table2 --instances 0-4``: Table 2 alone."""
    p = argparse.ArgumentParser(description="OGASched: Table 2 (T, ρ, density) alone")
    p.add_argument("what", choices=("table2",))
    p.add_argument("--instances", default="0-19")
    p.add_argument("--horizon", type=int, default=ogasched_more.TABLE2_HORIZON,
                   help="the ρ and density columns' horizon")
    p.add_argument("--max-t", type=int, default=max(ogasched_more.PAPER_TABLE2["T"]),
                   help="the T column's longest horizon")
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)
    lo, hi = map(int, a.instances.split("-"))
    Ts = tuple(T for T in ogasched_more.PAPER_TABLE2["T"] if T <= a.max_t) or (a.max_t,)
    with worker_pool(a.workers):
        t2 = ogasched_more.table2_sweep(range(lo, hi + 1), a.workers, True, Ts=Ts, horizon=a.horizon)
    print("\n".join(["", *ogasched_more.table2_table(t2), "", stats.claims_table(ogasched_more.table2_rows(t2))]))
    print(f"({t2['wall']:.0f} s)")


def opm_main(argv=None) -> None:
    """``python -m clustergym.experiments.extra.cli opm``: the price-rule ablation alone."""
    p = argparse.ArgumentParser(description="OPM: the price-rule ablation (OPM vs OPM-noest under two price rules)")
    p.add_argument("--quick", action="store_true", help="the default scale only, one seed, 600 slots")
    p.add_argument("--horizon", type=int, default=None, help="replace the mode's horizon")
    p.add_argument("--instances", default=None, help="A-B (default: the mode's)")
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)
    insts = None
    if a.instances:
        lo, hi = map(int, a.instances.split("-"))
        insts = list(range(lo, hi + 1))
    with worker_pool(a.workers):
        pw = opm_more.price_sweep(a.quick, a.workers, True, insts, horizon=a.horizon)
    print(opm_more.section({"quick": a.quick, "price": pw}))


def gadget_main(argv=None) -> None:
    """``python -m clustergym.experiments.extra.cli gadget --horizon 40 --instances 0-4``."""
    p = argparse.ArgumentParser(description="GADGET: Fig. 4 with the Philly trace's arrivals, beside Poisson")
    p.add_argument("--horizon", type=int, default=200)
    p.add_argument("--instances", default="0-19")
    p.add_argument("--rates", default=None, help="iterations-mode rates, comma-separated (default: full mode's)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--poisson", action="store_true", help="also run the Poisson version for the side-by-side")
    a = p.parse_args(argv)
    lo, hi = map(int, a.instances.split("-"))
    insts = list(range(lo, hi + 1))
    grid = dict(CONFIG[False]["fig4"])
    if a.rates:
        grid = {"iterations": [float(x) for x in a.rates.split(",")]}
    t0 = time.perf_counter()
    with worker_pool(a.workers):
        trace = gadget_more.trace_sweep(grid, a.horizon, insts, a.workers, True)
        poisson = None
        if a.poisson:
            poisson = {(m, r): evaluate(gadget_more.ENV_ID, list(gadget_more.AGENTS), insts, a.horizon,
                                        env_kwargs=dict(arrival_rate=r, budget_mode=m,
                                                        max_jobs=int(max(64, np.ceil(1.3 * r * a.horizon + 20)))),
                                        workers=a.workers, progress=True, score=False)
                       for m, rates in grid.items() for r in rates}
    more = {"quick": False, "tiny": False, "instances": insts, "horizon": a.horizon, "trace": trace,
            "poisson": poisson, "wall": time.perf_counter() - t0}
    print(gadget_more.section(more))


COMMANDS = {"esdp": esdp_main, "ogasched": ogasched_main, "opm": opm_main, "gadget": gadget_main}


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        raise SystemExit(f"usage: python -m clustergym.experiments.extra.cli {{{','.join(COMMANDS)}}} ...")
    COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    main()
