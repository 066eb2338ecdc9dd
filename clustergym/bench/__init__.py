"""The bench's measuring helpers (the rows' machinery); the ``clustergym bench`` driver is
:mod:`clustergym.cli.bench`, each paper's rows are its experiment module's ``bench_rows``."""
