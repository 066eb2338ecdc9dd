"""Shared test helpers: rollouts and deep equality of observations/infos (they live in
``clustergym.testing``, which users' own envs and agents can run too)."""

from __future__ import annotations

from clustergym.testing import deep_equal, rollout, valid_random_action

__all__ = ["deep_equal", "rollout", "valid_random_action"]


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
