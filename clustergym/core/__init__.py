"""The core layer: what every other layer builds on, importing none of them.

The agent protocol and registry (:mod:`~clustergym.core.agent`), the family specs (:mod:`~clustergym.core.family`),
scenarios and argument checks (:mod:`~clustergym.core.scenario`), the env base classes (:mod:`~clustergym.core.env`,
:mod:`~clustergym.core.vector_env`, :mod:`~clustergym.core.parallel`), metrics and statistics over instances
(:mod:`~clustergym.core.metrics`, :mod:`~clustergym.core.stats`), and the presentation helpers (plots, progress bars,
output folders, the episode viewer).
"""
