"""The command line, ``clustergym`` (:func:`clustergym.cli.main.main`): the parser (:mod:`~clustergym.cli.main`), the
subcommands (:mod:`~clustergym.cli.commands`) and the ``bench`` driver (:mod:`~clustergym.cli.bench`)."""
