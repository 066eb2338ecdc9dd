"""Experiments beside each paper's main comparison: parameter sweeps, growth over the horizon and
ablations (one module per paper). Each module exposes ``run(...) -> dict`` (its claims rows and
report sections) and ``section(result) -> markdown``; ``python -m clustergym.experiments.extra.cli <paper>``
runs one experiment alone at any size.

This package is not a paper: ``clustergym.experiments.list_papers`` discovers paper modules by the
families' names only, so ``clustergym reproduce`` reaches these experiments through the paper module
that calls them.
"""
