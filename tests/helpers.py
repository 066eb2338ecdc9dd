"""Shared test helpers: rollouts and deep equality of observations/infos (they live in
``clustergym.testing``, which users' own envs and agents can run too)."""

from __future__ import annotations

import os
import pathlib
import shutil

from clustergym.testing import deep_equal, rollout, valid_random_action

__all__ = ["ROOT", "WINGS", "assemble", "deep_equal", "rollout", "valid_random_action"]

ROOT = pathlib.Path(__file__).resolve().parent.parent  # the repository
WINGS = {"clustergym": "", "envs": "envs", "agents": "agents", "baselines": "baselines"}  # folder -> package path


def assemble(dest: pathlib.Path) -> pathlib.Path:
    """Copy the package's Python files as installed (the wings inside ``clustergym/``) into ``dest``: the tools
    that read one package folder (import-linter, grimp, mypy) see the package as users import it."""
    for folder, sub in WINGS.items():
        shutil.copytree(ROOT / folder, dest / "clustergym" / sub, dirs_exist_ok=True,
                        ignore=lambda d, names: [n for n in names if n == "__pycache__"
                                                 or (os.path.isfile(os.path.join(d, n)) and not n.endswith(".py"))])
    return dest


# -- processes (Linux /proc), for the worker-lifetime tests ---------------------------------------
def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid``."""
    import os

    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
