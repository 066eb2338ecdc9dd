"""Shared test helpers: rollouts and deep equality of observations/infos (they live in
``clustergym.runner.testing``, which users' own envs and agents can run too)."""

from __future__ import annotations

import copy
import hashlib
import os
import pathlib
import pickle
import shutil

import numpy as np

from clustergym.runner.testing import deep_equal, rollout, valid_random_action

__all__ = ["ROOT", "WINGS", "assemble", "deep_equal", "rollout", "valid_random_action", "batch_row",
           "assert_vector_runs_repeat", "snapshot", "one_line_exit_2"]

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


# -- vector envs ----------------------------------------------------------------------------------
def batch_row(tree, i):
    """Sub-env i's part of a batched info (dropping the ``_key`` masks)."""
    if isinstance(tree, dict):
        return {k: batch_row(v, i) for k, v in tree.items() if not k.startswith("_")}
    return tree[i]


def assert_vector_runs_repeat(make, act, steps: int = 70, more: int = 40) -> None:
    """Two vector envs from ``make()`` reset with one seed step identically under one stream of actions
    (``act(vec, rng, t)``); a pickled copy and a deep copy of one continue exactly as it does."""
    def run(vec, n, seed):
        rng = np.random.default_rng(seed)
        return [vec.step(act(vec, rng, t)) for t in range(n)]

    a, b = make(), make()
    a.reset(seed=3)
    b.reset(seed=3)
    assert all(deep_equal(list(x), list(y)) for x, y in zip(run(a, steps, 1), run(b, steps, 1)))
    for how in (lambda e: pickle.loads(pickle.dumps(e)), copy.deepcopy):
        clone = how(a.unwrapped)
        assert all(deep_equal(list(x), list(y)) for x, y in zip(run(a, more, 2), run(clone, more, 2)))


# -- output folders and the command line ----------------------------------------------------------
def snapshot(folder) -> dict:
    """{relative path: sha256} of every file (clustergym's lock files aside: they are not results)."""
    out = {}
    for d, _, fs in os.walk(folder):
        for f in fs:
            if f.startswith(".clustergym.lock"):
                continue
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def one_line_exit_2(capsys, argv) -> str:
    """Run the CLI in-process: it must exit 2 with one ``clustergym: error:`` line; return the line."""
    from clustergym.cli.main import main

    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, (argv, rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clustergym: error: "), err
    return lines[0]
