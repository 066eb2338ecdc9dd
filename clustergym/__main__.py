"""``python -m clustergym``: the command line (:mod:`clustergym.cli.main`)."""

from clustergym.cli.main import main

if __name__ == "__main__":  # guarded so that importing the module (docs tools, pydoc) runs nothing
    raise SystemExit(main())
