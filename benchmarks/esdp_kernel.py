"""ESDP's pruned DP kernel against the dense reference kernel at the |R| sweep's sizes (docs/esdp.md, "The DP
kernel"): per |R| and slot t, one decision with the statistics a run leaves by then (every channel tried,
counts up to t/4, means in [0, 1]; :func:`clustergym.experiments.esdp_bench.late_decision`), both kernels in
the same process: median ms over ``--repeats`` decisions, the peak memory allocated during one (tracemalloc)
and the DP cells the pruned kernel evaluates (tests/agents/test_esdp_kernel.py checks that both decide alike).

    python benchmarks/esdp_kernel.py                     # |R| = 20, 40, 60, 80 at t = 200, 2,000, 8,000
    python benchmarks/esdp_kernel.py --servers 80 --slots 2000 --repeats 5
"""

from __future__ import annotations

import argparse

from clustergym.experiments.esdp_bench import late_decision


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", default="20,40,60,80")
    p.add_argument("--slots", default="200,2000,8000")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    print("| \\|R\\| | slot t | pruned ms | dense ms | speed-up | pruned peak MiB | dense peak MiB | DP cells (pruned) |")
    print("|---|---|---|---|---|---|---|---|")
    for R in (int(x) for x in a.servers.split(",")):
        for t in (int(x) for x in a.slots.split(",")):
            new_s, new_mem, cells = late_decision("pruned", servers=R, t=t, repeats=a.repeats)
            ref_s, ref_mem, _ = late_decision("numba", servers=R, t=t, repeats=a.repeats)
            print(f"| {R} | {t:,} | {1000 * new_s:.1f} | {1000 * ref_s:.1f} | {ref_s / new_s:.1f}x | "
                  f"{new_mem / 2**20:.0f} | {ref_mem / 2**20:,.0f} | {cells:,} |", flush=True)


if __name__ == "__main__":
    main()
