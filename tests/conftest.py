import os

os.environ.setdefault("MPLBACKEND", "Agg")

import clustergym  # noqa: E402,F401  (registers envs)
