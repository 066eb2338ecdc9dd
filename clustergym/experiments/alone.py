"""The experiments of each paper that run alone (``clustergym reproduce PAPER --only NAME``): their names, for the
command line's help and checks (this module imports nothing heavy); :mod:`clustergym.experiments.single` runs them.
An experiment that the paper's quick mode does not run (its report lists it as "full mode only") runs only without
``quick``.
"""

from __future__ import annotations

__all__ = ["EXPERIMENTS", "FULL_ONLY", "experiment_names", "check_only"]

# paper -> {experiment: what it is}; the order is the report's
EXPERIMENTS: dict[str, dict[str, str]] = {
    "esdp": {"regret": "regret against the horizon (Theorem 2; Figs. 4 and 13), on the main study's runs",
             "sequences": "ESDP's δ(t) and g(t) sequences (Figs. 7-8)",
             "servers": "the number of servers |R| (Fig. 12)"},
    "ogasched": {"table2": "Table 2: the horizon T, the arrival probability ρ and the graph density"},
    "gadget": {"scarce": "Fig. 4 in a scarce-GPU regime",
               "fig7": "Fig. 7: ratio to the per-slot MILP optimum",
               "trace": "Fig. 4 with the Philly trace's arrivals"},
    "opm": {"price": "the price rule: OPM vs OPM-noest under two price rules"},
}
# the experiments quick mode lists as "full mode only"
FULL_ONLY = {("esdp", "sequences"), ("esdp", "servers"), ("ogasched", "table2"), ("gadget", "trace")}


def experiment_names(paper: str) -> list[str]:
    """The experiments of ``paper`` that ``--only`` runs (none for an unknown paper)."""
    return list(EXPERIMENTS.get(paper, {}))


def check_only(paper: str, name: str, quick: bool, tiny: bool = False) -> None:
    """A ValueError (one line) when ``paper`` has no experiment ``name``, or when quick mode does not run it."""
    if paper not in EXPERIMENTS:
        raise ValueError(f"--only names one experiment of one paper, not of {paper}")
    names = experiment_names(paper)
    if name not in names:
        valid = ", ".join(names)
        raise ValueError(f"--only {name!r} is not an experiment of {paper}; expected one of {valid}")
    if quick and (paper, name) in FULL_ONLY:
        raise ValueError(f"--only {name}: {paper}'s {name} runs in full mode only (drop --quick)")
