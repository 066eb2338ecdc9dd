"""Expected durations, printed before a long job starts (``clustergym train``, ``replay``, full ``reproduce``)."""

from __future__ import annotations

import math

__all__ = ["describe_duration"]


def describe_duration(seconds: float) -> str:
    """``seconds`` in words a reader takes in at a glance: ``"45 s"``, ``"12 min"``, ``"2.8 h"``; a value that is not
    a finite number >= 0 is ``"unknown"``."""
    s = float(seconds)
    if not math.isfinite(s) or s < 0:
        return "unknown"
    if s < 90:
        return f"{max(1, round(s))} s"
    if s < 90 * 60:
        return f"{round(s / 60)} min"
    return f"{s / 3600:.1f} h"
