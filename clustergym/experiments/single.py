"""One experiment of a paper's reproduction alone: ``clustergym reproduce PAPER --only NAME``.

:data:`clustergym.experiments.alone.EXPERIMENTS` names, per paper, the experiments that run on their own (their
runs are the ones ``clustergym reproduce PAPER`` makes for them, at the same mode, instances and horizons, so a run
store shares them both ways). :func:`run_only` writes ``OUT/PAPER/report.md`` (the experiment's section of the
paper's report) and ``OUT/PAPER/results.json`` (its claims rows).
"""

from __future__ import annotations

import os

from clustergym.core import stats
from clustergym.experiments import esdp_sweep, gadget, instances_for, mode_name, write_summary
from clustergym.experiments.alone import EXPERIMENTS, check_only
from clustergym.experiments.extra import esdp_more, gadget_more, opm_more
from clustergym.experiments.extra import ogasched_more as om

__all__ = ["run_only", "runner"]


def _esdp(name: str, quick: bool, workers: int, progress: bool, insts: list, tiny: bool):
    more = {"quick": quick, "tiny": tiny, "instances": insts}
    if name == "regret":  # the main study's runs of ESDP and the baselines (random is not in the regret rows)
        H = esdp_sweep.TINY_HORIZON if tiny else esdp_sweep.QUICK_HORIZON if quick else esdp_sweep.FULL_HORIZON
        study = esdp_sweep.run_study(H, insts, workers, progress, sensitivity=False)
        more["regret"] = esdp_more.regret_vs_horizon(study)
    else:
        H = esdp_more.TINY["horizon"] if tiny else esdp_more.SWEEP_HORIZON
        if name == "sequences":
            more["sequences"] = esdp_more.sequence_study(H, insts, workers, progress)
        else:
            more["servers"] = esdp_more.servers_study(esdp_more.TINY["servers"] if tiny else esdp_more.SERVERS, H,
                                                      insts, workers, progress)
    return esdp_more.ENV_ID, esdp_more.section(more), esdp_more.rows_of(more)


def _ogasched(name: str, quick: bool, workers: int, progress: bool, insts: list, tiny: bool):
    t2 = om.table2_sweep(insts, workers, progress, tiny)
    rows = om.table2_rows(t2)
    return om.ENV_ID, "\n".join(["", *om.table2_table(t2), "", stats.claims_table(rows), ""]), rows


def _gadget(name: str, quick: bool, workers: int, progress: bool, insts: list, tiny: bool):
    cfg = gadget.config(quick, insts, tiny)
    sw: dict = {"quick": quick, "cfg": cfg}
    if name == "scarce":
        sw["scarce"] = gadget.scarce_sweep(cfg, workers, progress)
        lines, rows = gadget._scarce_section(sw)
    elif name == "fig7":
        f7 = gadget.fig7_sweep(cfg)
        sw.update(r7=f7["r7"], r7_wall=f7["wall"])
        lines, rows = gadget._fig7_section(sw)
    else:  # the trace's side-by-side needs the Poisson runs of Fig. 4: the section shows the trace alone
        more = gadget_more.run(sw, quick, workers, progress, tiny)
        return gadget.ENV_ID, gadget_more.section(more), gadget_more.rows_of(more)
    return gadget.ENV_ID, "\n".join(["", *lines, "## Claims", "", stats.claims_table(rows), ""]), rows


def _opm(name: str, quick: bool, workers: int, progress: bool, insts: list, tiny: bool):
    more = {"quick": quick, "tiny": tiny, "price": opm_more.price_sweep(quick, workers, progress, insts, tiny)}
    return opm_more.ENV, opm_more.section(more), opm_more.price_rows(more["price"])


_RUN = {"esdp": _esdp, "ogasched": _ogasched, "gadget": _gadget, "opm": _opm}


def run_only(paper: str, name: str, quick: bool, out: str, workers: int, progress: bool, instances=None,
             tiny: bool = False) -> str:
    """Experiment ``name`` of ``paper`` alone (:func:`check_only` first): ``OUT/PAPER/report.md`` with its section
    and ``OUT/PAPER/results.json`` with its claims rows; returns the report's path."""
    check_only(paper, name, quick, tiny)
    insts = instances_for(quick, instances)
    env_id, section, rows = _RUN[paper](name, quick, workers, progress, insts, tiny)
    d = os.path.join(out, paper)
    os.makedirs(d, exist_ok=True)
    write_summary(d, env_id, insts, quick, tiny, rows, experiment=name)
    head = (f"# {paper}: {name} alone ({mode_name(quick, tiny)} mode)\n\n{EXPERIMENTS[paper][name]}; instances "
            f"{', '.join(map(str, insts))}. `clustergym reproduce {paper}` runs it with the paper's other "
            "experiments.\n")
    path = os.path.join(d, "report.md")
    with open(path, "w") as f:
        f.write(head + section)
    print(head + section)
    return path


def runner(paper: str, name: str, quick: bool, tiny: bool = False):
    """:func:`run_only` of ``name`` as the ``runner`` of :func:`clustergym.experiments.reproduce` and
    :func:`~clustergym.experiments.plan` (checked first: a ValueError, one line)."""
    check_only(paper, name, quick, tiny)
    return lambda n, out, workers, progress, insts: run_only(n, name, quick, out, workers, progress, instances=insts,
                                                             tiny=tiny)
